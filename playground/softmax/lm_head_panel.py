"""The LM head on the real model, at the Sampling lab's current step (lesson 13, "LM head").

Reads the lab's run (prompt + the tokens up to the scrubbed step) and asks the service for the
final hidden state h and the head rows w of the top tokens: logit = h · w = ‖h‖ · ‖w‖ · cos.
"""

from __future__ import annotations

import gradio as gr

from model_service import limits, validation

from ..common.errors import user_error
from ..common.figures import empty_figure
from .lm_head_view import lm_head_figure, lm_head_markdown


def build_lm_head_panel(service, lab: dict) -> dict:
    gr.Markdown(
        "## The LM head on the real model\n"
        "After the last block and one final RMSNorm, the last position's vector h meets one row w of the "
        "LM head per vocabulary token; their dot product is that token's logit. Rows pointing the same way "
        "as h (high cos) win. Press the button to look at the Sampling lab's current step."
    )
    show = gr.Button("Show the LM head at the lab's current step", elem_id="lm-head-show")
    summary = gr.Markdown(elem_id="lm-head-summary")
    plot = gr.Plot(empty_figure("The top tokens' logits as ‖h‖·‖w‖·cos appear here.", height=300), show_label=False, elem_id="lm-head-plot")

    def explain(prompt, chat, state, index):
        taken = []
        try:
            prompt, chat = validation.text("prompt", prompt), validation.boolean("chat template", chat)
            index = validation.number("step", index, integer=True, low=0, high=limits.MAX_NEW_TOKENS, blank=0)
        except ValueError as e:
            raise user_error(e) from None
        if state is not None and state.records and state.request is not None:
            i = min(index, len(state.records) - 1)
            prompt, chat = state.request.prompt, state.request.chat
            taken = [r.token_id for r in state.records[:i]]  # the position that chose step i's token
        try:
            view = service.lm_head(prompt, chat, taken, top_k=limits.DEFAULT_LM_HEAD_TOP_K)
            pieces = service.pieces_of([c.id for c in view.candidates])
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None
        where = f"step {len(taken) + 1} of the lab's run" if state.records else "the end of the lab's prompt"
        return {summary: f"At {where}:\n\n" + lm_head_markdown(view, pieces), plot: lm_head_figure(view, pieces)}

    show.click(
        explain, [lab["prompt"], lab["chat"], lab["run_state"], lab["scrub"]], [summary, plot],
        api_name="lm_head", preprocess=False,  # our validators name the field
    )
    return {"summary": summary, "plot": plot}
