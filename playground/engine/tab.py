"""The Engine tab: lesson 13, "Inside an engine", on the live model.

A table of up to MAX_ENGINE_ROWS requests, each with its own settings, runs as one batch: one forward
pass per step, one sampler pass over the (B, V) logits with the settings as (B,) tensors, each row
stopping on its own. Layout and wiring only, in that order: the components (named by EngineComponents),
the handlers (each takes them and returns {component: value}), then the events. The table is parsed in
`table`, the views are built in `views`, and the run on screen is kept in `replay`, from which a switch
of the page's language redraws every text without the model. Text goes out on every step; the heatmap
and the tensor table at most every CHART_INTERVAL seconds, and always on the first step (the full batch)
and the last (each Plotly update re-sends the whole figure).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from playground import limits

from ..common.errors import in_language, unchanged, user_error, warn
from ..common.handlers import bind
from ..common.i18n import DEFAULT, T, tr
from ..common.kept_batches import KeptBatches, KeptStep, timed
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


# ---- the components -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineComponents:
    """The tab's components, by name: the handlers key their {component: value} dicts on these."""

    table: gr.Dataframe
    run_btn: gr.Button
    stop_btn: gr.Button
    add_btn: gr.Button
    remove_btn: gr.Button
    reset_btn: gr.Button
    help_md: gr.Markdown
    status: gr.Markdown
    texts: gr.HTML
    heatmap: gr.Plot
    params: gr.HTML
    last_run: gr.State  # the EngineRun on screen: a language switch redraws it
    watch: gr.Checkbox
    room_btn: gr.Button
    room: gr.HTML
    last_room: gr.State  # the Room snapshot on screen, for the same reason
    timer: gr.Timer


def build_components() -> EngineComponents:
    """Create the tab's components in the current Tab context, top to bottom."""
    gr.Markdown(T("engine.intro"))
    table = gr.Dataframe(
        EXAMPLE_ROWS, headers=list(COLUMNS), datatype=DATATYPES, type="array", interactive=True,
        column_count=(len(COLUMNS), "fixed"), row_count=len(EXAMPLE_ROWS), label=table_label(),
        column_widths=["21%", "10%", "6%", "6%", "6%", "8%", "5%", "7%", "5%", "9%", "9%", "8%"], elem_id="engine-table",
    )
    parsed_by_us(table)
    with gr.Row():
        run_btn = gr.Button(T("engine.button.run"), variant="primary", elem_id="engine-run", scale=2,
                            interactive=False)
        stop_btn = gr.Button(T("engine.button.stop"), variant="stop", elem_id="engine-stop", scale=1)
        add_btn = gr.Button(T("engine.button.add"), elem_id="engine-add", scale=1)
        remove_btn = gr.Button(T("engine.button.remove"), elem_id="engine-remove", scale=1)
        reset_btn = gr.Button(T("engine.button.example"), elem_id="engine-reset", scale=1)
    help_md = gr.Markdown(help_markdown(), elem_classes=["ntp-note"], elem_id="engine-help")
    status = gr.Markdown(replay.status_markdown(None), elem_id="engine-status")
    texts = gr.HTML(replay.texts_html(None), elem_id="engine-texts")
    heatmap = gr.Plot(replay.heatmap(None, TOP_N), show_label=False, elem_id="engine-heatmap")
    params = gr.HTML(replay.params_html(None), elem_id="engine-params")
    last_run = gr.State(None)
    with gr.Accordion(T("engine.room.accordion"), open=False):
        with gr.Row():
            watch = gr.Checkbox(False, label=watch_label(), elem_id="room-watch")
            room_btn = gr.Button(T("engine.room.refresh"), size="sm", scale=0, elem_id="room-refresh")
        room = gr.HTML(elem_id="room")
    last_room = gr.State(None)
    timer = gr.Timer(ROOM_REFRESH, active=False)
    return EngineComponents(
        table=table, run_btn=run_btn, stop_btn=stop_btn, add_btn=add_btn, remove_btn=remove_btn, reset_btn=reset_btn,
        help_md=help_md, status=status, texts=texts, heatmap=heatmap, params=params, last_run=last_run, watch=watch,
        room_btn=room_btn, room=room, last_room=last_room, timer=timer,
    )


# ---- the handlers: each takes the components (and the service) first, then its event's inputs by name -------
# (run and show_room serve public endpoints: no docstring, as Gradio would show it as their description)


def run(c: EngineComponents, service, kept: KeptBatches, rows, lang):
    try:
        numbers_, requests = parse_table(rows, lang)
    except ValueError as e:
        raise user_error(e) from None
    shown = kept.get(service, requests, TOP_N)  # a scene's batch, run at start: shown at once
    try:
        steps = iter(shown) if shown is not None else timed(
            service.generate_batch(requests, top_n=TOP_N, report_waiting=True))
    except ValueError as e:  # bad input the table cannot see (e.g. prompt longer than the limit)
        raise user_error(renumber(str(e), numbers_)) from None
    except RuntimeError as e:  # the model is still loading, or failed to, or the room is full
        raise user_error(e, lang) from None
    state, last_chart = EngineRun.start(numbers_, requests, replayed=shown is not None), 0.0
    try:
        for kept_step in steps:
            if not isinstance(kept_step, KeptStep):  # still waiting for rows in the shared batch
                state = state.waited(kept_step)
                yield {c.status: replay.status_markdown(state, lang), c.last_run: state}
                continue
            step, state = kept_step.step, state.stepped(kept_step.step, kept_step.seconds)
            if state.replayed and not state.done:  # a kept batch goes out whole, at its end
                continue
            out = {c.texts: replay.texts_html(state, lang), c.status: replay.status_markdown(state, lang),
                   c.last_run: state}
            now = time.monotonic()
            if state.done or step.step == 0 or now - last_chart >= CHART_INTERVAL:
                last_chart = now
                out |= {c.heatmap: replay.heatmap(state, TOP_N, lang), c.params: replay.params_html(state, lang)}
            yield out
    finally:
        getattr(steps, "close", lambda: None)()  # Stop or a closed tab: the rows leave the batch


def add_row(c: EngineComponents, rows, lang):
    rows = table_rows(rows)
    if len(rows) >= limits.MAX_ENGINE_ROWS:
        warn(tr(lang, "engine.warn.too_many_rows", max_rows=limits.MAX_ENGINE_ROWS))
        return unchanged(c.table)
    return {c.table: table_value(rows + [list(NEW_ROWS[len(rows) % len(NEW_ROWS)])], lang)}


def remove_row(c: EngineComponents, rows, lang):
    rows = table_rows(rows)
    if len(rows) <= 1:
        warn(tr(lang, "engine.warn.last_row"))
        return unchanged(c.table)
    return {c.table: table_value(rows[:-1], lang)}


def show_example(c: EngineComponents, lang):
    """The example table again, in `lang`."""
    return {c.table: table_value([list(r) for r in EXAMPLE_ROWS], lang)}


def show_room(c: EngineComponents, service, lang):
    try:
        snapshot = service.room()
    except RuntimeError as e:  # the model is still loading
        return {c.room: f'<div class="ntp-caption">{escape_html(in_language(e, lang))}</div>', c.last_room: None}
    return {c.room: views.room_html(snapshot, lang), c.last_room: snapshot}


def rerender(c: EngineComponents, lang, state, snapshot, rows):
    """The page's language changed: redraw every text built here from what is on screen (no model)."""
    try:
        shown = gr.Dataframe(value=table_value(table_rows(rows), lang), label=table_label(lang))
    except ValueError:  # not a table we can read: leave it as it is
        shown = gr.skip()
    return {
        c.help_md: help_markdown(lang), c.table: shown, c.watch: gr.Checkbox(label=watch_label(lang)),
        c.status: replay.status_markdown(state, lang), c.texts: replay.texts_html(state, lang),
        c.heatmap: replay.heatmap(state, TOP_N, lang), c.params: replay.params_html(state, lang),
        c.room: views.room_html(snapshot, lang) if snapshot is not None else gr.skip(),
    }


# ---- the events ---------------------------------------------------------------------------------------------


def wire_table(c: EngineComponents, service, kept: KeptBatches, lang_in) -> None:
    """The batch's run and its Stop, and the buttons that edit the table."""
    run_event = c.run_btn.click(bind(run, c, service, kept), [c.table, lang_in],
                                [c.texts, c.status, c.heatmap, c.params, c.last_run], api_name="engine_run",
                                show_progress="hidden", preprocess=False)  # parse_table names the row and field
    c.stop_btn.click(None, None, None, cancels=[run_event], api_visibility="private", queue=False)
    # queued (they never touch the model) so that the warning toast reaches the page
    c.add_btn.click(bind(add_row, c), [c.table, lang_in], c.table, api_name="engine_add_row", api_visibility="private",
                    preprocess=False)
    c.remove_btn.click(bind(remove_row, c), [c.table, lang_in], c.table, api_name="engine_remove_row",
                       api_visibility="private", preprocess=False)
    c.reset_btn.click(bind(show_example, c), lang_in, c.table, api_name="engine_example", api_visibility="private",
                      queue=False)


def wire_room(c: EngineComponents, service, lang_in) -> None:
    """The live room: on a click, and on every tick of the timer while "watch" is on."""
    refresh = bind(show_room, c, service)  # one function for both events, as Gradio counts concurrency
    c.room_btn.click(refresh, lang_in, [c.room, c.last_room], api_name="room", show_progress="hidden")
    c.timer.tick(refresh, lang_in, [c.room, c.last_room], api_visibility="private", show_progress="hidden")
    c.watch.change(lambda on: {c.timer: gr.Timer(active=bool(on))}, c.watch, c.timer, api_visibility="private",
                   show_progress="hidden")  # a lambda still: its private endpoint keeps its name, "lambda"


def build_engine_tab(service, language: gr.Radio | None = None, kept: KeptBatches | None = None) -> dict:
    """Create the tab's components inside the current Tab context and wire their events. language: the
    page's picker ("en" / "vi"); every text built here follows it (English without one); kept: the scenes'
    batches run at start (None: none)."""
    lang_in = language if language is not None else gr.State(DEFAULT)
    c = build_components()
    wire_table(c, service, kept if kept is not None else KeptBatches(), lang_in)
    wire_room(c, service, lang_in)
    redraw = bind(rerender, c)
    if language is not None:
        language.change(redraw, [language, c.last_run, c.last_room, c.table],
                        [c.help_md, c.table, c.watch, c.status, c.texts, c.heatmap, c.params, c.room],
                        api_visibility="private", show_progress="hidden", preprocess=False, trigger_mode="multiple")
    return {"table": c.table, "run": c.run_btn, "status": c.status, "texts": c.texts, "heatmap": c.heatmap,
            "params": c.params, "help": c.help_md, "watch": c.watch, "room": c.room, "last_run": c.last_run,
            "rerender": redraw}
