"""Forward-pass figures and text: a hand-made Trace with known numbers in, structure checked out.

No model, no torch: the record is built here, as a remote service or a saved JSON trace would give it."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from model_service.records.trace import (
    AttentionMap,
    Candidate,
    Embedding,
    EmbeddingRow,
    LensLayer,
    LogitLens,
    LogitsCost,
    PositionPrediction,
    Residual,
    Shapes,
    TeacherForcing,
    Token,
    Trace,
)
from playground.common.text import Shown
from playground.forward import charts as tc
from playground.forward import text as tt

ROOT = Path(__file__).resolve().parents[3]
PIECES = ["The", " capital", " of", " France", " is"]
V, D, L, H = 1000, 8, 3, 4


def tok(i: int) -> Token:
    return Token(i, PIECES[i])


def make_attention(t: int = 5, heads: int = H, start: int = 0, block: int = 2) -> AttentionMap:
    """Head h puts weight on the first key of the window and spreads the rest; rows sum to 1 with `earlier`."""
    w = t - start
    weights, earlier = [], []
    for _head in range(heads):
        rows, before = [], []
        for i in range(w):
            e = 0.2 if start else 0.0
            row = [0.0] * w
            row[0] = (1 - e) / 2 if i else 1 - e
            for j in range(1, i + 1):
                row[j] = (1 - e) / 2 / i
            rows.append(tuple(row))
            before.append(e)
        weights.append(tuple(rows))
        earlier.append(tuple(before))
    return AttentionMap(
        block=block, num_blocks=L, num_heads=heads, num_kv_heads=heads // 2, tokens=t,
        positions=tuple(range(start, t)), pieces=tuple(Token(i, f"t{i}") for i in range(start, t)),
        weights=tuple(weights), earlier=tuple(earlier), sliding_window=None, max_abs_diff=1e-7, ms=1.0,
    )


def cands(ids, probs) -> tuple[Candidate, ...]:
    return tuple(Candidate(i, f" w{i}", p) for i, p in zip(ids, probs))


def make_trace(t: int = 5) -> Trace:
    tokens = tuple(tok(i % 5) for i in range(t))
    lengths = tuple(sorted({1, 2, 4, 4096, t}))
    return Trace(
        prompt="The capital of France is", chat=False, model="toy", device="cpu", tokens=tokens,
        starts_with_bos=False, tokenize_ms=0.1, forward_ms=12.0, trace_ms=20.0,
        shapes=Shapes((1, t), (1, t, D), L + 1, (1, t, D), True, (1, t, V), "float32", L, D, V),
        embedding=Embedding((V, D), 1.0, tuple(EmbeddingRow(p, tokens[p].id, (0.1, -0.2, 0.3, 0.4, 0.5, 0.6), 1.5)
                                                for p in range(t)), 0),
        residual=Residual(
            positions=tuple(range(t)),
            norms=tuple(tuple(10.0 ** (k / 2) * (p + 1) for p in range(t)) for k in range(L + 1)),
            updates=tuple(tuple(float(k + 1) for _ in range(t)) for k in range(L)),
            final_norms=tuple(2.0 for _ in range(t)),
            first_numbers_start=(0.1, 0.2, 0.3), first_numbers_end=(-1.0, 2.0, -3.0),
            last_is_normed=True, final_norm="RMSNorm",
        ),
        attention=make_attention(t), attention_note="",
        predictions=tuple(
            PositionPrediction(p, tokens[p], cands([10, 11, 12], [0.5, 0.2, 0.1]),
                               None if p == t - 1 else tokens[p + 1], None if p == t - 1 else 3,
                               None if p == t - 1 else 0.05)
            for p in range(t)
        ),
        teacher=TeacherForcing(probs=tuple(0.5 for _ in range(t - 1)), ranks=tuple([0] * (t - 1)), mean_nll=0.693, perplexity=2.0),
        cost=LogitsCost(t, V, t * V * 4, lengths, tuple(n * V * 4 for n in lengths), tuple(n * V * 2 for n in lengths), V * 4, V * 2),
        lens=LogitLens(position=t - 1, target=Token(7, " Paris"), layers=tuple(
            LensLayer(k, cands([7, 8], [0.9, 0.05] if k == L else [0.1, 0.3]), 0.9 if k == L else 0.1, 0 if k == L else 1)
            for k in range(L + 1)), max_abs_diff=0.0, softcap=None),
    )


def test_record_round_trips_through_json():
    trace = make_trace()
    again = Trace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again == trace
    assert isinstance(again.attention, AttentionMap) and isinstance(again.predictions[0].top[0], Candidate)
    assert again.predictions[-1].next is None


def test_residual_heatmaps_colour_log_norms_and_hover_the_values():
    trace = make_trace()
    fig = tc.residual_figure(trace)
    norms, updates = fig.data
    assert len(norms.z) == L + 2  # embedding, blocks 1..L, and hidden_states[L] after the final norm
    assert norms.customdata[0][0] == 1.0 and norms.z[2][0] == pytest.approx(1.0)  # log10(10) at block 2
    assert list(updates.y) == list(range(1, L + 1)) and updates.customdata[0][0] == 1.0
    assert fig.layout.template.layout.to_plotly_json() == {}  # template "none": small to send
    assert "final norm" in fig.layout.yaxis.ticktext


def test_attention_grid_has_one_heatmap_per_head_with_the_causal_mask_blank():
    trace = make_trace()
    fig = tc.attention_figure(trace.attention)
    assert len(fig.data) == H
    z = fig.data[0].z
    assert all(z[i][j] is None for i in range(5) for j in range(i + 1, 5))  # above the diagonal: masked
    assert all(z[i][j] is not None for i in range(5) for j in range(i + 1))
    single = tc.attention_figure(trace.attention, head=2)
    assert len(single.data) == 1 and "head 3" in single.layout.annotations[0].text


def test_a_cut_attention_window_gets_an_earlier_column():
    a = make_attention(t=10, start=6)
    fig = tc.attention_figure(a, head=0)
    z = fig.data[0].z
    assert len(z) == 4 and len(z[0]) == 5 and list(fig.data[0].x)[0] == 5
    assert all(math.isclose(row[0] + sum(v or 0 for v in row[1:]), 1.0) for row in z)
    assert "last 4 of 10" in tt.attention_markdown(a)


def test_no_attention_shows_the_note():
    fig = tc.attention_figure(None, note="attention could not be re-run for Foo")
    assert "could not be re-run" in fig.layout.annotations[0].text


def test_predictions_outline_the_last_row_as_the_one_generation_uses():
    fig = tc.predictions_figure(make_trace())
    heat = fig.data[0]
    assert len(heat.z) == 5 and len(heat.z[0]) == 4  # top-3 + the actual next token
    assert heat.z[-1][-1] is None and "generation" in heat.text[-1][-1]
    (rect,) = fig.layout.shapes
    assert rect.y0 == 3.5 and rect.y1 == 4.5
    assert "uses only this row" in fig.layout.annotations[0].text
    assert "#4" in heat.text[0][-1]  # the next token's rank, 1-based


def test_cost_curve_is_t_times_v_times_bytes_next_to_the_flat_keep_one_line():
    fig = tc.cost_figure(make_trace())
    fp32, bf16, keep32, keep16, here = fig.data
    assert list(fp32.y) == [n * V * 4 for n in fp32.x] and list(bf16.y) == [n * V * 2 for n in bf16.x]
    assert set(keep32.y) == {V * 4} and set(keep16.y) == {V * 2}
    assert list(here.x) == [5] and list(here.y) == [5 * V * 4]
    assert fig.layout.yaxis.type == "log"


def test_lens_figure_has_a_row_per_snapshot_and_the_answer_probability():
    fig = tc.lens_figure(make_trace())
    heat, bars = fig.data
    assert list(heat.y) == list(range(L + 1)) and list(bars.x) == [0.1, 0.1, 0.1, 0.9]
    assert bars.text[-1] == "#1"


def test_text_panels_carry_the_numbers():
    trace = make_trace()
    shapes = tt.shapes_markdown(trace)
    assert "(1, 5, 1000)" in shapes and "= 3 blocks + 1" in shapes
    assert "no begin-of-text marker" in tt.input_markdown(trace)
    assert "| 0 | <code>The</code> | 0 |" in tt.embedding_markdown(trace)
    stream = tt.stream_markdown(trace)
    assert "already applied" in stream and "| hidden_states[3] | -1.000 | +2.000 | -3.000 | … |" in stream
    assert "5 × 1,000 × 4 B = **20 kB**" in tt.cost_markdown(trace)
    assert "first comes out on top after block 3" in tt.lens_markdown(trace)
    html = tt.tokens_html(trace)
    assert html.count('class="ntp-fw-tok"') == 5 and "␣capital" in html


# "Thủ đô" as SmolLM2 cuts it: ủ = e1 bb | a7, đ = c4 | 91 (with its space)
VIETNAMESE = (Token(1082, "Th"), Token(25275, "\\xe1\\xbb", bytes_hex="e1bb"), Token(117, "\\xa7", bytes_hex="a7"),
              Token(24488, " \\xc4", bytes_hex="20c4"), Token(235, "\\x91", bytes_hex="91"), Token(21637, "ô"))


def vietnamese_trace() -> Trace:
    trace = make_trace(6)
    t = VIETNAMESE
    predictions = tuple(dataclasses.replace(p, token=t[p.position], next=t[p.position + 1] if p.next else None)
                        for p in trace.predictions)
    # at position 1 (after e1 bb) the top candidates are the bytes that finish a letter
    byte_cands = (Candidate(117, "\\xa7", 0.6, bytes_hex="a7"), Candidate(221, "\\x83", 0.2, bytes_hex="83"),
                  Candidate(5, "\\xe1\\xba", 0.1, bytes_hex="e1ba"))
    predictions = tuple(dataclasses.replace(p, top=byte_cands) if p.position == 1 else p for p in predictions)
    attention = dataclasses.replace(make_attention(6, start=2), pieces=t[2:])  # a window that starts inside ủ
    return dataclasses.replace(trace, prompt="Thủ đô", tokens=t, predictions=predictions, attention=attention)


def test_vietnamese_tokens_read_as_their_characters_in_every_view():
    trace = vietnamese_trace()
    html = tt.tokens_html(trace)
    pieces = re.findall(r'<span class="ntp-fw-piece">(.*?)</span><span class="ntp-fw-id">', html)
    assert pieces == ["Th", 'ủ<sub class="ntp-part">1–2/3</sub>', 'ủ<sub class="ntp-part">3/3</sub>',
                      '␣đ<sub class="ntp-part">1/2</sub>', 'đ<sub class="ntp-part">2/2</sub>', "ô"]
    assert 'title="id 25275 · &#x27;ủ&#x27; · bytes 1–2 of 3 of ủ: \\xe1\\xbb"' in html
    assert "\\x" not in re.sub(r'title="[^"]*"', "", html)  # bytes only in titles
    ticks = tc.residual_figure(trace).layout.xaxis.ticktext
    assert ticks[1:3] == ("ủ<sub>1–2/3</sub>", "ủ<sub>3/3</sub>")
    # the attention window starts at a7: still "ủ", read with the bytes before the window
    assert tc.attention_figure(trace.attention, 0, tokens=trace.tokens).layout.yaxis.ticktext[0] == "ủ<sub>3/3</sub>"
    preds = tc.predictions_figure(trace)
    row = list(preds.data[0].text[1])
    assert row[:3] == ["ủ<sub>3/3</sub><br>60.0%", "ể<sub>3/3</sub><br>20.0%", "Ẁ…<sub>1–2/3</sub><br>10.0%"]
    assert "byte 3 of 3 of ủ: \\xa7" in preds.data[0].customdata[1][0]
    assert "| 1 | <code>ủ<sub>1–2/3</sub></code> |" in tt.embedding_markdown(trace)


def test_labels_cannot_inject_markup():
    assert tc.label(Shown("<br>")) == "&lt;br&gt;"
    assert tc.label(Shown("a" * 30)).endswith("…")


def test_no_torch_needed():
    code = (
        "import sys; import playground.forward.charts, playground.forward.text, model_service.records.trace; "
        "print([m for m in ('torch', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
