"""The Compare tab: two to four settings side by side on the same prompt and the same randomness.

The columns run as one batch (ModelService.generate_batch, through the room's scheduler) with one shared
seed, so every column draws the same u at every step (common random numbers): where the texts part, the
settings made them part. Layout and wiring only: settings in `columns`, views in `views`. Text goes out
on every step; the overlay chart at most every CHART_INTERVAL seconds and at the end, then the scrubber
moves it over the steps (the first divergent step first) from the records kept in gr.State.
"""

from __future__ import annotations

import time

import gradio as gr

from model_service import limits
from model_service.records import validation
from model_service.records.step import BatchStep

from ..common.errors import unchanged, user_error
from ..common.i18n import DEFAULT, LESSON_PROMPTS, T, swapped_default, tr
from ..lab.request import field_labels
from ..lab.scrubber import scrub_index, scrub_update
from . import views
from .columns import (
    COLUMNS,
    DATATYPES,
    DEFAULT_MAX_NEW_TOKENS,
    EXAMPLE_ROWS,
    EXAMPLE_SEED,
    CompareRun,
    parse_comparison,
    table_value,
)

CHART_INTERVAL = 0.5
TOP_N = 20


def _scrub(run: CompareRun, at: int | None = None):
    """The scrubber counts steps from 1, as the lab's does (playground/lab/scrubber.py); `at` is 0-based."""
    n = run.length
    index = at if at is not None else (run.divergence if run.divergence is not None else max(n - 1, 0))
    return scrub_update(range(n), index)


def build_compare_tab(service, language: gr.Radio | None = None) -> dict:
    lang_in = language if language is not None else gr.State(DEFAULT)
    gr.Markdown(T("compare.intro"))
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=360):
            prompt = gr.Textbox(limits.LESSON_PROMPT, label=T("lab.prompt"), lines=2, elem_id="compare-prompt")
            table = gr.Dataframe(
                table_value(EXAMPLE_ROWS), headers=list(COLUMNS), datatype=DATATYPES, type="array", interactive=True,
                column_count=(len(COLUMNS), "fixed"), row_count=len(EXAMPLE_ROWS), label=tr(DEFAULT, "compare.table"),
                elem_id="compare-table",
            )
            with gr.Row():
                seed = gr.Textbox(EXAMPLE_SEED, label=T("compare.seed"), elem_id="compare-seed")
                max_new = gr.Slider(1, limits.MAX_NEW_TOKENS, DEFAULT_MAX_NEW_TOKENS, step=1, label=T("lab.max_new"),
                                    elem_id="compare-max-new")
            with gr.Row():
                run_btn = gr.Button(T("compare.run"), variant="primary", elem_id="compare-run")
                stop_btn = gr.Button(T("lab.stop_button"), variant="stop", elem_id="compare-stop")
            gr.Markdown(T("compare.crn_note"), elem_classes=["ntp-note"], elem_id="compare-crn-note")
        with gr.Column(scale=3):
            status = gr.Markdown(views.status_markdown(None), elem_id="compare-status")
            texts = gr.HTML(views.columns_html(None), elem_id="compare-texts")
            scrub = gr.Slider(1, 2, 1, step=1, label=T("compare.scrub"), visible=False, elem_id="compare-scrub")
            step_table = gr.HTML("", elem_id="compare-step-table")
            overlay = gr.Plot(views.overlay_figure(None, 0), show_label=False, elem_id="compare-overlay")
    state = gr.State(CompareRun())

    def run(prompt_text, rows, seed_text, max_tokens, lang):
        try:
            comparison = parse_comparison(prompt_text, rows, seed_text, max_tokens, lang)
            steps = service.generate_batch(comparison.requests, top_n=TOP_N)
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang, field_labels(lang)) from None
        current = CompareRun(comparison, [[] for _ in comparison.requests])
        last_chart = 0.0
        try:  # (every yield inside: a page closed at once still closes the batch)
            # the last comparison leaves the page at once: its scrubber, step table and overlay would read as this one's
            yield {scrub: gr.update(visible=False, value=1), step_table: "", overlay: views.overlay_figure(None, 0, lang),
                   texts: views.columns_html(current, lang), status: tr(lang, "lab.status.starting"), state: current}
            for step in steps:
                if not isinstance(step, BatchStep):
                    continue
                for column, record in zip(current.columns, step.rows):
                    if record is not None:
                        column.append(record)
                current.steps, current.batch_sizes = current.steps + 1, [*current.batch_sizes, len(step.active)]
                out = {texts: views.columns_html(current, lang), status: views.status_markdown(current, lang),
                       state: current}
                now = time.monotonic()
                if now - last_chart >= CHART_INTERVAL:
                    last_chart = now
                    out[overlay] = views.overlay_figure(current, current.length - 1, lang)
                yield out
        finally:
            getattr(steps, "close", lambda: None)()
        current.done = True
        yield finish(current, lang)

    def finish(current: CompareRun, lang, at: int | None = None) -> dict:
        i = at if at is not None else (current.divergence if current.divergence is not None else current.length - 1)
        return {texts: views.columns_html(current, lang, selected=i), status: views.status_markdown(current, lang),
                scrub: _scrub(current, i), step_table: views.step_table_html(current, i, lang),
                overlay: views.overlay_figure(current, i, lang), state: current}

    def scrub_to(index, current: CompareRun, lang):
        if current.comparison is None or current.length == 0:
            return unchanged(texts)
        try:
            i = validation.number("scrub step", index, integer=True, low=1, high=current.length) - 1
        except ValueError as e:
            raise user_error(e, lang, field_labels(lang)) from None
        return {texts: views.columns_html(current, lang, selected=i), step_table: views.step_table_html(current, i, lang),
                overlay: views.overlay_figure(current, i, lang)}

    run_event = run_btn.click(run, [prompt, table, seed, max_new, lang_in],
                              [texts, status, scrub, step_table, overlay, state], api_name="compare_run",
                              show_progress="hidden")
    stop_btn.click(None, None, None, cancels=[run_event], api_visibility="private", queue=False)
    gr.on([scrub.release, scrub.input], scrub_to, [scrub, state, lang_in], [texts, step_table, overlay],
          api_name="compare_scrub", show_progress="hidden", trigger_mode="always_last")

    def rerender(lang, current: CompareRun, index, rows, current_prompt):
        out = {table: gr.Dataframe(label=tr(lang, "compare.table"))}
        swapped = swapped_default(current_prompt, lang, LESSON_PROMPTS)
        if swapped is not None:
            out[prompt] = swapped
        if current.comparison is None or current.length == 0:
            return out | {texts: views.columns_html(None, lang), status: views.status_markdown(None, lang),
                          overlay: views.overlay_figure(None, 0, lang)}
        i = scrub_index(index, range(current.length))
        i = current.length - 1 if i is None else i
        return out | {texts: views.columns_html(current, lang, selected=i), status: views.status_markdown(current, lang),
                      step_table: views.step_table_html(current, i, lang), overlay: views.overlay_figure(current, i, lang)}

    if language is not None:
        language.change(rerender, [language, state, scrub, table, prompt],
                        [table, prompt, texts, status, step_table, overlay], api_visibility="private",
                        show_progress="hidden")
    return {"prompt": prompt, "table": table, "seed": seed, "max_new_tokens": max_new, "run": run_btn,
            "texts": texts, "status": status, "scrub": scrub, "overlay": overlay, "state": state}
