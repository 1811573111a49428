"""The busy-room lesson's table and figure (playground/lab/batch_effect_views.py) from hand-made records."""

from __future__ import annotations

from model_service.records.batch_effect import ArithmeticCheck, BatchEffect
from model_service.records.step import DrawInfo, Token
from playground.lab.batch_effect_views import batch_effect_figure, batch_effect_markdown

A, B, C, D = Token(1, " very"), Token(2, " film"), Token(3, "<b>x</b>"), Token(4, " the")


def check(on: bool, room: Token = A, delta: float = 3e-5, shift: float = 2e-6, margin: float = 0.01) -> ArithmeticCheck:
    d = 0.0 if on else delta
    return ArithmeticCheck(
        batch_invariant=on, max_delta=d, changed=0 if on else 40_000, bar_delta=d, delta_token=C if d else A,
        delta_rank=2 if d else 0, delta_low=0.7 if d else 0.0, delta_high=0.9 if d else 0.5,
        alone=A, alone_draw=DrawInfo(u=0.49, rank=0, low=0.0, high=0.5, margin=margin), room=room,
        room_draw=DrawInfo(u=0.49, rank=0 if room == A else 1, low=0.0, high=0.5, margin=margin),
        edge_shift=0.0 if on else shift, deltas=(d, -d / 2, d / 3, 0.0),
    )


def effect(default: ArithmeticCheck, invariant: ArithmeticCheck | None = None, u: float | None = 0.49) -> BatchEffect:
    return BatchEffect(step=2, seed=42, u=u, rows=16, joined_after=1, candidates=(A, B, C, D), probs=(0.5, 0.2, 0.2, 0.1),
                       default=default, invariant=invariant, room_invariant=False, forward_ms=1200.0)


def test_no_flip_says_how_far_u_sat_from_the_edge_against_how_far_the_room_moved_it():
    text = batch_effect_markdown(effect(check(False), check(True)), "en", 49_152)
    assert "**Step 3**, seed 42" in text and "row 16 of a room of 16" in text and "**0.490000**" in text
    assert "40,000 / 49,152" in text and "0 / 49,152" in text
    assert "no flip: u sat 1.00e-02 from the edge, 5,000× farther than the room moved it (2.00e-06)" in text
    assert "bit-identical" in text and "default arithmetic" in text
    assert "<b>" not in text and "&lt;b&gt;" in text  # a token is escaped in the table


def test_a_flip_is_named_with_both_tokens_and_a_knife_edge_is_marked():
    text = batch_effect_markdown(effect(check(False, room=B, margin=5e-7, shift=1e-6), check(True, margin=5e-7)), "en")
    assert "**flipped**: the room drew ␣film where alone drew ␣very" in text
    assert "knife's edge" in text


def test_greedy_compares_the_top_two_gap_and_vietnamese_reads_it():
    greedy = check(False)
    greedy = ArithmeticCheck(**{**greedy.__dict__, "alone_draw": DrawInfo(None, 0, 0.0, 1.0, None, 1.25)})
    text = batch_effect_markdown(effect(greedy, None, u=None), "en")
    assert "Greedy: no u" in text and "the top two are 1.25e+00 apart" in text
    vi = batch_effect_markdown(effect(check(False), check(True)), "vi")
    assert "số học mặc định" in vi and "chế độ batch-invariant" in vi and "giống hệt từng bit" in vi


def test_a_model_the_mode_cannot_serve_says_why():
    e = BatchEffect(**{**effect(check(False)).__dict__, "invariant_unavailable": "its attention has sinks"})
    text = batch_effect_markdown(e, "en")
    assert "cannot serve this model: its attention has sinks" in text and "batch-invariant mode |" not in text


def test_the_figure_draws_the_bar_u_and_each_arithmetics_deltas():
    fig = batch_effect_figure(effect(check(False), check(True)), "en")
    names = [t.name for t in fig.data if t.name]
    assert any(n.startswith("default arithmetic (max |Δ| 3.00e-05)") for n in names)
    assert any(n.startswith("batch-invariant mode (max |Δ| 0)") for n in names)
    assert any(a.text == "u = 0.4900" for a in fig.layout.annotations)
    assert "&lt;b&gt;" in "".join(fig.layout.yaxis2.ticktext)  # plotly labels escaped too
    assert batch_effect_figure(None, "vi").layout.annotations[0].text.startswith("Hãy tạo")


def test_the_note_says_which_arithmetic_the_live_room_runs():
    import dataclasses

    base = effect(check(False), check(True))
    notes = {mode: batch_effect_markdown(dataclasses.replace(base, **how), lang, 49_152)
             for mode, how in (("off", {}), ("on", {"room_invariant": True}), ("native", {"room_native": True}))
             for lang in ("en",)}
    assert "**default arithmetic**" in notes["off"] and "**batch-invariant mode**" in notes["on"]
    assert "**native CPU step**" in notes["native"] and "bit for bit" in notes["native"]
    assert "**bước CPU gốc (native)**" in batch_effect_markdown(dataclasses.replace(base, room_native=True), "vi")
