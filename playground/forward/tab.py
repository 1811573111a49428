"""The "Forward pass" tab: lesson 10 on the live model, laid out as the lesson's journey, and its events.

Input (token chips with ids) → Embedding (lookup rows) → the blocks (residual stream, updates,
attention) → Output (logits at every position, their memory cost) → Logit lens → Sample from here.
Wiring only: the components are laid out in `components` (named by ForwardComponents), their handlers
are in `handlers`, and here the events join them. The service returns a Trace record, `text` and
`charts` draw it. The record stays in gr.State, so picking another head redraws without touching the
model; picking another block asks the service for that block's attention only. Static text is `T(key)`;
every view built here takes the header's language, and a change of language redraws the views from the
State. A component whose value the server replaces starts from tr(DEFAULT, ...), never T(): Gradio's
frontend translates a T() value again at every switch of language, over whatever the server has put
there since (its set_data keeps the key), so a redrawn trace would lose the race to the bare lesson text.
"""

from __future__ import annotations

import gradio as gr

from ..common.handlers import bind
from . import handlers as fh
from .components import ForwardComponents, build_components
from .handlers import status_line
from .intervene import wire as wire_intervene
from .intervene_files import wire_files
from .kept_interventions import KeptInterventions
from .precision import wire as wire_precision


def wire_trace(c: ForwardComponents, service, lang_input: list) -> None:
    """The events that ask the model: a trace (button or Enter), then another block; and another head."""
    run_trace = bind(fh.run_trace, c, service)  # one function for both events, as Gradio counts concurrency
    inputs = [c.prompt, c.chat, c.block, c.head, *lang_input]
    # preprocess=False: run_trace's validators name the field before Gradio's component checks can
    c.trace_btn.click(run_trace, inputs, c.views, api_name="trace", preprocess=False)
    c.prompt.submit(run_trace, inputs, c.views, api_visibility="private", preprocess=False)
    # release (mouse), and change from the keyboard: arrow keys and Enter pick the block at once
    gr.on([c.block.release, c.block.input], bind(fh.change_block, c, service), [c.state, c.block, c.head, *lang_input],
          [c.state, c.attention_md, c.attention_plot], api_name="trace_block", show_progress="minimal",
          trigger_mode="always_last", preprocess=False)
    c.head.input(bind(fh.change_head, c), [c.state, c.head, *lang_input], [c.attention_md, c.attention_plot],
                 api_visibility="private", show_progress="hidden")


def wire_language(c: ForwardComponents, service, language: gr.Radio) -> None:
    """A change of the page's language redraws every view from the State (and the prompt, if the lesson's)."""
    redrawn = [o for o in c.views if o not in (c.state, c.block)] + [c.lesson_md, c.prompt]
    language.change(bind(fh.change_language, c, service), [language, c.state, c.head, c.numbers, c.prompt], redrawn,
                    api_visibility="private", show_progress="hidden", preprocess=False, trigger_mode="multiple")


def wire_sample(c: ForwardComponents, lab, tabs: gr.Tabs | None, lab_tab_id: str) -> None:
    """The "Sample from here" button: the lab takes the prompt and chat box (its tab opens, given the page's tabs)."""
    targets = [lab.prompt, lab.chat] + ([tabs] if tabs is not None else [])
    c.sample_btn.click(bind(fh.sample_from_here, lab.prompt, lab.chat, tabs, lab_tab_id), [c.prompt, c.chat],
                       targets, api_name="sample_from_here", queue=False)


def build_forward_tab(service, lab=None, tabs: gr.Tabs | None = None, lab_tab_id: str = "lab",
                      language: gr.Radio | None = None, kept: KeptInterventions | None = None) -> dict:
    """Create and wire the tab's components in the current Blocks/Tab context.

    lab: the LabComponents of build_lab (its prompt and chat receive "Sample from here").
    tabs: the page's gr.Tabs; when given, "Sample from here" also switches to the tab `lab_tab_id`.
    language: the header's language picker (its value "en" or "vi"); without it the views are English.
    kept: the interventions' scenes' results, computed at start (kept_interventions.py; None: the tab's own).
    """
    c = build_components()
    lang_input = [language] if language is not None else []
    wire_trace(c, service, lang_input)
    if language is not None:
        wire_language(c, service, language)
    if lab is not None:
        wire_sample(c, lab, tabs, lab_tab_id)
    wire_precision(c.precision, service, c.state, language)
    kept = kept if kept is not None else KeptInterventions()
    wire_intervene(c.intervene, kept.serving(service), c.state, c.prompt, c.chat, language, lab)
    wire_files(c.intervene, c.files, language, lab.view if lab is not None else None)
    return {
        "state": c.state, "prompt": c.prompt, "chat": c.chat, "trace_button": c.trace_btn,
        "sample_button": c.sample_btn, "block": c.block, "head": c.head, "status": c.status, "intervene": c.intervene,
        # for a tab.select(...) that shows the lesson's trace when the tab is opened:
        "trace_if_new": bind(fh.trace_if_new, c, service),
        "select_inputs": [c.prompt, c.chat, c.block, c.head, c.state, *lang_input],
        "select_outputs": [*c.views, c.prompt], "lesson_numbers": c.lesson_md,
        "watch": ([*c.views, c.lesson_md, c.numbers], bind(fh.new_model, c, service)),
    }


__all__ = ["ForwardComponents", "build_forward_tab", "status_line"]  # status_line: the tests read it here
