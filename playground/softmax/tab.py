"""The "Softmax & LM head" tab: where logits come from (the LM head on the live model) and how they
become probabilities (softmax on a toy vocabulary). Layout only; each panel wires its own events,
including its redraw when the page's language changes."""

from __future__ import annotations

import gradio as gr

from ..lab.components import LabComponents
from .lm_head_panel import build_lm_head_panel
from .toy_panel import build_toy_panel


def build_softmax_tab(service, lab: LabComponents, language: gr.Radio | None = None) -> dict:
    """Inside the current Tab: the toy softmax, then the LM head at the lab's current step."""
    toy = build_toy_panel(language=language)
    lm_head = build_lm_head_panel(service, lab, language=language)
    return {"toy": toy, "lm_head": lm_head, "watch": lm_head["watch"]}
