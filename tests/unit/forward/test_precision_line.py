"""The Forward pass tab's precision line (playground/forward/precision.py): what it says in both languages, every token
escaped, shown for the host's choice or a learner's pick, a refused check said in the page's language."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from model_service.records import validation
from model_service.records.precision import PrecisionEffect, PrecisionRow
from model_service.records.step import Token
from playground.forward.precision import PrecisionComponents, precision_markdown, redraw, show


def effect(greedy="<b>|x", fp32=None, running="int4") -> PrecisionEffect:
    rows = (PrecisionRow(Token(5, greedy), 0.6, 0.55, 1, 1), PrecisionRow(Token(6, " Rome"), 0.2, 0.25, 2, 2))
    return PrecisionEffect("int4", running, "int4 weights (groups of 32), bfloat16 activations", 0.341, 0.05, rows,
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


def test_another_precision_than_the_rooms_is_said_as_what_it_would_do():
    md = precision_markdown(effect(running="fp32"))
    assert "**In int4 weights (groups of 32), bfloat16 activations** (this room's model runs in float32)" in md
    assert "the greedy token would be the same" in md and "loaded as `--precision int4` would load it" in md


def _service(precision, answer=None, device="cpu"):
    asked = []

    def precision_effect(prompt, chat, pick):
        asked.append(pick)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return SimpleNamespace(info=SimpleNamespace(precision=precision, device=device), precision_effect=precision_effect,
                           asked=asked)


TRACE = SimpleNamespace(prompt="The capital of France is", chat=False)


def components() -> PrecisionComponents:
    return PrecisionComponents(gr.Radio(), gr.Markdown(), gr.State())


def test_a_default_precision_waits_for_a_pick_and_a_hosts_choice_shows_at_every_trace():
    c = components()
    for service in (_service("fp32", effect(running="fp32")), _service("bf16", effect(), device="cuda:0")):
        assert show(c, service, TRACE, None)[c.md]["visible"] is False and service.asked == []  # the device's default
        picked = show(c, service, TRACE, "int4")
        assert picked[c.md]["visible"] is True and picked[c.effect] is not None and service.asked == ["int4"]
    fp32 = _service("fp32", effect(running="fp32"))
    assert "this room's model runs in float32" in show(c, fp32, TRACE, "int4")[c.md]["value"]
    int4 = _service("int4", effect())
    assert show(c, int4, None, None)[c.md]["visible"] is False
    shown = show(c, int4, TRACE, None)
    assert shown[c.pick]["value"] == "int4" and int4.asked == ["int4"]  # the host's choice, picked for the learner
    assert shown[c.md]["visible"] is True and "This model runs in int4 weights" in shown[c.md]["value"]


def test_a_refusal_is_said_in_the_pages_language_and_hides_itself_when_nobody_asked():
    c = components()
    refused = show(c, _service("int4", RuntimeError("no <copy> kept")), TRACE, "bf16")[c.md]
    assert refused["visible"] is True and refused["value"] == "no &lt;copy&gt; kept"
    too_large = validation.Unavailable("precision_too_large", parameters="8,030M", limit="2,000M")
    asked = show(c, _service("int4", too_large), TRACE, "bf16", "vi")[c.md]
    assert asked["visible"] is True and "phép so độ chính xác" in asked["value"] and "8,030M" in asked["value"]
    assert show(c, _service("int4", too_large), TRACE, None)[c.md]["visible"] is False  # the host's, unasked


def test_another_language_redraws_the_comparison_on_screen_without_asking_again():
    c = components()
    assert "Mô hình này chạy ở trọng số int4" in redraw(c, effect(), "vi")[c.md]
    assert redraw(c, None, "vi")[c.md] == gr.update()
