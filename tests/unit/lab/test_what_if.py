"""The live lab's line (playground/lab/what_if.py), without a model: what changed, how the line says it, escaped."""

from __future__ import annotations

from dataclasses import replace

from model_service.records.settings import SamplingSettings
from model_service.records.step import DrawInfo, Stage, StepRecord, Token, WhatIf
from playground import limits
from playground.lab.request import RunRequest
from playground.lab.run import Run
from playground.lab.what_if import Shown, about_the_run, changes, knob_text, what_if_markdown


def request(**knobs) -> RunRequest:
    return RunRequest("The capital of France is", False, SamplingSettings(**{"seed": 5, **knobs}), 6, ())


def record(token_id: int, piece: str, p: float) -> StepRecord:
    final = Stage("final", (p,), 1, 1.0, 0.0, p)
    return StepRecord(step=0, token_id=token_id, piece=piece, special=False, text=piece,
                      candidates=(Token(token_id, piece),), stages=(final,), chosen_rank=0,
                      draw=DrawInfo(0.3, 0, 0.0, p), seed=5, forward_ms=0.0, sampling_ms=1.0)


def test_changes_name_each_moved_knob_and_leave_the_seed_out():
    assert changes(request(temperature=1.0), request(temperature=0.5, top_k=40, seed=9)) == (
        ("temperature", 1.0, 0.5), ("top_k", 0, 40))
    assert changes(request(), request()) == ()
    assert changes(request(), replace(request(), stop=("\n",))) == (("stop", (), ("\n",)),)


def test_the_line_says_what_it_shows_what_the_run_drew_with_and_the_token_it_would_draw_now():
    run = Run(request(temperature=1.0), [record(11, " Paris", 0.6)])
    shown = Shown(WhatIf(record(12, " <b>Lyon</b>", 0.4)), 0, (("temperature", 1.0, 0.5),), request(temperature=0.5))
    line = what_if_markdown(shown, run)
    assert line.startswith("**What if** T 0.5 · this run drew with T 1 · step 1")
    assert "&lt;b&gt;Lyon&lt;/b&gt;" in line and "<b>" not in line  # a token's text is escaped
    assert "Paris" in line and "recomputed" not in line
    same = Shown(WhatIf(record(11, " Paris", 0.9), "page"), 0, (("top_k", 0, 5),), request(top_k=5))
    assert "the same" in what_if_markdown(same, run) and "recomputed" in what_if_markdown(same, run)


def test_knob_text_reads_as_the_controls_do():
    assert knob_text("temperature", 0.5) == "T 0.5"
    assert knob_text("top_k", 40) == "top-k 40"
    assert knob_text("logit_bias", ((13, -100.0),)) == "logit bias 13:-100.0"
    assert knob_text("stop", ("<b>",)) == "stop &lt;b&gt;"


def test_a_what_if_is_of_the_run_on_screen_also_after_a_language_switch_swapped_the_lesson_prompt():
    run = request()
    assert about_the_run(request(temperature=0.5), run) == request(temperature=0.5)
    swapped = replace(request(temperature=0.5), prompt=limits.LESSON_PROMPT_VI)  # the page turned Vietnamese
    assert about_the_run(swapped, run) == request(temperature=0.5)  # the run's own prompt, the box's settings
    assert about_the_run(replace(request(), prompt="Hà Nội là"), run) is None  # a prompt typed since: a new run
    assert about_the_run(replace(request(), chat=True), run) is None
