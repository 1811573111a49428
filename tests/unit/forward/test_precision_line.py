"""The Forward pass tab's precision line (playground/forward/precision.py): what it says in both languages, every token
escaped, hidden in fp32 and while the model loads, a refused check said in words."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from model_service.records.precision import PrecisionEffect, PrecisionRow
from model_service.records.step import Token
from playground.forward.precision import precision_markdown, show


def effect(greedy="<b>|x", fp32=None) -> PrecisionEffect:
    rows = (PrecisionRow(Token(5, greedy), 0.6, 0.55, 1, 1), PrecisionRow(Token(6, " Rome"), 0.2, 0.25, 2, 2))
    return PrecisionEffect("int4", "int4 weights (groups of 32), bfloat16 activations", 0.341, 0.05, rows,
                           Token(5, greedy), Token(5 if fp32 is None else 6, fp32 or greedy), 6, 12.0)


def test_the_line_says_the_mode_the_gap_and_the_table_with_every_token_escaped():
    md = precision_markdown(effect())
    assert "**This model runs in int4 weights (groups of 32), bfloat16 activations**" in md
    assert "at most 0.341 (on average 0.0500)" in md and "the greedy token is the same" in md
    assert "<b>" not in md and "&lt;b&gt;" in md and "\\|x" in md  # a token's HTML and table pipes stay literal
    assert md.count("\n| ") == 3  # the header and two rows
    assert "| 0.600 | 0.550 | 1 | 1 |" in md


def test_a_greedy_token_that_changes_is_named_both_ways_and_vietnamese_is_vietnamese():
    md = precision_markdown(effect(greedy=" Paris", fp32=" Rome"), "vi")
    assert "trọng số int4 (nhóm 32), activation bfloat16" in md
    assert "␣Paris" in md and "␣Rome" in md and "ở float32" in md
    assert "| p int4 | p fp32 | hạng | hạng ở fp32 |" in md


def _service(precision, answer=None):
    def precision_effect(prompt, chat):
        if isinstance(answer, Exception):
            raise answer
        return answer

    return SimpleNamespace(info=SimpleNamespace(precision=precision), precision_effect=precision_effect)


def test_hidden_in_fp32_and_without_a_trace_shown_below_it_and_a_refusal_said():
    md = gr.Markdown()
    trace = SimpleNamespace(prompt="The capital of France is", chat=False)
    assert show(md, _service("fp32"), trace)[md]["visible"] is False
    assert show(md, _service("int4", effect()), None)[md]["visible"] is False
    shown = show(md, _service("int4", effect()), trace)[md]
    assert shown["visible"] is True and "groups of 32" in shown["value"]
    refused = show(md, _service("int4", RuntimeError("no <copy> kept")), trace)[md]
    assert refused["visible"] is True and refused["value"] == "no &lt;copy&gt; kept"
