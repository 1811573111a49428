"""The Engine tab: lesson 13, "Inside an engine", on the live model.

A table of up to MAX_ENGINE_ROWS requests, each with its own settings, runs as one batch: one forward
pass per step, one sampler pass over the (B, V) logits with the settings as (B,) tensors, each row
stopping on its own. Layout and wiring only: the table is parsed in `table`, the views are built in
`views`, and the run on screen is kept in `replay`, from which a switch of the page's language redraws
every text without the model. Text goes out on every step; the heatmap and the tensor table at most every CHART_INTERVAL
seconds, and always on the first step (the full batch) and the last (each Plotly update re-sends the
whole figure).
"""

from __future__ import annotations

import time

import gradio as gr

from model_service import limits
from model_service.records.step import BatchStep

from ..common.errors import in_language, unchanged, user_error, warn
from ..common.i18n import DEFAULT, T, tr
from ..common.tables import parsed_by_us
from ..common.text import escape_html
from . import replay, views
from .replay import EngineRun
from .table import COLUMNS, DATATYPES, EXAMPLE_ROWS, NEW_ROWS, parse_table, renumber, table_rows, table_value

CHART_INTERVAL = 0.1  # seconds: at most 10 chart updates a second
ROOM_REFRESH = 2.0  # seconds between live-room snapshots (only while a learner watches)
TOP_N = 10  # tokens per row in the heatmap (and in each StepRecord of the run)


def help_markdown(lang=DEFAULT) -> str:
    return tr(lang, "engine.help", max_rows=limits.MAX_ENGINE_ROWS, default_tokens=limits.DEFAULT_ENGINE_MAX_NEW_TOKENS,
              max_tokens=limits.MAX_NEW_TOKENS)


def table_label(lang=DEFAULT) -> str:
    return tr(lang, "engine.table.label", max_rows=limits.MAX_ENGINE_ROWS)


def watch_label(lang=DEFAULT) -> str:
    return tr(lang, "engine.room.watch", seconds=f"{ROOM_REFRESH:g}")


def build_engine_tab(service, language: gr.Radio | None = None) -> dict:
    """Create the tab's components inside the current Tab context and wire their events. language: the
    page's picker ("en" / "vi"); every text built here follows it (English without one)."""
    lang_in = language if language is not None else gr.State(DEFAULT)
    gr.Markdown(T("engine.intro"))
    table = gr.Dataframe(
        EXAMPLE_ROWS, headers=list(COLUMNS), datatype=DATATYPES, type="array", interactive=True,
        column_count=(len(COLUMNS), "fixed"), row_count=len(EXAMPLE_ROWS), label=table_label(),
        column_widths=["24%", "9%", "7%", "7%", "7%", "10%", "7%", "11%", "9%"], elem_id="engine-table",
    )
    parsed_by_us(table)
    with gr.Row():
        run_btn = gr.Button(T("engine.button.run"), variant="primary", elem_id="engine-run", scale=2)
        stop_btn = gr.Button(T("engine.button.stop"), variant="stop", elem_id="engine-stop", scale=1)
        add_btn = gr.Button(T("engine.button.add"), elem_id="engine-add", scale=1)
        remove_btn = gr.Button(T("engine.button.remove"), elem_id="engine-remove", scale=1)
        reset_btn = gr.Button(T("engine.button.example"), elem_id="engine-reset", scale=1)
    help_md = gr.Markdown(help_markdown(), elem_classes=["ntp-note"], elem_id="engine-help")
    status = gr.Markdown(replay.status_markdown(None), elem_id="engine-status")
    texts = gr.HTML(replay.texts_html(None), elem_id="engine-texts")
    heatmap = gr.Plot(replay.heatmap(None, TOP_N), show_label=False, elem_id="engine-heatmap")
    params = gr.HTML(replay.params_html(None), elem_id="engine-params")
    last_run = gr.State(None)  # the EngineRun on screen: a language switch redraws it
    with gr.Accordion(T("engine.room.accordion"), open=False):
        with gr.Row():
            watch = gr.Checkbox(False, label=watch_label(), elem_id="room-watch")
            room_btn = gr.Button(T("engine.room.refresh"), size="sm", scale=0, elem_id="room-refresh")
        room = gr.HTML(elem_id="room")
    last_room = gr.State(None)  # the Room snapshot on screen, for the same reason
    timer = gr.Timer(ROOM_REFRESH, active=False)

    def run(rows, lang):
        try:
            numbers_, requests = parse_table(rows, lang)
        except ValueError as e:
            raise user_error(e) from None
        try:
            steps = service.generate_batch(requests, top_n=TOP_N, report_waiting=True)
        except ValueError as e:  # bad input the table cannot see (e.g. prompt longer than the limit)
            raise user_error(renumber(str(e), numbers_)) from None
        except RuntimeError as e:  # the model is still loading, or failed to, or the room is full
            raise user_error(e, lang) from None
        state = EngineRun.start(numbers_, requests)
        started = last_chart = time.monotonic()
        try:
            for step in steps:
                if not isinstance(step, BatchStep):  # still waiting for rows in the shared batch
                    state = state.waited(step)
                    yield {status: replay.status_markdown(state, lang), last_run: state}
                    continue
                now = time.monotonic()
                state = state.stepped(step, now - started)
                out = {texts: replay.texts_html(state, lang), status: replay.status_markdown(state, lang),
                       last_run: state}
                if state.done or step.step == 0 or now - last_chart >= CHART_INTERVAL:
                    last_chart = now
                    out |= {heatmap: replay.heatmap(state, TOP_N, lang), params: replay.params_html(state, lang)}
                yield out
        finally:
            getattr(steps, "close", lambda: None)()  # Stop or a closed tab: the rows leave the batch

    def add_row(rows, lang):
        rows = table_rows(rows)
        if len(rows) >= limits.MAX_ENGINE_ROWS:
            warn(tr(lang, "engine.warn.too_many_rows", max_rows=limits.MAX_ENGINE_ROWS))
            return unchanged(table)
        return {table: table_value(rows + [list(NEW_ROWS[len(rows) % len(NEW_ROWS)])], lang)}

    def remove_row(rows, lang):
        rows = table_rows(rows)
        if len(rows) <= 1:
            warn(tr(lang, "engine.warn.last_row"))
            return unchanged(table)
        return {table: table_value(rows[:-1], lang)}

    run_event = run_btn.click(run, [table, lang_in], [texts, status, heatmap, params, last_run], api_name="engine_run",
                              show_progress="hidden", preprocess=False)  # parse_table names the row and field
    stop_btn.click(None, None, None, cancels=[run_event], api_visibility="private", queue=False)
    # queued (they never touch the model) so that the warning toast reaches the page
    add_btn.click(add_row, [table, lang_in], table, api_name="engine_add_row", api_visibility="private",
                  preprocess=False)
    remove_btn.click(remove_row, [table, lang_in], table, api_name="engine_remove_row", api_visibility="private",
                     preprocess=False)
    reset_btn.click(lambda lang: {table: table_value([list(r) for r in EXAMPLE_ROWS], lang)}, lang_in, table,
                    api_name="engine_example", api_visibility="private", queue=False)

    def show_room(lang):
        try:
            snapshot = service.room()
        except RuntimeError as e:  # the model is still loading
            return {room: f'<div class="ntp-caption">{escape_html(in_language(e, lang))}</div>', last_room: None}
        return {room: views.room_html(snapshot, lang), last_room: snapshot}

    room_btn.click(show_room, lang_in, [room, last_room], api_name="room", show_progress="hidden")
    timer.tick(show_room, lang_in, [room, last_room], api_visibility="private", show_progress="hidden")
    watch.change(lambda on: {timer: gr.Timer(active=bool(on))}, watch, timer, api_visibility="private",
                 show_progress="hidden")

    def rerender(lang, state, snapshot, rows):
        """The page's language changed: redraw every text built here from what is on screen (no model)."""
        try:
            shown = gr.Dataframe(value=table_value(table_rows(rows), lang), label=table_label(lang))
        except ValueError:  # not a table we can read: leave it as it is
            shown = gr.skip()
        return {
            help_md: help_markdown(lang), table: shown, watch: gr.Checkbox(label=watch_label(lang)),
            status: replay.status_markdown(state, lang), texts: replay.texts_html(state, lang),
            heatmap: replay.heatmap(state, TOP_N, lang), params: replay.params_html(state, lang),
            room: views.room_html(snapshot, lang) if snapshot is not None else gr.skip(),
        }

    if language is not None:
        language.change(rerender, [language, last_run, last_room, table],
                        [help_md, table, watch, status, texts, heatmap, params, room],
                        api_visibility="private", show_progress="hidden", preprocess=False)

    return {"table": table, "run": run_btn, "status": status, "texts": texts, "heatmap": heatmap, "params": params,
            "help": help_md, "watch": watch, "room": room, "last_run": last_run, "rerender": rerender}
