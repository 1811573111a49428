"""The Engine tab's table -> validated requests (no gradio here: ValueError naming the row and field).

Cells are what a person typed or what an API caller sent: numbers, text, blanks (None, "", NaN).
Blank cells take the defaults; the same validators as the lab and the API check every value.
Columns are read by position, never by header: the headers are in the page's language.
"""

from __future__ import annotations

import re

from model_service.records import validation
from model_service.records.settings import Request, parse_settings
from playground import limits

from ..common.errors import in_language
from ..common.i18n import tr
from ..common.tables import PENALTY_NAMES, TAIL_COLUMNS, TAIL_DEFAULTS, padded, table_cells, tail_settings

# English; the penalties and "more samplers" last (common/tables.py: a row from before them, 9 cells, takes their
# defaults)
COLUMNS = ("prompt", "temperature", "top-k", "top-p", "min-p", "order", "seed", "max tokens", "stop", *TAIL_COLUMNS)
DATATYPES = ["str", "number", "number", "number", "number", "str", "str", "number", "str", "number", "number", "number",
             "str"]
OFF = list(TAIL_DEFAULTS)  # repetition 1, frequency 0, presence 0, no other sampler
# A mixed batch: greedy next to several kinds of sampling, three orders, three ways to stop.
EXAMPLE_ROWS = [
    ["The capital of France is", 0, 0, 1, 0, "hf", "", 24, "\\n", *OFF],
    ["Once upon a time", 0.8, 0, 0.95, 0, "hf", "1", 32, "", *OFF],
    ["The best way to learn is", 1, 0, 1, 0.1, "hf", "2", 32, ".", *OFF],
    ["1, 2, 3,", 1.5, 0, 1, 0, "hf", "3", 24, "", *OFF],
    ["def fib(n):", 0.6, 40, 1, 0, "vllm", "5", 32, "", *OFF],
    ["My favourite colour is", 0.7, 0, 0.9, 0, "llama.cpp", "", 16, "", *OFF],
]
NEW_ROWS = [  # what "Add row" appends, in turn
    ["Tell me about the sea.", 1, 0, 1, 0.05, "hf", "", 32, "", *OFF],
    ["The recipe calls for", 0.9, 50, 0.9, 0, "hf", "7", 32, "", *OFF],
]
_blank = validation.is_blank
# as the table's English headers say
COLUMN_NAMES = {"top_k": "top-k", "top_p": "top-p", "min_p": "min-p", **PENALTY_NAMES}
# the headers in words; the others are the knobs' names, as learners meet them in code, in every language
_WORDS = {"order": "engine.column.order", "max tokens": "engine.column.max_tokens", "stop": "engine.column.stop",
          "more samplers": "engine.column.more"}


def headers(lang="en") -> list[str]:
    """The table's column headers in `lang` (in English, COLUMNS but the last, whose header says its form)."""
    return [tr(lang, _WORDS[name]) if name in _WORDS else name for name in COLUMNS]


def table_value(rows, lang="en") -> dict:
    """Rows as the table shows them, under headers in `lang` (a gr.Dataframe value)."""
    return {"headers": headers(lang), "data": rows}


def table_rows(table) -> list[list]:
    """The cells of what gr.Dataframe gives (common/tables.py), each row padded or cut to the table's columns (an
    old row's missing penalties: their defaults)."""
    return [padded(cells, len(COLUMNS)) for cells in table_cells(table)]


def parse_row(n: int, cells: list, lang="en") -> Request:
    """One request; a message names the row, and the field as the table's header says it in `lang`."""
    cells = padded(cells, len(COLUMNS))
    prompt, temperature, top_k, top_p, min_p, order, seed, max_tokens, stop = cells[: -len(TAIL_COLUMNS)]
    if _blank(prompt):
        raise ValueError(tr(lang, "engine.error.empty_prompt", row=n))
    try:
        prompt = validation.text("prompt", prompt if isinstance(prompt, str) else str(prompt))
        settings = parse_settings(temperature, top_k, top_p, min_p, seed, order, labels=COLUMN_NAMES,
                                  blank_is_default=True, **tail_settings(cells))
        max_new = validation.number("max tokens", max_tokens, integer=True, low=1, high=limits.MAX_NEW_TOKENS,
                                    blank=limits.DEFAULT_ENGINE_MAX_NEW_TOKENS)
        stops = validation.parse_stop_text("stop", stop)
    except ValueError as e:  # the validators' keyed errors are said again in `lang`
        message = in_language(e, lang, fields=dict(zip(COLUMNS, headers(lang))))
        raise ValueError(tr(lang, "engine.error.row", row=n, message=message)) from None
    return Request(prompt, settings, max_new, stops)


def parse_table(table, lang="en") -> tuple[list[int], list[Request]]:
    """(the 1-based table row of each request, the requests). Wholly blank rows are skipped but keep
    their place in the numbering, so a message's row number is the one the learner sees. The
    validators' messages are in English (model_service has no languages); the table's own, in `lang`."""
    numbered = [(n, cells) for n, cells in enumerate(table_rows(table), start=1) if not all(map(_blank, cells))]
    if not numbered:
        raise ValueError(tr(lang, "engine.error.no_requests"))
    if len(numbered) > limits.MAX_ENGINE_ROWS:
        raise ValueError(tr(lang, "engine.error.too_many", max_rows=limits.MAX_ENGINE_ROWS, rows=len(numbered),
                            extra=len(numbered) - limits.MAX_ENGINE_ROWS))
    return [n for n, _ in numbered], [parse_row(n, cells, lang) for n, cells in numbered]


def renumber(message: str, numbers_: list[int]) -> str:
    """The service names requests 1..B; the page names table rows."""
    m = re.match(r"request (\d+): ", message)
    if m and 1 <= int(m.group(1)) <= len(numbers_):
        return f"row {numbers_[int(m.group(1)) - 1]}: {message[m.end():]}"
    return message
