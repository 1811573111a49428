"""'Look inside this step': hand-made records with known numbers in, figures and lines checked out."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from model_service.records.step import ManyDraws, Token, json_size
from playground.lab.inspect_charts import (
    TAIL_FLOOR,
    cost_figure,
    cost_markdown,
    logits_figure,
    logits_markdown,
    many_draws_figure,
    many_draws_markdown,
    step_costs,
)

from .test_charts import PROBS, make_record

LOGITS = (3.0, 2.0833, 1.7956, 1.3901, 0.6969)  # ln(raw probs) + 3.693: log Z = 3.693


def record_with_logits(**changes):
    r = make_record(**changes)
    return replace(r, logits=LOGITS[: len(r.candidates)], capture_ms=0.04, sampling_ms=0.1)


def many(p_value=0.42, counts=(530, 270), other=200):
    return ManyDraws(
        step=3, n=1000, seed=9, tokens=(Token(5, " Paris"), Token(6, "<b>")), counts=counts, probs=(0.5, 0.3),
        other_count=other, other_prob=0.2, distinct=12, support=40, chi2=3.2, dof=2, p_value=p_value, token_id=5,
        forward_ms=55.0, draw_ms=1.25,
    )


def test_many_draws_bars_are_the_observed_shares_and_the_ticks_the_probabilities():
    fig = many_draws_figure(many())
    bars, ticks = fig.data
    assert list(bars.x) == [0.53, 0.27, 0.2] and list(ticks.x) == [0.5, 0.3, 0.2]
    assert list(fig.layout.yaxis.ticktext) == ["␣Paris", "&lt;b&gt;", "(all others)"]  # a piece is escaped
    assert "<b>" not in json.dumps(fig.to_plotly_json()["layout"]["yaxis"]["ticktext"])
    assert "530 of 1,000" in bars.hovertext[0]
    assert "(tất cả token còn lại)" in many_draws_figure(many(), lang="vi").layout.yaxis.ticktext


def test_many_draws_verdict_at_alpha_one_in_a_thousand():
    assert "not rejected" in many_draws_markdown(many(0.42)) and "p = 0.42" in many_draws_markdown(many(0.42))
    text = many_draws_markdown(many(2e-7))
    assert "**rejected**" in text and "p = 2.0e-07" in text
    assert "**1,000 draws** at step 4" in text and "12 distinct" in text and "of 40" in text
    one = replace(many(None), dof=0, tokens=(Token(5, " Paris"),), counts=(1000,), probs=(1.0,), other_count=0,
                  other_prob=0.0)
    assert "nothing to test" in many_draws_markdown(one)
    assert "không bác bỏ" in many_draws_markdown(many(0.42), lang="vi")
    assert "Draw N tokens" in many_draws_figure(None).layout.annotations[0].text


def test_logits_panels_show_negative_logits_a_zero_line_and_removed_tokens_on_the_floor():
    r = record_with_logits()
    r = replace(r, logits=(3.0, 1.0, -0.5, -2.25, -4.0))
    fig = logits_figure(r)
    logit_bars, log_p_bars, *stages = fig.data
    assert list(logit_bars.x) == [3.0, 1.0, -0.5, -2.25, -4.0]
    assert fig.layout.xaxis.zeroline and fig.layout.xaxis2.zeroline
    assert list(log_p_bars.x) == pytest.approx([math.log(p) for p in PROBS["raw"]])
    assert [s.name for s in stages] == ["raw", "temperature", "top-k", "top-p", "min-p", "final"]
    final = stages[-1]
    assert list(final.x) == [0.75, 0.25, TAIL_FLOOR, TAIL_FLOOR, TAIL_FLOOR]
    assert list(final.marker.symbol) == ["circle", "circle", "x-thin-open", "x-thin-open", "x-thin-open"]
    assert fig.layout.xaxis3.type == "log"
    assert "removed" in final.hovertext[2]
    assert logit_bars.marker.color[0] != logit_bars.marker.color[1]  # the chosen token stands out


def test_logits_line_gives_log_z_and_the_range():
    text = logits_markdown(record_with_logits())
    assert "log Z = 3.69" in text and "from 3.00 down to 0.70" in text
    no_logits = make_record()  # an older record, or capture off: no logits
    assert "capture was off" in logits_figure(no_logits).layout.annotations[0].text
    assert "logits gốc" in logits_figure(record_with_logits(), lang="vi").layout.annotations[0].text


def test_cost_strip_bytes_are_the_records_json_sizes_and_times_add_up():
    records = [record_with_logits(step=i) for i in range(4)]
    fig = cost_figure(records, selected=2)
    forward, sampler, capture, size = fig.data
    assert list(forward.y) == [1.0] * 4
    assert list(sampler.y) == pytest.approx([0.06] * 4) and list(capture.y) == [0.04] * 4
    assert list(size.y) == [json_size(r) for r in records] == [len(json.dumps(r.to_dict()).encode()) for r in records]
    assert fig.layout.barmode == "stack" and fig.layout.shapes[0].x0 == 2
    assert step_costs(records[0])["sampler"] + step_costs(records[0])["capture"] == pytest.approx(0.1)


def test_cost_totals_and_the_lm_head_read():
    records = [record_with_logits(step=i) for i in range(4)]
    text = cost_markdown(records, head_bytes=113_246_208, selected=1)
    assert "**Step 2**: forward 1.0 ms" in text and "**Run, 4 steps**: forward 4 ms" in text
    total = sum(json_size(r) for r in records)
    assert f"records {total / 1e3:.3g} kB" in text
    # 113 MB per forward pass; over 4 steps 453 MB; in 1 ms that is 113 GB/s
    assert "113 MB read per forward pass" in text and "453 MB over this run" in text and "113 GB/s" in text
    assert "LM head" not in cost_markdown(records)  # unknown head size: no line
    assert "Cả lượt, 4 bước" in cost_markdown(records, lang="vi")
    assert "Run something" in cost_figure([]).layout.annotations[0].text
