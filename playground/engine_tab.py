"""The Engine tab: lesson 13, "Inside an engine", on the live model.

A table of up to MAX_ROWS requests, each with its own settings, runs as one batch: one forward pass
per step, one sampler pass over the (B, V) logits with the settings as (B,) tensors, each row
stopping on its own. Layout and wiring only; the views are built in engine_charts. Text goes out on
every step; the heatmap and the tensor table at most every CHART_INTERVAL seconds, and always on
the first step (the full batch) and the last (each Plotly update re-sends the whole figure).
"""

from __future__ import annotations

import math
import numbers
import re
import time

import gradio as gr

from model_service.settings import ORDERS, Request, SamplingSettings

from . import engine_charts as views
from .charts import empty_figure

CHART_INTERVAL = 0.1  # seconds: at most 10 chart updates a second
MAX_ROWS = 8
MAX_TOKENS = 256
DEFAULT_MAX_TOKENS = 32
TOP_N = 10  # tokens per row in the heatmap (and in each StepRecord of the run)
COLUMNS = ("prompt", "temperature", "top-k", "top-p", "min-p", "order", "seed", "max tokens", "stop")
DATATYPES = ["str", "number", "number", "number", "number", "str", "str", "number", "str"]
# A mixed batch: greedy next to several kinds of sampling, three orders, three ways to stop.
EXAMPLE_ROWS = [
    ["The capital of France is", 0, 0, 1, 0, "hf", "", 24, "\\n"],
    ["Once upon a time", 0.8, 0, 0.95, 0, "hf", "1", 32, ""],
    ["The best way to learn is", 1, 0, 1, 0.1, "hf", "2", 32, "."],
    ["1, 2, 3,", 1.5, 0, 1, 0, "hf", "3", 24, ""],
    ["def fib(n):", 0.6, 40, 1, 0, "vllm", "5", 32, ""],
    ["My favourite colour is", 0.7, 0, 0.9, 0, "llama.cpp", "", 16, ""],
]
NEW_ROWS = [  # what "Add row" appends, in turn
    ["Tell me about the sea.", 1, 0, 1, 0.05, "hf", "", 32, ""],
    ["The recipe calls for", 0.9, 50, 0.9, 0, "hf", "7", 32, ""],
]
INTRO = """**Inside an engine.** A server answers many requests at once. Each step, one forward pass gives
**one row of logits per request**, and each request carries its own settings. The sampler applies every
row's settings to its own row **in one pass**: the settings become one tensor per knob, shape (B,). Each row
stops on its own (end-of-text, max tokens or a stop string) and leaves the batch. Fix a seed and a row
samples the same text whatever its batch-mates."""
HELP = f"""One row per request, at most {MAX_ROWS}. Double-click a cell to edit it; add or remove rows with the
buttons. **Blank cells take the default**: temperature 1 (0 = greedy), top-k 0 (off), top-p 1 (off), min-p 0 (off),
order `hf` (or `vllm`, `llama.cpp`), seed blank = random, max tokens {DEFAULT_MAX_TOKENS} (up to {MAX_TOKENS}).
**Stop**: one or more strings separated by `|`, for example `.|!`; spaces count; write `\\n` for a newline and
`\\|` for a bar. Empty rows are ignored."""


# ---- the table -> requests (no gradio here: ValueError naming the row and the field) -------------------


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and not value.strip()
    )


def table_rows(table) -> list[list]:
    """The cells of what gr.Dataframe gives (a list of lists, a DataFrame, {"data": ...}), each row
    padded or cut to the table's columns."""
    if table is None:
        return []
    if isinstance(table, dict):
        table = table.get("data") or []
    elif hasattr(table, "columns") and hasattr(table, "astype"):  # pandas: NaN stays NaN, as object
        table = table.astype(object).values.tolist()
    elif hasattr(table, "tolist"):
        table = table.tolist()
    if not isinstance(table, (list, tuple)):
        raise ValueError(f"the table must be a list of rows, got {type(table).__name__}")
    rows = []
    for row in table:
        cells = list(row) if isinstance(row, (list, tuple)) else [row]
        rows.append(cells[: len(COLUMNS)] + [None] * (len(COLUMNS) - len(cells)))
    return rows


def _number(n: int, field: str, value, default, integer: bool = False):
    if _blank(value):
        return default
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"row {n}, {field}: must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"row {n}, {field}: must be a finite number, got {value!r}")
    if integer:
        if value != int(value):
            raise ValueError(f"row {n}, {field}: must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def parse_stop_cell(value) -> tuple[str, ...]:
    """Stop strings separated by "|"; "\\|" is a bar, "\\n" a newline, "\\t" a tab; spaces count."""
    if _blank(value):
        return ()
    parts = re.split(r"(?<!\\)\|", str(value))
    out = (p.replace("\\|", "|").replace("\\n", "\n").replace("\\t", "\t") for p in parts)
    return tuple(p for p in out if p)


def parse_row(n: int, cells: list) -> Request:
    prompt, temperature, top_k, top_p, min_p, order, seed, max_tokens, stop = cells
    if _blank(prompt):
        raise ValueError(f"row {n}, prompt: empty; type some text for the model to continue, or remove the row")
    order = "hf" if _blank(order) else str(order).strip().lower()
    if order not in ORDERS:
        raise ValueError(f"row {n}, order: must be one of {', '.join(ORDERS)}; got {cells[5]!r}")
    max_new = _number(n, "max tokens", max_tokens, DEFAULT_MAX_TOKENS, integer=True)
    if not 1 <= max_new <= MAX_TOKENS:
        raise ValueError(f"row {n}, max tokens: must be between 1 and {MAX_TOKENS}, got {max_tokens!r}")
    try:
        settings = SamplingSettings(
            temperature=_number(n, "temperature", temperature, 1.0), top_k=_number(n, "top-k", top_k, 0, integer=True),
            top_p=_number(n, "top-p", top_p, 1.0), min_p=_number(n, "min-p", min_p, 0.0),
            seed=_number(n, "seed", seed, None, integer=True), order=order,
        )
    except ValueError as e:
        message = str(e)
        raise ValueError(message if message.startswith("row ") else f"row {n}: {message}") from None
    return Request(str(prompt), settings, max_new, parse_stop_cell(stop))


def parse_table(table) -> tuple[list[int], list[Request]]:
    """(the 1-based table row of each request, the requests). Wholly blank rows are skipped but keep
    their place in the numbering, so a message's row number is the one the learner sees."""
    numbered = [(n, cells) for n, cells in enumerate(table_rows(table), start=1) if not all(map(_blank, cells))]
    if not numbered:
        raise ValueError("the table has no requests: add a row with a prompt")
    if len(numbered) > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} requests run together here; the table has {len(numbered)}: remove "
                         f"{len(numbered) - MAX_ROWS} row(s)")
    return [n for n, _ in numbered], [parse_row(n, cells) for n, cells in numbered]


def renumber(message: str, numbers_: list[int]) -> str:
    """The service names requests 1..B; the page names table rows."""
    m = re.match(r"request (\d+): ", message)
    if m and 1 <= int(m.group(1)) <= len(numbers_):
        return f"row {numbers_[int(m.group(1)) - 1]}: {message[m.end():]}"
    return message


# ---- the tab ------------------------------------------------------------------------------------


def build_engine_tab(service) -> dict:
    """Create the tab's components inside the current Tab context and wire their events."""
    gr.Markdown(INTRO)
    table = gr.Dataframe(
        EXAMPLE_ROWS, headers=list(COLUMNS), datatype=DATATYPES, type="array", interactive=True,
        column_count=(len(COLUMNS), "fixed"), row_count=len(EXAMPLE_ROWS), label=f"Requests (up to {MAX_ROWS})",
        column_widths=["26%", "9%", "7%", "7%", "7%", "10%", "7%", "9%", "9%"], elem_id="engine-table",
    )
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

    def run(rows):
        try:
            numbers_, requests = parse_table(rows)
        except ValueError as e:
            raise gr.Error(str(e), print_exception=False) from None
        try:
            steps = service.generate_batch(requests, top_n=TOP_N)
        except ValueError as e:  # bad input the table cannot see (e.g. prompt longer than the context)
            raise gr.Error(renumber(str(e), numbers_), print_exception=False) from None
        except RuntimeError as e:  # the model is still loading, or failed to
            raise gr.Error(str(e), print_exception=False) from None
        labels = [views.settings_label(q.settings) for q in requests]
        prompts = [q.prompt for q in requests]
        latest, sizes, tokens = [None] * len(requests), [], 0
        started = last_chart = time.monotonic()
        for step in steps:
            for i, record in enumerate(step.rows):
                if record is not None:
                    latest[i] = record
            sizes.append(len(step.active))
            tokens += len(step.active)
            now = time.monotonic()
            done = all(r is not None and r.stop_reason for r in latest)
            text = views.rows_html(numbers_, labels, prompts, latest, running=not done)
            line = views.status_markdown(step, sizes, tokens, now - started, done)
            if done or step.step == 0 or now - last_chart >= CHART_INTERVAL:
                last_chart = now
                figure = views.batch_heatmap(step, [f"{n} · {lab}" for n, lab in zip(numbers_, labels)], latest, TOP_N)
                yield text, line, figure, views.params_html(step, numbers_)
            else:
                yield text, line, gr.skip(), gr.skip()

    def add_row(rows):
        rows = table_rows(rows)
        if len(rows) >= MAX_ROWS:
            gr.Warning(f"At most {MAX_ROWS} rows run together here: remove one first.")
            return gr.skip()
        return rows + [list(NEW_ROWS[len(rows) % len(NEW_ROWS)])]

    def remove_row(rows):
        rows = table_rows(rows)
        if len(rows) <= 1:
            gr.Warning("Keep at least one row: edit it instead.")
            return gr.skip()
        return rows[:-1]

    run_event = run_btn.click(run, table, [texts, status, heatmap, params], api_name="engine_run",
                              concurrency_id="model", show_progress="hidden")
    stop_btn.click(None, None, None, cancels=[run_event], api_visibility="private", queue=False)
    # queued (no concurrency_id: they never wait for the model) so that gr.Warning reaches the page
    add_btn.click(add_row, table, table, api_name="engine_add_row", api_visibility="private")
    remove_btn.click(remove_row, table, table, api_name="engine_remove_row", api_visibility="private")
    reset_btn.click(lambda: [list(r) for r in EXAMPLE_ROWS], None, table, api_name="engine_example",
                    api_visibility="private", queue=False)
    return {"table": table, "run": run_btn, "status": status, "texts": texts, "heatmap": heatmap, "params": params}
