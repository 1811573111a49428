"""The Engine tab's table -> validated requests (no gradio here: ValueError naming the row and field).

Cells are what a person typed or what an API caller sent: numbers, text, blanks (None, "", NaN).
Blank cells take the defaults; the same validators as the lab and the API check every value.
"""

from __future__ import annotations

import re

from model_service import limits, validation
from model_service.settings import Request, parse_settings

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
_blank = validation.is_blank
COLUMN_NAMES = {"top_k": "top-k", "top_p": "top-p", "min_p": "min-p"}  # as the table's headers say


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


def parse_row(n: int, cells: list) -> Request:
    prompt, temperature, top_k, top_p, min_p, order, seed, max_tokens, stop = cells
    if _blank(prompt):
        raise ValueError(f"row {n}, prompt: empty; type some text for the model to continue, or remove the row")
    try:
        prompt = validation.text("prompt", prompt if isinstance(prompt, str) else str(prompt))
        settings = parse_settings(temperature, top_k, top_p, min_p, seed, order, labels=COLUMN_NAMES,
                                  blank_is_default=True)
        max_new = validation.number("max tokens", max_tokens, integer=True, low=1, high=limits.MAX_NEW_TOKENS,
                         blank=limits.DEFAULT_ENGINE_MAX_NEW_TOKENS)
        stops = validation.parse_stop_text("stop", stop)
    except ValueError as e:
        raise ValueError(f"row {n}, {e}") from None
    return Request(prompt, settings, max_new, stops)


def parse_table(table) -> tuple[list[int], list[Request]]:
    """(the 1-based table row of each request, the requests). Wholly blank rows are skipped but keep
    their place in the numbering, so a message's row number is the one the learner sees."""
    numbered = [(n, cells) for n, cells in enumerate(table_rows(table), start=1) if not all(map(_blank, cells))]
    if not numbered:
        raise ValueError("the table has no requests: add a row with a prompt")
    if len(numbered) > limits.MAX_ENGINE_ROWS:
        raise ValueError(f"at most {limits.MAX_ENGINE_ROWS} requests run together here; the table has {len(numbered)}: "
                         f"remove {len(numbered) - limits.MAX_ENGINE_ROWS} row(s)")
    return [n for n, _ in numbered], [parse_row(n, cells) for n, cells in numbered]


def renumber(message: str, numbers_: list[int]) -> str:
    """The service names requests 1..B; the page names table rows."""
    m = re.match(r"request (\d+): ", message)
    if m and 1 <= int(m.group(1)) <= len(numbers_):
        return f"row {numbers_[int(m.group(1)) - 1]}: {message[m.end():]}"
    return message
