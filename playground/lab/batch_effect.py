"""The lab's lesson "why the same seed can give another token in a busy room": layout and wiring only (figure and
table: batch_effect_views.py; the measurement: model_service/forward_pass/batch_effect.py).

It follows the step the scrubber shows, as "Look inside this step" does. The measurement costs four forward
passes (about a second or more on a CPU), so it runs only while the accordion is open: when it opens, when a run
finishes or the scrubber moves with it open, and on its button. A result is kept with the step it belongs to, so
a change of language redraws it without the model.
"""

from __future__ import annotations

import gradio as gr

from ..common.errors import unchanged, user_error
from ..common.i18n import DEFAULT, T, tr
from . import batch_effect_views as views
from .inspect import step_index, step_key
from .request import continued


def _vocab(service) -> int | None:
    try:
        return int(service.info.vocab_size)
    except (RuntimeError, AttributeError):  # loading, or the host switching the model
        return None


def build_batch_effect(service, language, run_state: gr.State, scrub: gr.Slider, shown: gr.Button) -> dict:
    """Create the accordion (under "Look inside this step") and wire it. `language`: the page's picker or a State."""
    with gr.Accordion(T("batch.title"), open=False, elem_id="batch-effect") as box:
        text = gr.Markdown(views.batch_effect_markdown(None, DEFAULT), elem_id="batch-effect-text")
        run_btn = gr.Button(T("batch.run"), elem_id="batch-effect-run", size="sm")
        plot = gr.Plot(views.batch_effect_figure(None, DEFAULT), show_label=False, elem_id="batch-effect-plot")
    is_open = gr.State(False)
    kept = gr.State(None)  # {"key": inspect.step_key(run, step), "record": BatchEffect}

    def measure(index, run, lang):
        """The shown step of the page's run, alone and in a busy room (its own settings and seed)."""
        i = step_index(run, index)
        if i is None or run.request is None:
            raise gr.Error(tr(lang, "batch.no_run"), print_exception=False)
        settings = run.request.settings
        if settings.seed is None:  # a blank seed: the run's own, so u is the one its step read
            settings = settings.with_seed(run.records[0].seed)
        settings = continued(settings, run.records[:i])  # mirostat: the mu this step cut with
        try:
            effect = service.batch_effect(run.request.prompt, settings, chat=run.request.chat,
                                          continue_from=[r.token_id for r in run.records[:i]])
        except (ValueError, RuntimeError) as e:  # the model loading or switched, a run of another model
            raise user_error(e, lang) from None
        return {text: views.batch_effect_markdown(effect, lang, _vocab(service)),
                plot: views.batch_effect_figure(effect, lang), kept: {"key": step_key(run, i), "record": effect}}

    def show_step(index, run, opened, stored, lang, drawn):
        """A new step on screen: measure it if the accordion is open; else show what is kept for it, if anything.
        Nothing while the run streams (its end, or Stop, shows it), nor when it shows this step (Run.redraw)."""
        key = run.redraw(drawn, index, lang, bool(opened))
        if key is None:
            return unchanged(*outputs)
        i = step_index(run, index)
        mine = stored is not None and i is not None and run.request is not None and stored["key"] == step_key(run, i)
        if mine or not opened or i is None:
            effect = stored["record"] if mine else None
            return {text: views.batch_effect_markdown(effect, lang, _vocab(service)),
                    plot: views.batch_effect_figure(effect, lang), kept: stored if mine else None, drawn_state: key}
        return measure(index, run, lang) | {drawn_state: key}

    drawn_state = gr.State(None)  # Run.drawn_as of what the accordion shows
    outputs = [text, plot, kept, drawn_state]
    run_btn.click(measure, [scrub, run_state, language], outputs, api_name="batch_effect", preprocess=False)
    box.expand(lambda: True, None, is_open, queue=False, api_visibility="private").then(
        show_step, [scrub, run_state, is_open, kept, language, drawn_state], outputs, show_progress="minimal",
        preprocess=False, api_visibility="private")
    box.collapse(lambda: False, None, is_open, queue=False, api_visibility="private")
    shown.click(show_step, [scrub, run_state, is_open, kept, language, drawn_state], outputs, show_progress="minimal",
                trigger_mode="always_last", preprocess=False, api_visibility="private")
    if isinstance(language, gr.Radio):
        language.change(show_step, [scrub, run_state, gr.State(False), kept, language, drawn_state], outputs,
                        api_visibility="private", show_progress="hidden", preprocess=False, trigger_mode="multiple")
    return {"box": box, "text": text, "plot": plot, "run": run_btn}
