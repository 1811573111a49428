"""The Engine tab's views and its table parsing: hand-made batch steps in, figure/HTML structure out."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from model_service.records import BatchStep, DrawInfo, Stage, StepRecord, Token
from model_service.settings import SamplingSettings
from playground.engine_charts import (
    batch_heatmap, batch_sizes_summary, params_html, rows_html, settings_label, status_markdown,
)

ROOT = Path(__file__).resolve().parents[2]
TOP = 4


def record(step=0, probs=(0.6, 0.3, 0.05, 0.05), chosen=0, pieces=(" Paris", " the", "<b>", "\n"), stop=None,
           text="", raw=None):
    """A StepRecord whose candidates are ids 100.. ; chosen >= len(probs) means drawn from the tail."""
    candidates = tuple(Token(100 + i, p) for i, p in enumerate(pieces))
    inside = chosen < len(probs)
    stages = (
        Stage("raw", tuple(raw or probs), 49152, 1.0, 3.0, 0.1),
        Stage("final", tuple(probs), 10, 1.0, 1.0, probs[chosen] if inside else 0.001),
    )
    return StepRecord(
        step=step, token_id=100 + chosen if inside else 999, piece=pieces[chosen] if inside else " far",
        special=False, text=text, candidates=candidates, stages=stages, chosen_rank=chosen if inside else 41,
        draw=DrawInfo(0.5, chosen, 0.0, 1.0), seed=1, forward_ms=80.0, sampling_ms=3.0, stop_reason=stop,
    )


def batch(rows, step=3, params=None):
    active = tuple(i for i, r in enumerate(rows) if r is not None)
    params = params or {
        "temperature": [1.0] * len(active), "top_k": [0] * len(active), "top_p": [1.0] * len(active),
        "min_p": [0.0] * len(active), "greedy": [False] * len(active),
    }
    return BatchStep(step=step, rows=tuple(rows), active=active, logits_shape=(len(active), 49152), params=params,
                     forward_ms=81.5, sampling_ms=4.25)


# ---- heatmap ------------------------------------------------------------------------------------------


def test_heatmap_is_requests_by_rank_with_a_rest_column_and_the_chosen_cell_outlined():
    rows = [record(chosen=1), record(probs=(1.0, 0.0, 0.0, 0.0)), record(probs=(0.5, 0.2, 0.1, 0.1), chosen=7)]
    fig = batch_heatmap(batch(rows), ["1 · a", "2 · greedy", "3 · hot"], top=TOP)
    (heat,) = fig.data
    assert len(heat.z) == 3 and all(len(r) == TOP + 1 for r in heat.z)
    assert list(heat.z[0][:TOP]) == [0.6, 0.3, 0.05, 0.05]
    assert heat.z[0][TOP] == pytest.approx(0.0, abs=1e-9)
    assert heat.z[2][TOP] == pytest.approx(0.1)  # mass outside the shown ranks
    assert heat.zmin == 0 and heat.zmax == 1
    assert list(heat.text[0][:TOP]) == ["␣Paris", "␣the", "&lt;b&gt;", "↵"]  # pieces visible and escaped
    assert heat.text[2][TOP] == "␣far #42"  # drawn from the tail: named in the rest cell with its raw rank
    outlines = [(s.x0 + 0.5, s.y0 + 0.5) for s in fig.layout.shapes]
    assert outlines == [(1, 0), (0, 1), (TOP, 2)]
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "3", "4", "rest"]
    assert list(fig.layout.yaxis.ticktext) == ["1 · a", "2 · greedy", "3 · hot"]
    lo, hi = fig.layout.yaxis.range
    assert lo > hi  # request 1 at the top
    assert fig.layout.template.layout.to_plotly_json() == {}  # template "none": small to stream
    assert "final 30.0%" in heat.hovertext[0][1] and "raw" in heat.hovertext[0][1]


def test_finished_rows_keep_their_line_with_their_stop_reason():
    last = record(step=4, stop="eos")
    fig = batch_heatmap(batch([None, record()]), finished=[last, None], top=TOP)
    assert all(v is None for v in fig.data[0].z[0])
    notes = [a.text for a in fig.layout.annotations]
    assert notes == ["finished at step 5: end-of-text token"]
    assert fig.layout.height == 70 + 34 * 2  # height follows the number of requests, not the live batch


def test_a_full_batch_figure_stays_small():
    fig = batch_heatmap(batch([record() for _ in range(8)]), top=TOP)
    assert len(json.dumps(fig.to_plotly_json(), default=str)) < 15_000


# ---- parameter tensors, texts, status ---------------------------------------------------------------------


def test_params_html_shows_one_column_per_live_batch_row_and_the_chosen_tokens():
    rows = [record(), None, record(chosen=2)]
    params = {"temperature": [1.0, 0.8], "top_k": [0, 40], "top_p": [1.0, 0.95], "min_p": [0.0, 0.1],
              "greedy": [True, False]}
    out = params_html(batch(rows, params=params), numbers=[2, 5, 7])
    assert out.count("<br><small>row") == 2 and "<th>b0<br><small>row 2</small>" in out and "<th>b1<br><small>row 7</small>" in out
    assert "logits <code>(2, 49,152)</code>" in out and "(2,)</code> tensor" in out
    for value in ("0.95", "40", "0.1", "True", "False", "<td>100</td>", "<td>102</td>"):
        assert value in out
    assert "&lt;b&gt;" in out and "<b></td>" not in out  # a token that looks like markup stays text


def test_rows_html_streams_each_text_with_its_state():
    latest = [record(step=2, text=" Paris <3"), record(step=9, stop="stop_string", text=" and")]
    out = rows_html([1, 3], ["greedy", "T 0.8"], ["The capital", "Once"], latest)
    assert "Row 1" in out and "Row 3" in out and "T 0.8" in out
    assert " Paris &lt;3" in out and "generating · 3 tokens" in out
    assert "stopped</b> after 10 tokens: stop string" in out
    assert '<span class="ntp-prompt">The capital</span>' in out


def test_settings_labels_name_only_the_knobs_that_are_on():
    assert settings_label(SamplingSettings(temperature=0)) == "greedy"
    assert settings_label(SamplingSettings(temperature=0.8, top_p=0.95)) == "T 0.8 · top-p 0.95"
    assert settings_label(SamplingSettings(min_p=0.1)) == "min-p 0.1"
    assert settings_label(SamplingSettings(temperature=0.6, top_k=40, order="vllm")) == "T 0.6 · top-k 40 · vllm"
    assert settings_label(SamplingSettings()) == "T 1 (plain sampling)"


def test_batch_sizes_and_status():
    assert batch_sizes_summary([6, 6, 5, 5, 5, 2]) == "6 rows for steps 1–2 · 5 for steps 3–5 · 2 for step 6"
    assert batch_sizes_summary([1]) == "1 row for step 1"
    st = batch([record(), None, record()])
    line = status_markdown(st, [3, 2], tokens=5, seconds=0.5)
    assert "**Step 4**" in line and "batch of **2** of 3 rows" in line and "10.0 tokens/s" in line
    assert "All rows finished" in status_markdown(st, [3, 2], 5, 0.5, done=True)
    assert "Run" in status_markdown(None)


def test_engine_views_import_neither_torch_nor_gradio_and_the_tab_no_torch():
    code = "import sys, playground.engine_charts; print(sorted({'torch', 'gradio'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
    code = "import sys, playground.engine_tab; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


# ---- the table: what gr.Dataframe may hand over ----------------------------------------------------------

from playground.engine_tab import MAX_ROWS, parse_stop_cell, parse_table, renumber  # noqa: E402

GOOD = ["The capital of France is", 0, 0, 1, 0, "hf", "", 24, "\\n"]


def test_cells_may_be_strings_nan_or_none_and_blank_means_default():
    numbers, requests = parse_table([
        GOOD,
        ["Once", "0.8", "", "0.95", None, " VLLM ", "7", "12.0", "a|b"],
        [None, float("nan"), "", None, None, None, None, None, None],  # an empty row: skipped
        ["x", None, float("nan"), None, None, None, float("nan"), None, None],
    ])
    assert numbers == [1, 2, 4]  # table numbering kept
    q = requests[1]
    assert (q.settings.temperature, q.settings.top_k, q.settings.top_p, q.settings.min_p) == (0.8, 0, 0.95, 0.0)
    assert q.settings.order == "vllm" and q.settings.seed == 7 and q.max_new_tokens == 12 and q.stop == ("a", "b")
    d = requests[2]
    assert (d.settings.temperature, d.settings.top_k, d.settings.top_p, d.settings.seed) == (1.0, 0, 1.0, None)
    assert d.max_new_tokens == 32 and requests[0].settings.greedy and requests[0].stop == ("\n",)


def test_a_pandas_frame_and_the_api_dict_are_accepted():
    import pandas as pd

    frame = pd.DataFrame([GOOD, ["y", None, None, None, None, None, None, None, None]])
    assert [q.prompt for q in parse_table(frame)[1]] == ["The capital of France is", "y"]
    assert parse_table({"headers": [], "data": [GOOD[:3]]})[1][0].max_new_tokens == 32  # short rows padded


@pytest.mark.parametrize("cell, expected", [
    ("", ()), (None, ()), (".", (".",)), (" 7|.", (" 7", ".")), ("\\n|\\t", ("\n", "\t")),
    ("a\\|b", ("a|b",)), ("||x||", ("x",)),
])
def test_stop_cells(cell, expected):
    assert parse_stop_cell(cell) == expected


@pytest.mark.parametrize("row, needle", [
    (["", 1, 0, 1, 0, "hf", "", 8, ""], "row 2, prompt: empty"),
    (["x", "hot", 0, 1, 0, "hf", "", 8, ""], "row 2, temperature: must be a number, got 'hot'"),
    (["x", 1, 2.5, 1, 0, "hf", "", 8, ""], "row 2, top-k: must be a whole number"),
    (["x", 1, 0, 3, 0, "hf", "", 8, ""], r"row 2: top_p must be in \(0, 1\]"),
    (["x", -1, 0, 1, 0, "hf", "", 8, ""], "row 2: temperature must be a finite number >= 0"),
    (["x", 1, 0, 1, 0, "greedy", "", 8, ""], "row 2, order: must be one of hf, vllm, llama.cpp"),
    (["x", 1, 0, 1, 0, "hf", "1.5", 8, ""], "row 2, seed: must be a whole number"),
    (["x", 1, 0, 1, 0, "hf", "-3", 8, ""], "row 2: seed must be between"),
    (["x", 1, 0, 1, 0, "hf", "", 0, ""], "row 2, max tokens: must be between 1 and 256"),
    (["x", 1, 0, 1, 0, "hf", "", float("inf"), ""], "row 2, max tokens: must be a finite number"),
    (["x", True, 0, 1, 0, "hf", "", 8, ""], "row 2, temperature: must be a finite number"),
])
def test_bad_cells_are_refused_naming_the_row_and_the_field(row, needle):
    with pytest.raises(ValueError, match=needle):
        parse_table([GOOD, row])


def test_more_than_eight_requests_or_none_are_refused():
    with pytest.raises(ValueError, match=f"at most {MAX_ROWS} requests.*has 9: remove 1 row"):
        parse_table([GOOD] * 9)
    assert len(parse_table([GOOD] * 8 + [[None] * 9])[1]) == 8  # a blank 9th row is not a request
    for empty in (None, [], [[None] * 9]):
        with pytest.raises(ValueError, match="no requests"):
            parse_table(empty)


def test_service_messages_are_renumbered_to_table_rows():
    assert renumber("request 2: prompt + max_new_tokens exceeds", [1, 4]) == "row 4: prompt + max_new_tokens exceeds"
    assert renumber("a batch needs 1 to 64 requests", [1]) == "a batch needs 1 to 64 requests"
