"""The LM head on the real model, at the Sampling lab's current step (lesson 13, "LM head").

Reads the lab's run (prompt + the tokens up to the scrubbed step) and asks the service for the
final hidden state h and the head rows w of the top tokens: logit = h · w = ‖h‖ · ‖w‖ · cos.
What it showed is kept (the record, its pieces, the step), so a change of language redraws it
without asking the model again.
"""

from __future__ import annotations

from functools import cache

import gradio as gr

from model_service import limits, validation

from ..common.errors import user_error
from ..common.figures import empty_figure
from ..common.i18n import T, tr
from ..common.i18n import language as language_code
from .lm_head_view import lm_head_figure, lm_head_markdown


def lm_head_views(shown: dict | None, lang: str = "en") -> tuple[str, object]:
    """(summary Markdown, figure) for what the panel showed (None: nothing yet), in `lang`.
    shown: {"view": LmHeadView dict, "pieces": {id: piece}, "step": the lab's step, or None for its prompt}."""
    if not shown:
        return "", _placeholder(language_code(lang))
    where = (tr(lang, "softmax.head.where.step", step=shown["step"]) if shown["step"] is not None
             else tr(lang, "softmax.head.where.prompt"))
    view, pieces = shown["view"], shown["pieces"]
    return f"{where}\n\n{lm_head_markdown(view, pieces, lang)}", lm_head_figure(view, pieces, lang=lang)


@cache
def _placeholder(lang: str):
    """One per language: every page load in a Vietnamese room redraws it (never mutated: Gradio only
    serialises it)."""
    return empty_figure(tr(lang, "softmax.head.empty"), height=300)


def build_lm_head_panel(service, lab: dict, language: gr.Radio | None = None) -> dict:
    gr.Markdown(T("softmax.head.lesson"), elem_id="lm-head-lesson")
    show = gr.Button(T("softmax.head.show"), elem_id="lm-head-show")
    first_summary, first_plot = lm_head_views(None)
    summary = gr.Markdown(first_summary, elem_id="lm-head-summary")
    plot = gr.Plot(first_plot, show_label=False, elem_id="lm-head-plot")
    shown_state = gr.State(None)  # what the panel last showed: small, JSON-able, no tensors

    def explain(prompt, chat, state, index, lang="en"):
        taken, step = [], None
        try:
            prompt, chat = validation.text("prompt", prompt), validation.boolean("chat template", chat)
            index = validation.number("step", index, integer=True, low=0, high=limits.MAX_NEW_TOKENS, blank=0)
        except ValueError as e:
            raise user_error(e, lang) from None
        try:
            model = service.info.name
        except RuntimeError as e:  # loading, or the host switching the model
            raise user_error(e, lang) from None
        from_run = bool(state is not None and state.records and state.request is not None
                        and getattr(state, "model", "") in ("", model))
        if from_run:  # a run drawn by another model (before the host switched it) is not this model's
            i = min(index, len(state.records) - 1)
            prompt, chat = state.request.prompt, state.request.chat
            taken = [r.token_id for r in state.records[:i]]  # the position that chose step i's token
            step = len(taken) + 1
        try:
            view = service.lm_head(prompt, chat, taken, top_k=limits.DEFAULT_LM_HEAD_TOP_K)
            pieces = service.pieces_of([c.id for c in view.candidates])
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang) from None
        shown = {"view": view.to_dict(), "pieces": dict(pieces), "step": step}
        text, figure = lm_head_views(shown, lang)
        return {summary: text, plot: figure, shown_state: shown}

    lang_input = [] if language is None else [language]
    show.click(
        explain, [lab["prompt"], lab["chat"], lab["run_state"], lab["scrub"], *lang_input], [summary, plot, shown_state],
        api_name="lm_head", preprocess=False,  # our validators name the field
    )
    if language is not None:
        def rerender(lang, shown):
            text, figure = lm_head_views(shown, lang)
            return {summary: text, plot: figure}

        language.change(rerender, [language, shown_state], [summary, plot], api_visibility="private",
                        show_progress="hidden", preprocess=False)

    def new_model(info, first: bool, lang="en") -> dict:
        """The host switched the room's model: what the panel showed was the old model's."""
        if first:
            return {}
        text, figure = lm_head_views(None, lang)
        return {summary: text, plot: figure, shown_state: None}

    return {"summary": summary, "plot": plot, "watch": ([summary, plot, shown_state], new_model)}
