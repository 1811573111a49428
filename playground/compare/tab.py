"""The Compare tab: two to four settings side by side on the same prompt and the same randomness.

The columns run as one batch (ModelService.generate_batch, through the room's scheduler) with one shared
seed, so every column draws the same u at every step (common random numbers): where the texts part, the
settings made them part. Layout and wiring only: settings in `columns`, views in `views`, the handlers in
`handlers`. Text goes out on every step (at most PAGE_AHEAD updates ahead of the page); the overlay chart at most
every CHART_INTERVAL seconds and at the end, then the scrubber moves it over the steps (the first divergent step
first) from the records kept in gr.State.
"""

from __future__ import annotations

import gradio as gr

from playground import limits

from ..common.acks import ack_event, ack_js
from ..common.handlers import bind
from ..common.i18n import DEFAULT, T, tr
from ..common.kept_batches import KeptBatches
from . import handlers, views
from .columns import COLUMNS, DATATYPES, DEFAULT_MAX_NEW_TOKENS, EXAMPLE_ROWS, EXAMPLE_SEED, CompareRun, table_value
from .handlers import CompareComponents


def build_compare_tab(service, language: gr.Radio | None = None, kept: KeptBatches | None = None) -> dict:
    """The tab in the current Tab context, its events wired; `kept`: the scenes' comparisons run at start (None:
    none)."""
    lang_in = language if language is not None else gr.State(DEFAULT)
    gr.Markdown(T("compare.intro"))
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=360):
            prompt = gr.Textbox(limits.LESSON_PROMPT, label=T("lab.prompt"), lines=2, elem_id="compare-prompt")
            table = gr.Dataframe(
                table_value(EXAMPLE_ROWS), headers=list(COLUMNS), datatype=DATATYPES, type="array", interactive=True,
                column_count=(len(COLUMNS), "fixed"), row_count=len(EXAMPLE_ROWS), label=tr(DEFAULT, "compare.table"),
                column_widths=["16%", "9%", "9%", "9%", "14%", "15%", "14%", "14%"], elem_id="compare-table",
            )
            with gr.Row():
                seed = gr.Textbox(EXAMPLE_SEED, label=T("compare.seed"), elem_id="compare-seed")
                max_new = gr.Slider(1, limits.MAX_NEW_TOKENS, DEFAULT_MAX_NEW_TOKENS, step=1, label=T("lab.max_new"),
                                    elem_id="compare-max-new")
            with gr.Row():
                run_btn = gr.Button(T("compare.run"), variant="primary", elem_id="compare-run", interactive=False)
                stop_btn = gr.Button(T("lab.stop_button"), variant="stop", elem_id="compare-stop")
            gr.Markdown(T("compare.crn_note"), elem_classes=["ntp-note"], elem_id="compare-crn-note")
        with gr.Column(scale=3):
            status = gr.Markdown(views.status_markdown(None), elem_id="compare-status")
            texts = gr.HTML(views.columns_html(None), elem_id="compare-texts")
            scrub = gr.Slider(1, 2, 1, step=1, label=T("compare.scrub"), visible=False, elem_id="compare-scrub")
            step_table = gr.HTML("", elem_id="compare-step-table")
            overlay = gr.Plot(views.overlay_figure(None, 0), show_label=False, elem_id="compare-overlay")
    state = gr.State(CompareRun())
    c = CompareComponents(service, prompt, table, texts, status, scrub, step_table, overlay, state,
                          kept if kept is not None else KeptBatches())
    wire(c, run_btn, stop_btn, seed, max_new, lang_in, language)
    return {"prompt": prompt, "table": table, "seed": seed, "max_new_tokens": max_new, "run": run_btn,
            "texts": texts, "status": status, "scrub": scrub, "overlay": overlay, "state": state}


def wire(c: CompareComponents, run_btn, stop_btn, seed, max_new, lang_in, language) -> None:
    """The tab's events; each handler is bound to the components (Gradio reads the rest of its signature)."""
    bound = lambda handler: bind(handler, c)
    run_event = run_btn.click(bound(handlers.run), [c.prompt, c.table, seed, max_new, lang_in], c.outputs,
                              api_name="compare_run", show_progress="hidden")
    # Stop's js fills `on_page` with the steps the page shows (views.STOP_JS); the cancel comes after the
    # handler's answer, by when the stream has ended (it stops one that has not)
    on_page = gr.Textbox("", visible=False, label="steps on the page", elem_id="compare-stop-on-page")
    stop_btn.click(bound(handlers.stop), [c.state, lang_in, on_page], c.outputs, js=views.STOP_JS, cancels=[run_event],
                   api_visibility="private", queue=False, show_progress="hidden")
    # the page has the texts' new value: what a streaming Run reads to keep its lead (lab/run.py: Pace)
    # (in the page; its count goes to the server as one POST: common/acks.py)
    ack_event(bound(handlers.page_has), c.state, "compare_page_has")
    c.texts.change(None, [c.texts], None, js=ack_js(views.COUNT_JS, "compare_page_has"), show_progress="hidden",
                   api_visibility="private")
    gr.on([c.scrub.release, c.scrub.input], bound(handlers.scrub_to), [c.scrub, c.state, lang_in],
          [c.texts, c.step_table, c.overlay], api_name="compare_scrub", show_progress="hidden",
          trigger_mode="always_last")
    if language is not None:
        language.change(bound(handlers.rerender), [language, c.state, c.table, c.prompt],
                        [c.table, c.prompt, c.texts, c.status, c.step_table, c.overlay], api_visibility="private",
                        show_progress="hidden", trigger_mode="multiple")
