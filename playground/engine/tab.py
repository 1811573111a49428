"""The Engine tab: lesson 13, "Inside an engine", on the live model.

A table of up to MAX_ENGINE_ROWS requests, each with its own settings, runs as one batch: one forward
pass per step, one sampler pass over the (B, V) logits with the settings as (B,) tensors, each row
stopping on its own. Layout and wiring only: the table is parsed in `table`, the views are built in
`views`. Text goes out on every step; the heatmap and the tensor table at most every CHART_INTERVAL
seconds, and always on the first step (the full batch) and the last (each Plotly update re-sends the
whole figure).
"""

from __future__ import annotations

import time

import gradio as gr

from model_service import limits
from model_service.records import BatchStep

from ..common.errors import unchanged, user_error, warn
from ..common.figures import empty_figure
from ..common.text import escape_html
from . import views
from .table import COLUMNS, DATATYPES, EXAMPLE_ROWS, NEW_ROWS, parse_table, renumber, table_rows

CHART_INTERVAL = 0.1  # seconds: at most 10 chart updates a second
ROOM_REFRESH = 2.0  # seconds between live-room snapshots (only while a learner watches)
TOP_N = 10  # tokens per row in the heatmap (and in each StepRecord of the run)
INTRO = """**Inside an engine.** A server answers many requests at once. Each step, one forward pass gives
**one row of logits per request**, and each request carries its own settings. The sampler applies every
row's settings to its own row **in one pass**: the settings become one tensor per knob, shape (B,). Each row
stops on its own (end-of-text, max tokens or a stop string) and leaves the batch. Fix a seed and a row
samples the same text whatever its batch-mates."""
HELP = f"""One row per request, at most {limits.MAX_ENGINE_ROWS}. Double-click a cell to edit it; add or remove rows
with the buttons. **Blank cells take the default**: temperature 1 (0 = greedy), top-k 0 (off), top-p 1 (off),
min-p 0 (off), order `hf` (or `vllm`, `llama.cpp`), seed blank = random, max tokens
{limits.DEFAULT_ENGINE_MAX_NEW_TOKENS} (up to {limits.MAX_NEW_TOKENS}). **Stop**: one or more strings separated by
`|`, for example `.|!`; spaces count; write `\\n` for a newline and `\\|` for a bar. Empty rows are ignored."""


def parsed_by_us(table: gr.Dataframe) -> gr.Dataframe:
    """Let the table's input reach parse_table unchecked by Gradio: Gradio's own pydantic check of a
    table answers a malformed API call with "1 validation error for DataframeData", which names no row
    and no field. The documented API schema and the front end stay the Dataframe's."""
    table._api_info_cache = table.api_info()
    table.data_model = None  # read by Gradio before preprocess; preprocess=False does the rest
    return table


def build_engine_tab(service, language: gr.Radio | None = None) -> dict:
    """Create the tab's components inside the current Tab context and wire their events."""
    gr.Markdown(INTRO)
    table = gr.Dataframe(
        EXAMPLE_ROWS, headers=list(COLUMNS), datatype=DATATYPES, type="array", interactive=True,
        column_count=(len(COLUMNS), "fixed"), row_count=len(EXAMPLE_ROWS),
        label=f"Requests (up to {limits.MAX_ENGINE_ROWS})",
        column_widths=["26%", "9%", "7%", "7%", "7%", "10%", "7%", "9%", "9%"], elem_id="engine-table",
    )
    parsed_by_us(table)
    with gr.Row():
        run_btn = gr.Button("Run the batch", variant="primary", elem_id="engine-run", scale=2)
        stop_btn = gr.Button("Stop", variant="stop", elem_id="engine-stop", scale=1)
        add_btn = gr.Button("Add row", elem_id="engine-add", scale=1)
        remove_btn = gr.Button("Remove last row", elem_id="engine-remove", scale=1)
        reset_btn = gr.Button("Example batch", elem_id="engine-reset", scale=1)
    gr.Markdown(HELP, elem_classes=["ntp-note"])
    status = gr.Markdown(views.status_markdown(None), elem_id="engine-status")
    texts = gr.HTML('<div class="ntp-empty">Each row\'s text streams here, side by side.</div>', elem_id="engine-texts")
    heatmap = gr.Plot(empty_figure("The batch appears here: one line per row, its top tokens after the final stage."),
                      show_label=False, elem_id="engine-heatmap")
    params = gr.HTML(views.empty_params_html(), elem_id="engine-params")
    with gr.Accordion("The live room: every learner's rows in the model's batch right now", open=False):
        with gr.Row():
            watch = gr.Checkbox(False, label="Watch it live (refreshes every 2 s)", elem_id="room-watch")
            room_btn = gr.Button("Refresh", size="sm", scale=0, elem_id="room-refresh")
        room = gr.HTML(elem_id="room")
    timer = gr.Timer(ROOM_REFRESH, active=False)

    def run(rows):
        try:
            numbers_, requests = parse_table(rows)
        except ValueError as e:
            raise user_error(e) from None
        try:
            steps = service.generate_batch(requests, top_n=TOP_N, report_waiting=True)
        except ValueError as e:  # bad input the table cannot see (e.g. prompt longer than the limit)
            raise user_error(renumber(str(e), numbers_)) from None
        except RuntimeError as e:  # the model is still loading, or failed to
            raise user_error(e) from None
        labels = [views.settings_label(q.settings) for q in requests]
        prompts = [q.prompt for q in requests]
        latest, sizes, tokens = [None] * len(requests), [], 0
        started = last_chart = time.monotonic()
        try:
            for step in steps:
                if not isinstance(step, BatchStep):  # still waiting for rows in the shared batch
                    yield {status: views.waiting_markdown(step)}
                    continue
                for i, record in enumerate(step.rows):
                    if record is not None:
                        latest[i] = record
                sizes.append(len(step.active))
                tokens += len(step.active)
                now = time.monotonic()
                done = all(r is not None and r.stop_reason for r in latest)
                out = {
                    texts: views.rows_html(numbers_, labels, prompts, latest, running=not done),
                    status: views.status_markdown(step, sizes, tokens, now - started, done),
                }
                if done or step.step == 0 or now - last_chart >= CHART_INTERVAL:
                    last_chart = now
                    row_labels = [f"{n} · {lab}" for n, lab in zip(numbers_, labels)]
                    out |= {heatmap: views.batch_heatmap(step, row_labels, latest, TOP_N),
                            params: views.params_html(step, numbers_)}
                yield out
        finally:
            getattr(steps, "close", lambda: None)()  # Stop or a closed tab: the rows leave the batch

    def add_row(rows):
        rows = table_rows(rows)
        if len(rows) >= limits.MAX_ENGINE_ROWS:
            warn(f"At most {limits.MAX_ENGINE_ROWS} rows run together here: remove one first.")
            return unchanged(table)
        return {table: rows + [list(NEW_ROWS[len(rows) % len(NEW_ROWS)])]}

    def remove_row(rows):
        rows = table_rows(rows)
        if len(rows) <= 1:
            warn("Keep at least one row: edit it instead.")
            return unchanged(table)
        return {table: rows[:-1]}

    run_event = run_btn.click(run, table, [texts, status, heatmap, params], api_name="engine_run",
                              show_progress="hidden", preprocess=False)  # parse_table names the row and field
    stop_btn.click(None, None, None, cancels=[run_event], api_visibility="private", queue=False)
    # queued (they never touch the model) so that the warning toast reaches the page
    add_btn.click(add_row, table, table, api_name="engine_add_row", api_visibility="private", preprocess=False)
    remove_btn.click(remove_row, table, table, api_name="engine_remove_row", api_visibility="private",
                     preprocess=False)
    reset_btn.click(lambda: {table: [list(r) for r in EXAMPLE_ROWS]}, None, table, api_name="engine_example",
                    api_visibility="private", queue=False)
    def show_room():
        try:
            return {room: views.room_html(service.room())}
        except RuntimeError as e:  # the model is still loading
            return {room: f'<div class="ntp-caption">{escape_html(str(e))}</div>'}

    room_btn.click(show_room, None, room, api_name="room", show_progress="hidden")
    timer.tick(show_room, None, room, api_visibility="private", show_progress="hidden")
    watch.change(lambda on: {timer: gr.Timer(active=bool(on))}, watch, timer, api_visibility="private",
                 show_progress="hidden")

    return {"table": table, "run": run_btn, "status": status, "texts": texts, "heatmap": heatmap, "params": params}
