"""The interventions' lines and charts (playground/forward/intervene_text.py, intervene_charts.py): hand-made
records in; every token escaped, the running total ending at the logit difference, the kept counts said."""

from __future__ import annotations

import json
from dataclasses import replace

import plotly.graph_objects as go
import pytest

from model_service.records.intervention import Attribution, Knockout, KnockoutResult, PatchCell, PatchResult
from model_service.records.step import Token
from playground.forward.intervene_charts import attribution_figure, knockout_figure, patch_figure
from playground.forward.intervene_text import (
    attribution_markdown,
    knockout_markdown,
    patch_cell_markdown,
    patch_markdown,
    steer_markdown,
)
from tests.unit.lab.test_charts import make_record

BOLD = Token(7, "<b>x</b>")


def attribution(**changes) -> Attribution:
    a = Attribution(candidate=BOLD, rival=Token(8, " the"), logit_diff=2.0, scale=25.0, embedding=-0.5,
                    attention=(0.25, 1.0), mlp=(-0.25, 1.5), lens=(-3.0, 2.0), bias=0.0, residual_error=1e-7,
                    head_block=2, heads=(0.75, 0.25), head_note="", softcap=None, tokens=5, ms=12.0)
    return replace(a, **changes)


def test_the_attribution_says_its_sum_and_escapes_the_tokens():
    text = attribution_markdown(attribution())
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text
    assert "= +2.000" in text and "attention +1.250" in text and "MLP +1.250" in text and "r = 25" in text
    assert "block 2's MLP (+1.500)" in text and "block 1's MLP (-0.250)" in text and "head 1 gives the most" in text
    assert "not split by head: odd" in attribution_markdown(attribution(heads=(), head_note="odd"))
    assert "soft-caps its logits at 30" in attribution_markdown(attribution(softcap=30.0))
    assert "Các cột cộng lại" in attribution_markdown(attribution(), "vi")


def test_the_running_total_ends_at_the_logit_difference_and_the_figure_validates():
    fig = attribution_figure(attribution())
    spec = json.loads(fig.to_json())
    go.Figure(spec)  # plotly raises on anything it does not know
    running = next(t for t in spec["data"] if t.get("name") == "running total")
    assert running["y"][0] == -0.5 and running["y"][-1] == pytest.approx(2.0)
    assert [t["y"] for t in spec["data"] if t.get("type") == "bar"][-1] == [0.75, 0.25]  # the heads


def knockout(**changes) -> KnockoutResult:
    before = make_record()
    after = make_record(chosen=1)
    after = replace(after, stages=tuple(replace(s, kept_count=3) if s.name == "top_p" else s for s in after.stages))
    r = KnockoutResult(Knockout("head", 4, 2, "mean"), before, after, before.candidates[0], 0.5, 0.2, 1, 2, 3.25,
                       80.0, 170.0)
    return replace(r, **changes)


def test_the_knockout_line_names_the_part_the_odds_and_what_the_filters_keep_now():
    r = knockout()
    text = knockout_markdown(r)
    assert "Knocked out: head 2 of block 4" in text and "its mean over the prompt" in text
    assert "0.500 → 0.200 (rank 1 → 2)" in text and "Largest change of any logit: 3.250" in text
    assert "drawn at the same u = 0.300" in text
    assert "top-p keeps 3 tokens now (was 2)" in text and "top-k keeps" not in text  # only what changed
    assert "Đã bỏ: head 2 của khối 4" in knockout_markdown(r, "vi")


def test_the_knockout_chart_puts_the_candidate_in_bold_and_validates():
    spec = json.loads(knockout_figure(knockout()).to_json())
    go.Figure(spec)
    before, after = spec["data"]
    assert before["name"] == "before" and after["name"] == "after" and before["x"][0] == pytest.approx(0.5)
    assert before["y"][0].startswith("<b>")
    assert knockout_figure(None).to_plotly_json()["layout"]["annotations"][0]["text"].startswith("Pick a part")


def test_the_patch_line_says_where_the_difference_lives_block_by_block_and_the_grid_validates():
    tokens = (Token(1, "The"), Token(2, " <i>"), Token(3, " is"))
    cells = [PatchCell(p, b, 0.1, value, Token(9, " Rome"), value) for p, b, value in
             [(0, 1, 0.0), (1, 1, 0.4), (2, 1, 0.0), (0, 2, 0.0), (1, 2, 0.35), (2, 2, 0.0),
              (0, 3, 0.0), (1, 3, 0.0), (2, 3, 0.38)]]
    r = PatchResult(Token(7, " Paris"), Token(9, " Rome"), tokens, (0.8, 0.001), (0.01, 0.4), tuple(cells), 10.0)
    text = patch_markdown(r, "The <b>capital</b>", tokens)
    assert "“The &lt;b&gt;capital&lt;/b&gt;”" in text and "<b>capital" not in text
    assert "Blocks 1–2: the copy at position 1 (<code>␣&lt;i&gt;</code>)" in text and "Block 3: the copy at position 2" in text
    spec = json.loads(patch_figure(r, tokens).to_json())
    go.Figure(spec)
    heat = spec["data"][1]
    assert heat["z"] == [[0.0, 0.0, 0.0], [0.4, 0.35, 0.0], [0.0, 0.0, 0.38]] and heat["zmax"] == 0.4
    assert "<i>" not in json.dumps(spec)  # the token is escaped for Plotly too
    nowhere = PatchResult(r.candidate, r.source_answer, tokens, r.clean, r.source, tuple(c for c in cells if c.source_answer < 0.1), 1.0)
    assert "No single cell brings back half" in patch_markdown(nowhere, "x", tokens)


def test_a_blank_grid_offers_every_cell_to_a_click_and_a_patched_one_is_outlined():
    tokens = (Token(1, "The"), Token(2, " <i>"), Token(3, " is"))
    grid = [(p, b) for p in range(3) for b in (1, 2)]
    blank = json.loads(patch_figure(None, tokens, grid=grid).to_json())
    under, heat = blank["data"]  # the blank cells' own layer, under the patched cells' values
    assert under["z"] == [[0, 0]] * 3 and heat["z"] == [[None, None]] * 3 and heat["showscale"]
    assert heat["customdata"][2][1] == under["customdata"][2][1] == ["position 2, after block 2: click to patch this cell", 2, 2]
    cell = PatchCell(1, 2, 0.05, 0.3, Token(9, " Rome"), 0.3)
    r = PatchResult(Token(7, " Paris"), Token(9, " Rome"), tokens, (0.8, 0.001), (0.01, 0.4), (cell,), 10.0)
    spec = json.loads(patch_figure(r, tokens, grid=grid, picked=(1, 2)).to_json())
    go.Figure(spec)
    assert spec["data"][1]["z"] == [[None, None], [None, 0.3], [None, None]]
    assert spec["data"][0]["z"] == [[0, 0], [0, None], [0, 0]]
    (shape,) = spec["layout"]["shapes"]  # the picked cell: column block 2, row 1
    assert (shape["x0"], shape["x1"], shape["y0"], shape["y1"]) == (1.5, 2.5, 0.5, 1.5)
    line = patch_cell_markdown(r, cell)
    assert line.startswith("**Position 1 (<code>␣&lt;i&gt;</code>) after block 2:**")
    assert "Rome</code>) 0.001 → 0.300" in line and "Paris</code>) 0.800 → 0.050" in line


def test_a_clicked_cell_is_read_back_and_a_bad_one_named():
    from playground.common.plot_clicks import clicked_value
    from playground.forward.intervene_patch import _cell

    assert clicked_value("cell", "3,12 #7") == "3,12" and clicked_value("cell", "3,12") == "3,12"
    assert clicked_value("cell", "") is None and clicked_value("cell", None) is None
    assert _cell("3, 12") == (3, 12)
    with pytest.raises(ValueError, match="cell must be position,block"):
        _cell("3")
    with pytest.raises(ValueError, match="^block must be a whole number"):
        _cell("3,0")


def test_the_steer_line_shows_both_texts_escaped_and_where_they_part():
    from model_service.records.intervention import SteerResult

    plain = (replace(make_record(), text=" a great | <b>film</b>\nyes"),)
    steered = (replace(make_record(chosen=1), text=" a wonderful film"),)
    r = SteerResult(block=10, scale=1.5, direction_norm=20.0, stream_norm=90.0, plain=plain, steered=steered,
                    parted_at=0, seed=3, ms=5.0)
    text = steer_markdown(r)
    assert "<b>film" not in text and "&lt;b&gt;film" in text and "\\|" in text and "↵yes" in text
    assert "after block 10: 1.5 × (towards − away), a vector of length 30.0" in text and "seed 3" in text
    assert "They part at step 1" in text and "u = 0.300" in text
    assert "write the same tokens" in steer_markdown(replace(r, parted_at=None))
    assert "Cộng sau khối 10" in steer_markdown(r, "vi")
