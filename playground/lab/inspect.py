"""The lab's "Look inside this step": layout and wiring only (figures: inspect_charts.py).

It follows the step the scrubber shows: a change of the run chart (a run finished, a Step, a change of
language, a new model) or a move of the scrubber redraws the logits and cost views from the records the
page keeps, with no model work. "Draw N tokens" freezes that step and asks the service to sample it n
times (ModelService.sample_many: one forward pass, then one vectorised draw). The last draws are kept
with the step they belong to, so a change of language redraws them, and another step clears them.
"""

from __future__ import annotations

import gradio as gr

from model_service.records import validation
from playground import limits

from ..common.errors import unchanged, user_error
from ..common.i18n import DEFAULT, T, tr
from . import inspect_charts as views
from .request import continued
from .scrubber import scrub_index


def _head_bytes(service) -> int:
    try:
        return int(getattr(service.info, "head_bytes", 0) or 0)
    except RuntimeError:  # loading, or the host switching the model: the cost views do without it
        return 0


def step_index(run, index) -> int | None:
    """The step the scrubber shows, within the run (the last one when it shows nothing valid)."""
    if run is None or not run.records:
        return None
    i = scrub_index(index, run.records)
    return len(run.records) - 1 if i is None else i


def step_key(run, i: int) -> tuple:
    """What a batch of draws belongs to: the run's model, prompt, settings and tokens up to this step."""
    request = run.request
    return (run.model, request.prompt, request.chat, request.settings.to_dict(),
            tuple(r.token_id for r in run.records[: i + 1]))


def build_inspect(service, language, run_state: gr.State, scrub: gr.Slider, shown: gr.Button) -> dict:
    """Create the accordion under the run chart and wire it. `language`: the page's picker or a State."""
    with gr.Accordion(T("inspect.title"), open=False, elem_id="inspect") as box:
        gr.Markdown(T("inspect.note"), elem_classes=["ntp-note"])
        with gr.Tabs():
            with gr.Tab(T("inspect.many.tab"), elem_id="inspect-many-tab") as many_tab:
                with gr.Row(equal_height=True):
                    n = gr.Slider(limits.MIN_MANY_DRAWS, limits.MAX_MANY_DRAWS, limits.DEFAULT_MANY_DRAWS, step=100,
                                  label=T("inspect.many.n"), elem_id="inspect-n", scale=3)
                    draw_btn = gr.Button(T("inspect.many.draw"), variant="primary", elem_id="inspect-draw", scale=1)
                many_text = gr.Markdown(views.many_draws_markdown(None, DEFAULT), elem_id="inspect-many-text")
                many_plot = gr.Plot(views.many_draws_figure(None, DEFAULT), show_label=False, elem_id="inspect-many-plot")
            with gr.Tab(T("inspect.logits.tab"), elem_id="inspect-logits-tab") as logits_tab:
                logits_text = gr.Markdown(views.logits_markdown(None, DEFAULT), elem_id="inspect-logits-text")
                logits_plot = gr.Plot(views.logits_figure(None, DEFAULT), show_label=False, elem_id="inspect-logits-plot")
            with gr.Tab(T("inspect.cost.tab"), elem_id="inspect-cost-tab") as cost_tab:
                cost_text = gr.Markdown(views.cost_markdown([], lang=DEFAULT), elem_id="inspect-cost-text")
                cost_plot = gr.Plot(views.cost_figure([], lang=DEFAULT), show_label=False, elem_id="inspect-cost-plot")
    many_state = gr.State(None)  # {"key": step_key(...), "record": ManyDraws}: the last draws and their step

    def show(index, run, kept, lang, drawn):
        """The step's views from the kept records; the last draws if they are this step's. Nothing while the
        run streams (its end, or Stop, draws them), nor when they show this step already (Run.redraw)."""
        key = run.redraw(drawn, index, lang)
        if key is None:
            return unchanged(*outputs)
        i = step_index(run, index)
        record = None if i is None else run.records[i]
        records = [] if i is None else run.records
        mine = kept is not None and i is not None and run.request is not None and kept["key"] == step_key(run, i)
        many = kept["record"] if mine else None
        return {
            logits_text: views.logits_markdown(record, lang), logits_plot: views.logits_figure(record, lang),
            cost_text: views.cost_markdown(records, _head_bytes(service), i, lang),
            cost_plot: views.cost_figure(records, i, lang),
            many_text: views.many_draws_markdown(many, lang), many_plot: views.many_draws_figure(many, lang),
            many_state: kept if mine else None, drawn_state: key,
        }

    def draw(count, index, run, lang):
        """Sample the shown step `count` times with the run's own settings (and seed: its token is the run's)."""
        try:
            count = validation.number("draws", count, integer=True, low=limits.MIN_MANY_DRAWS,
                                      high=limits.MAX_MANY_DRAWS)
            i = step_index(run, index)
            if i is None or run.request is None:
                raise gr.Error(tr(lang, "inspect.many.no_run"), print_exception=False)
            settings = run.request.settings
            if settings.seed is None:  # a blank seed: the run's own, so the recomputed step draws the run's token
                settings = settings.with_seed(run.records[0].seed)
            settings = continued(settings, run.records[:i])  # mirostat: the mu this step cut with
            many = service.sample_many(run.request.prompt, settings, chat=run.request.chat,
                                       continue_from=[r.token_id for r in run.records[:i]], n=count)
        except (ValueError, RuntimeError) as e:  # bad input, the model loading or switched
            raise user_error(e, lang, {"draws": tr(lang, "inspect.many.n")}) from None
        return {many_text: views.many_draws_markdown(many, lang), many_plot: views.many_draws_figure(many, lang),
                many_state: {"key": step_key(run, i), "record": many}}

    drawn_state = gr.State(None)  # Run.drawn_as of what these views show
    outputs = [logits_text, logits_plot, cost_text, cost_plot, many_text, many_plot, many_state, drawn_state]
    inputs = [scrub, run_state, many_state, language, drawn_state]
    # (the run chart's change clicks `shown` only while the accordion is open: tab.RUN_CHART_CHANGED_JS)
    box.expand(show, inputs, outputs, show_progress="hidden", preprocess=False, api_visibility="private")
    shown.click(show, inputs, outputs, api_name="inspect_step", show_progress="hidden", trigger_mode="always_last",
                preprocess=False)
    draw_btn.click(draw, [n, scrub, run_state, language], [many_text, many_plot, many_state], api_name="sample_many",
                   preprocess=False)
    if isinstance(language, gr.Radio):
        tab_keys = {many_tab: "inspect.many.tab", logits_tab: "inspect.logits.tab", cost_tab: "inspect.cost.tab"}

        def relabel(lang):
            # Gradio translates a tab's label only once the tab has been shown (as the page's tabs: page.py)
            return {tab: gr.Tab(label=tr(lang, key)) for tab, key in tab_keys.items()}

        language.change(relabel, language, list(tab_keys), api_visibility="private", show_progress="hidden",
                        preprocess=False, trigger_mode="multiple")
    return {"n": n, "draw": draw_btn, "many_text": many_text, "many_plot": many_plot, "logits_plot": logits_plot,
            "cost_plot": cost_plot, "cost_text": cost_text}
