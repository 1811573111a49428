"""Chart builders: hand-made records with known numbers in, figure structure checked out."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from model_service.records.step import DrawInfo, Stage, StepRecord, Token
from playground.common.text import visible_piece
from playground.lab.charts import BLUE, GREY, VERMILLION, draw_figure, empty_figure, run_figure, stage_figure
from playground.lab.stage_panels import WIDE_TITLES_UP_TO

ROOT = Path(__file__).resolve().parents[3]
PIECES = [" Paris", " the", " London", "\n", "<b>"]
# A 5-candidate step in HF order: T sharpens, top-k=3 cuts rows 3-4, top-p cuts row 2.
PROBS = {
    "raw": [0.5, 0.2, 0.15, 0.1, 0.05],
    "temperature": [0.6, 0.2, 0.12, 0.06, 0.02],
    "top_k": [0.652, 0.217, 0.131, 0.0, 0.0],
    "top_p": [0.75, 0.25, 0.0, 0.0, 0.0],
    "min_p": [0.75, 0.25, 0.0, 0.0, 0.0],
    "final": [0.75, 0.25, 0.0, 0.0, 0.0],
}
KEPT = {"raw": 49152, "temperature": 49152, "top_k": 3, "top_p": 2, "min_p": 2, "final": 2}
MASS = {"raw": 1.0, "temperature": 1.0, "top_k": 0.92, "top_p": 0.869, "min_p": 1.0, "final": 1.0}


def make_record(
    probs: dict[str, list[float]] | None = None,
    *,
    chosen: int = 0,
    pieces: list[str] | None = None,
    u: float | None = 0.3,
    step: int = 0,
    chosen_prob: float | None = None,
    low: float = 0.0,
    high: float = 0.75,
    capture: bool = True,
) -> StepRecord:
    """A StepRecord with candidate ids 100, 101, …; `chosen` is a candidate index, or an id >= 1000
    for a token outside the candidates (then `chosen_prob` is its probability in every stage)."""
    probs = PROBS if probs is None else probs
    pieces = pieces or PIECES
    n = len(next(iter(probs.values())))
    candidates = tuple(Token(100 + i, pieces[i % len(pieces)]) for i in range(n))
    inside = chosen < n
    token_id = 100 + chosen if inside else chosen
    stages = tuple(
        Stage(
            name=name, probs=tuple(ps), kept_count=KEPT.get(name, 5), kept_mass=MASS.get(name, 1.0),
            entropy_bits=1.5 + step, chosen_prob=ps[chosen] if inside else chosen_prob,
        )
        for name, ps in probs.items()
    )
    return StepRecord(
        step=step, token_id=token_id, piece=candidates[chosen].piece if inside else " far",
        special=False, text="", candidates=candidates if capture else (), stages=stages if capture else (),
        chosen_rank=chosen if inside else 41, draw=DrawInfo(u=u, rank=chosen if inside else 41, low=low, high=high),
        seed=1, forward_ms=1.0, sampling_ms=0.1,
    )


def colours(trace) -> list[str]:
    return list(trace.marker.color)


# ---- labels ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "piece, special, expected",
    [
        (" Paris", False, "␣Paris"),
        ("end  ", False, "end␣␣"),
        ("a b", False, "a b"),
        (" ", False, "␣"),
        ("\n", False, "↵"),
        ("\n\n", False, "↵↵"),
        ("\tx", False, "⇥x"),
        ("", False, "∅"),
        ("\\xe2", False, "\\xe2"),  # a literal backslash text stays as typed
        ("a\x07\x7f", False, "a␇␡"),  # control characters as their Unicode pictures, never \\x07
        ("<|im_end|>", True, "⟨|im_end|⟩"),
        ("</s>", True, "⟨/s⟩"),
        ("", True, "⟨∅⟩"),
    ],
)
def test_visible_piece(piece, special, expected):
    assert visible_piece(piece, special) == expected


# ---- stage figure -----------------------------------------------------------------------------------


def test_one_panel_per_stage_in_record_order_with_titles():
    fig = stage_figure(make_record())
    assert len(fig.data) == 6
    titles = [a.text for a in fig.layout.annotations][:6]
    assert titles[0] == "raw softmax<br>49,152 tokens"
    assert titles[1].startswith("after temperature")
    # six panels: a line per fact (at 1024 px a panel is ~100 px wide)
    assert titles[2] == "after top-k<br>kept 3<br>mass 0.92"
    assert titles[3] == "after top-p<br>kept 2<br>mass 0.87"
    assert titles[4].startswith("after min-p") and "kept 2" in titles[4]
    assert titles[5].startswith("final (sampled from)")
    folded = [a.text for a in stage_figure(make_record(), fold=True).layout.annotations]
    assert len(stage_figure(make_record(), fold=True).data) <= WIDE_TITLES_UP_TO or "kept 3<br>mass" in folded[2]


def test_every_chart_text_is_at_least_12_px_in_the_lab_and_14_in_the_presenter_view():
    from playground.common.figures import BIG_TEXT, TEXT
    from playground.lab.view import View, draw_chart, run_chart, stage_chart

    from .test_view import font_sizes

    records = [make_record(step=0), make_record(step=1)]
    for present, least in ((False, TEXT), (True, BIG_TEXT)):
        view = View(present=present)
        for fig in (stage_chart(records[0], view), stage_chart(records[0], view, fold=False),
                    draw_chart(records[0], view), run_chart(records, 1, view)):
            spec = fig.to_plotly_json()
            assert min(font_sizes(spec)) >= least
            assert spec["layout"].get("uniformtext", {}).get("minsize", least) >= least


def test_bars_follow_candidates_top_first_in_every_panel():
    fig = stage_figure(make_record())
    for trace in fig.data:
        assert list(trace.y) == [0, 1, 2, 3, 4]
        assert trace.orientation == "h"
    labels = list(fig.layout.yaxis.ticktext)
    plain = [label.replace("<b>", "").replace("</b>", "") for label in labels]
    assert plain == ["␣Paris", "␣the", "␣London", "↵", "&lt;b&gt;"]
    lo, hi = fig.layout.yaxis.range
    assert lo > hi  # reversed: row 0 (most probable) at the top
    for i in range(2, 7):
        assert fig.layout[f"yaxis{i}"].matches == "y" or fig.layout[f"yaxis{i}"].showticklabels is False


def test_greyed_bars_are_exactly_what_each_stage_removed():
    fig = stage_figure(make_record())
    grey = {i: [j for j, c in enumerate(colours(t)) if c == GREY] for i, t in enumerate(fig.data)}
    assert grey == {0: [], 1: [], 2: [3, 4], 3: [2], 4: [], 5: []}
    top_k, top_p = fig.data[2], fig.data[3]
    assert list(top_k.x)[3:] == PROBS["temperature"][3:]  # drawn at their height before the cut
    assert list(top_p.x)[2] == PROBS["top_k"][2]
    assert "removed by top-k" in top_k.hovertext[3]
    assert "removed by top-p" in top_p.hovertext[2]
    assert list(top_p.x)[3:] == [0.0, 0.0]  # cut earlier: no bar, hover names who cut it
    assert "removed by top-k" in top_p.hovertext[4]


def test_temperature_underflow_is_not_shown_as_a_cut():
    probs = {"raw": [0.9, 0.1], "temperature": [1.0, 0.0], "final": [1.0, 0.0]}
    fig = stage_figure(make_record(probs))
    assert GREY not in colours(fig.data[1]) and GREY not in colours(fig.data[2])


def test_chosen_token_is_vermillion_everywhere_and_its_label_bold():
    fig = stage_figure(make_record(chosen=1, u=0.8))
    for trace in fig.data:
        assert colours(trace)[1] == VERMILLION
        assert colours(trace)[0] == BLUE
        assert colours(trace).count(VERMILLION) == 1
    labels = list(fig.layout.yaxis.ticktext)
    assert labels[1] == "<b>␣the</b>"
    assert sum("<b>" in label for label in labels) == 1


def test_chosen_outside_candidates_gets_its_own_last_row():
    fig = stage_figure(make_record(chosen=1234, chosen_prob=0.01, u=0.95, low=0.94, high=0.95))
    labels = list(fig.layout.yaxis.ticktext)
    assert len(labels) == 6 and labels[-1] == "<b>␣far #42</b>"
    for trace in fig.data:
        assert len(trace.y) == 6
        assert colours(trace)[-1] == VERMILLION and trace.x[-1] == 0.01


def test_greedy_final_is_argmax_and_greys_the_rest():
    probs = {"raw": [0.5, 0.3, 0.2], "temperature": [0.5, 0.3, 0.2], "final": [1.0, 0.0, 0.0]}
    fig = stage_figure(make_record(probs, u=None))
    assert fig.layout.annotations[2].text.startswith("final: argmax")
    assert colours(fig.data[2]) == [VERMILLION, GREY, GREY]
    assert "removed by argmax" in fig.data[2].hovertext[1]


def test_fixed_unit_x_range_and_small_json():
    names = ["raw", "temperature", "top_k", "top_p", "min_p", "final"]
    probs = {name: [round(0.5 / (i + 1), 6) for i in range(20)] for name in names}
    pieces = [f" token{i}" for i in range(20)]
    fig = stage_figure(make_record(probs, pieces=pieces))
    for i in ["", 2, 3, 4, 5, 6]:
        assert list(fig.layout[f"xaxis{i}"].range) == [0, 1]
    assert len(fig.layout.template.to_plotly_json()["data"]) <= 1  # "none", not the 6 KB default theme
    assert fig.layout.showlegend is False
    assert len(fig.to_json()) < 25_000


def test_capture_off_gives_a_placeholder():
    fig = stage_figure(make_record(capture=False))
    assert len(fig.data) == 0 and "capture" in fig.layout.annotations[0].text


# ---- draw figure ------------------------------------------------------------------------------------


def test_draw_segments_are_contiguous_sum_to_at_most_one_and_mark_u():
    probs = {"raw": [0.5, 0.2, 0.1], "final": [0.5, 0.2, 0.1]}  # 0.2 of mass outside the candidates
    fig = draw_figure(make_record(probs, chosen=1, u=0.6))
    bar = fig.data[0]
    widths, bases = list(bar.x), list(bar.base)
    assert sum(widths) <= 1 + 1e-9
    assert bases[0] == 0 and all(math.isclose(b + w, nb) for b, w, nb in zip(bases, widths, bases[1:]))
    assert widths[:3] == [0.5, 0.2, 0.1] and math.isclose(widths[3], 0.2)
    assert list(bar.marker.color) == [BLUE, VERMILLION, "#56B4E9", GREY]
    (line,) = fig.layout.shapes
    assert line.x0 == line.x1 == 0.6
    assert any(a.text == "u = 0.600" for a in fig.layout.annotations)


def test_draw_skips_zero_probability_candidates_and_full_mass_has_no_rest():
    fig = draw_figure(make_record(u=0.2))
    assert list(fig.data[0].x) == [0.75, 0.25]
    assert GREY not in list(fig.data[0].marker.color)


def test_draw_chosen_from_the_tail_is_marked_inside_the_rest():
    probs = {"raw": [0.5, 0.2], "final": [0.5, 0.2]}
    fig = draw_figure(make_record(probs, chosen=1234, chosen_prob=0.05, u=0.9, low=0.88, high=0.93))
    bar = fig.data[0]
    i = list(bar.marker.color).index(VERMILLION)
    assert math.isclose(bar.base[i], 0.88) and math.isclose(bar.x[i], 0.05)
    assert sum(bar.x) <= 1 + 1e-9


def test_greedy_draw_has_no_marker_and_says_so():
    fig = draw_figure(make_record(u=None))
    assert len(fig.layout.shapes) == 0
    assert [a.text for a in fig.layout.annotations] == ["greedy: argmax, no random draw"]


# ---- run figure ---------------------------------------------------------------------------------------


def test_run_figure_has_three_series_one_point_per_captured_step():
    records = [make_record(step=i, chosen=i % 2, u=0.1) for i in range(4)]
    records.insert(2, make_record(step=9, capture=False))  # capture off: skipped
    fig = run_figure(records)
    assert len(fig.data) == 3
    p, h, kept = fig.data
    assert all(len(t.x) == len(t.y) == 4 for t in fig.data)
    assert list(p.x) == [1, 2, 3, 4]  # steps counted from 1, as the status line and the scrubber count them
    assert list(p.y) == [0.75, 0.25, 0.75, 0.25]  # chosen prob under "final"
    assert list(h.y) == [1.5, 2.5, 3.5, 4.5]  # raw entropy
    assert list(kept.y) == [2, 2, 2, 2] and kept.yaxis == "y3"
    assert fig.layout.yaxis3.type == "log"
    assert "␣the" in p.hovertext[1] or "' the'" in p.hovertext[1]


def test_candidates_are_read_after_the_half_written_character_before_them():
    """After " th" + e1 bb, the byte candidates 83 / 89 finish ể / ỉ; a candidate that starts a
    character of its own shows what it can become; the chosen token's hover keeps its bytes."""
    record = make_record(pieces=[" th", "ô", "Ā"])  # placeholders, replaced below
    candidates = (
        Token(100, "\\x83", bytes_hex="83"), Token(101, "\\x89", bytes_hex="89"), Token(102, "\\xe1\\xbb", bytes_hex="e1bb"),
        Token(103, "ô"), Token(104, "<b>"),
    )
    record = replace(record, candidates=candidates, piece="\\x83", bytes_hex="83", pending_hex="e1bb")
    fig = stage_figure(record)
    labels = [label.replace("<b>", "", 1).replace("</b>", "") if i == 0 else label
              for i, label in enumerate(fig.layout.yaxis.ticktext)]
    assert labels == ["ể<sub>3/3</sub>", "ỉ<sub>3/3</sub>", "Ề…<sub>1–2/3</sub>", "ô", "&lt;b&gt;"]
    assert "byte 3 of 3 of ể: \\x83" in fig.data[0].hovertext[0]
    draw = draw_figure(record)
    assert draw.data[0].text[0] == "ể<sub>3/3</sub>"
    assert "\\x" not in "".join(fig.layout.yaxis.ticktext) + "".join(draw.data[0].text)


def test_run_figure_reads_each_step_in_the_run():
    records = [make_record(step=0, pieces=["Th"]), make_record(step=1, pieces=["x"]), make_record(step=2, pieces=["y"])]
    records[1] = replace(records[1], piece="\\xe1\\xbb", bytes_hex="e1bb")
    records[2] = replace(records[2], piece="\\xa7", bytes_hex="a7", pending_hex="e1bb")
    hover = run_figure(records).data[0].hovertext
    assert "step 2 · 'ủ' · bytes 1–2 of 3 of ủ" in hover[1] and "step 3 · 'ủ' · byte 3 of 3 of ủ" in hover[2]


def test_run_figure_marks_the_step_shown_and_never_says_p_0():
    records = [make_record(step=i, u=0.1) for i in range(3)]
    records[1] = replace(records[1], stages=tuple(replace(s, chosen_prob=0.0004) for s in records[1].stages))
    fig = run_figure(records, selected=1)
    assert fig.layout.shapes and all(m.x0 == m.x1 == 2 for m in fig.layout.shapes)  # step 2, as the scrubber says
    assert fig.data[0].hovertext[1].endswith("p = <0.001")
    assert not run_figure(records).layout.shapes


def test_run_figure_placeholders():
    assert len(run_figure([]).data) == 0
    fig = run_figure([make_record(capture=False)])
    assert len(fig.data) == 0 and "capture" in fig.layout.annotations[0].text


def test_empty_figure_centres_its_message():
    fig = empty_figure("Run something", height=150)
    (note,) = fig.layout.annotations
    assert note.text == "Run something" and (note.x, note.y) == (0.5, 0.5)
    assert fig.layout.height == 150


def test_draw_clamps_rounding_overshoot_to_one():
    probs = {"raw": [0.500004, 0.500003], "final": [0.500004, 0.500003]}  # 6-digit rounding can pass 1
    bar = draw_figure(make_record(probs, u=0.99)).data[0]
    assert sum(bar.x) <= 1 + 1e-12 and len(bar.x) == 2


def test_playground_figures_import_neither_torch_nor_gradio():
    code = "import sys, playground.lab.charts, playground.lab.chips; print(sorted({'torch', 'gradio'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# ---- in Vietnamese ------------------------------------------------------------------------------------

ENGLISH_WORDS = ("after", "kept", "mass", "removed", "chosen", "tokens", "rest", "other", "step", "capture was")


def figure_text(fig) -> str:
    """Every text a learner can read on the figure: titles, annotations, axis titles, trace names, hover."""
    layout = fig.layout.to_plotly_json()
    texts = [a.get("text", "") for a in layout.get("annotations", [])]
    texts += [v.get("title", {}).get("text", "") for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))]
    for trace in fig.data:
        texts += [trace.name or "", *(getattr(trace, "hovertext", None) or ()), *(getattr(trace, "text", None) or ())]
    return " | ".join(str(t) for t in texts)


def test_stage_figure_in_vietnamese_titles_key_and_hover():
    fig = stage_figure(make_record(), lang="vi")
    titles = [a.text for a in fig.layout.annotations][:6]
    assert titles[0] == "softmax gốc<br>49,152 token"  # numbers keep the UI's formatting
    assert titles[2] == "sau top-k<br>giữ 3<br>tổng 0.92"
    assert titles[5] == "cuối (lấy mẫu từ đây)<br>giữ 2"
    assert "được giữ" in fig.layout.annotations[6].text and "bị giai đoạn này cắt bỏ" in fig.layout.annotations[6].text
    assert fig.data[2].hovertext[3] == "'\\n' · bị top-k cắt bỏ (trước đó 6.0%)"
    assert fig.data[3].hovertext[4] == "'&lt;b&gt;' · bị top-k cắt bỏ"  # the piece stays escaped
    text = figure_text(fig).replace("top-k", "").replace("top-p", "")
    assert not any(word in text for word in ENGLISH_WORDS), text
    greedy = stage_figure(make_record({"raw": [0.6, 0.4], "final": [1.0, 0.0]}, u=None), lang="vi")
    assert greedy.layout.annotations[1].text == "cuối: argmax<br>giữ 2"


def test_the_cached_layout_keeps_one_key_per_language():
    english, vietnamese = stage_figure(make_record()), stage_figure(make_record(), lang="vi")
    assert "removed by this stage" in english.layout.annotations[6].text
    assert "removed" not in vietnamese.layout.annotations[6].text
    assert "removed by this stage" in stage_figure(make_record()).layout.annotations[6].text


def test_draw_figure_in_vietnamese():
    probs = {"raw": [0.5, 0.2], "final": [0.5, 0.2]}
    fig = draw_figure(make_record(probs, chosen=1234, chosen_prob=0.05, u=0.9, low=0.88, high=0.93), lang="vi")
    assert "còn lại" in list(fig.data[0].text) and any(h.startswith("các token khác · ") for h in fig.data[0].hovertext)
    assert [a.text for a in draw_figure(make_record(u=None), lang="vi").layout.annotations] == [
        "greedy: lấy argmax, không rút ngẫu nhiên"]
    rest = draw_figure(make_record({"raw": [0.5, 0.2, 0.1], "final": [0.5, 0.2, 0.1]}, chosen=1, u=0.6), lang="vi")
    assert rest.data[0].hovertext[-1].startswith("mọi token khác · ")
    assert "capture đang tắt" in draw_figure(make_record(capture=False), lang="vi").layout.annotations[0].text


def test_run_figure_in_vietnamese_axes_legend_and_hover():
    fig = run_figure([make_record(step=i, u=0.1) for i in range(3)], lang="vi")
    assert [t.name for t in fig.data] == ["p(được chọn), cuối", "entropy, gốc (bit)", "số được giữ, cuối (log)"]
    assert (fig.layout.yaxis.title.text, fig.layout.yaxis2.title.text, fig.layout.yaxis3.title.text) == (
        "p được chọn", "bit", "được giữ")
    assert fig.layout.xaxis2.title.text == "bước"
    assert fig.data[1].hovertext[0] == "bước 1 · ' Paris'<br>H = 1.50 bit"
    assert fig.data[2].hovertext[0].endswith("<br>giữ 2")
    assert not any(word in figure_text(fig) for word in ENGLISH_WORDS)
    assert run_figure([], lang="vi").layout.annotations[0].text == "Chạy thử một lượt để xem các bước."


def test_english_is_the_default_of_every_chart():
    record = make_record()
    for build in (stage_figure, draw_figure):
        assert build(record).to_json() == build(record, lang="en").to_json()
    assert run_figure([record]).to_json() == run_figure([record], lang="en").to_json()
    assert run_figure([record]).layout.xaxis2.title.text == "step"


def test_each_stage_bar_carries_its_token_id_for_a_click_to_ban_it():
    record = make_record()
    fig = stage_figure(record)
    ids = [t.id for t in record.candidates]
    assert all(list(trace.customdata) == ids for trace in fig.data)
    far = make_record(chosen=1234, chosen_prob=0.01)  # a chosen token outside the candidates: its own row, its id
    assert list(stage_figure(far).data[0].customdata) == [*ids, 1234]


def mirostat_run() -> list[StepRecord]:
    records = []
    for i, mu in enumerate((6.0, 6.4, 6.9)):
        r = make_record(step=i)
        cut = Stage("mirostat", r.stages[-1].probs, 3, 0.9, 1.0, r.stages[-1].chosen_prob, applied=mu)
        records.append(replace(r, stages=(*r.stages[:-1], cut, r.stages[-1]), mirostat_mu=mu + 0.4))
    return records


def test_a_mirostat_run_draws_mu_and_each_tokens_surprise_on_the_bits_axis():
    records = mirostat_run()
    fig = run_figure(records, lang="en")
    names = [t.name for t in fig.data]
    assert "mirostat μ (bits)" in names and "surprise of the drawn token (bits)" in names
    mu = next(t for t in fig.data if t.name == "mirostat μ (bits)")
    assert list(mu.y) == [6.0, 6.4, 6.9]
    assert "mirostat μ (bits)" not in [t.name for t in run_figure([make_record()]).data]


@pytest.mark.parametrize("build", [
    lambda: stage_figure(make_record()), lambda: stage_figure(make_record(u=None), fold=True, log=True, lang="vi"),
    lambda: stage_figure(make_record(chosen=1234, chosen_prob=0.01), rows=3, present=True),
    lambda: draw_figure(make_record(u=0.6)), lambda: draw_figure(make_record(u=0.05), lang="vi"),
    lambda: draw_figure(make_record(u=None)), lambda: draw_figure(make_record(chosen=1234, chosen_prob=0.05, u=0.9,
                                                                          low=0.88, high=0.93)),
    lambda: run_figure([make_record(step=i) for i in range(9)]), lambda: run_figure([make_record()], selected=0),
    lambda: run_figure(mirostat_run(), selected=2, lang="vi"), lambda: empty_figure("nothing <b>yet</b>", 120),
], ids=["stage", "stage-folded-log-vi", "stage-present-tail", "draw", "draw-u-low-vi", "draw-greedy", "draw-tail",
        "run", "run-one-shown", "run-mirostat-vi", "empty"])
def test_a_figure_built_without_plotlys_checks_is_what_its_checks_make_of_it(build):
    # the streamed figures skip plotly's per-property validation (a cached, validated layout and plain traces):
    # validating one again changes nothing and raises on no name (a misspelt property would raise here)
    import plotly.graph_objects as go

    fig = build()
    assert go.Figure(fig.to_plotly_json()).to_plotly_json() == fig.to_plotly_json()


def test_a_stage_layout_is_validated_once_per_shape_whatever_its_rows():
    """A knob's first move in a shape (panels, view, language) once cost the server ~230 ms of plotly's checks, and
    every new count of rows another: the layout is cached without its rows, warmed at start (app.py)."""
    from playground.lab.stage_panels import _stage_layout, warm_layouts

    _stage_layout.cache_clear()
    assert warm_layouts(("en",), panels=3) == 6  # the lab's view and the presenter's, 1-3 panels
    built = _stage_layout.cache_info().misses
    for n in (3, 5, 8):
        probs = {name: [1.0 / (i + 2) for i in range(n)] for name in ("raw", "temperature", "top_k")}
        fig = stage_figure(make_record(probs, chosen=1))
        for axis in (fig.layout.yaxis, fig.layout.yaxis3):
            assert list(axis.tickvals) == list(range(n)) and tuple(axis.range) == (n - 0.5, -0.5)
        assert len(fig.layout.yaxis.ticktext) == n
    assert _stage_layout.cache_info().misses == built  # no new layout for 3, 5 or 8 rows
