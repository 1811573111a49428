"""The Compare tab's settings -> requests, and what a finished comparison is (no gradio, no torch here).

Every column is the same prompt with its own sampling settings and ONE shared seed: each row's
generator is seeded with it and draws one u per step (model_service/sampling/pipeline.py:draw), so every
column meets the same u at every step ("common random numbers"). A difference between columns then
comes from the settings alone, and each column's tokens are those of its own solo run with that seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from model_service.records import validation
from model_service.records.settings import Request, SamplingSettings, fresh_seed, parse_settings
from playground import limits

from ..common.errors import in_language
from ..common.i18n import tr
from ..common.tables import PENALTY_NAMES, TAIL_COLUMNS, TAIL_DEFAULTS, padded, table_cells, tail_settings

# English headers; read by position. The penalties and "more samplers" last (common/tables.py: an old row, 5 cells,
# takes their defaults)
COLUMNS = ("temperature", "top-k", "top-p", "min-p", "order", *TAIL_COLUMNS)
DATATYPES = ["number", "number", "number", "number", "str", "number", "number", "number", "str"]
LETTERS = "ABCD"
MIN_COLUMNS, MAX_COLUMNS = 2, len(LETTERS)
# T 0.5 against T 1, no penalty: with seed 3, the same tokens until step 5
EXAMPLE_ROWS = [[0.5, 0, 1, 0, "hf", *TAIL_DEFAULTS], [1.0, 0, 1, 0, "hf", *TAIL_DEFAULTS]]
NAMES = {"top_k": "top-k", "top_p": "top-p", "min_p": "min-p", **PENALTY_NAMES}
EXAMPLE_SEED = "3"
DEFAULT_MAX_NEW_TOKENS = limits.COMPARE_MAX_NEW_TOKENS


def headers(lang="en") -> list[str]:
    """The knobs' names in every language; "order" in `lang`."""
    words = {"order": "engine.column.order", "more samplers": "engine.column.more"}
    return [tr(lang, words[name]) if name in words else name for name in COLUMNS]


def table_value(rows, lang="en") -> dict:
    return {"headers": headers(lang), "data": rows}


def table_rows(table) -> list[list]:
    """The table's cells, each row cut or padded to the settings' columns (blank rows dropped)."""
    rows = [padded(cells, len(COLUMNS)) for cells in table_cells(table)]
    return [r for r in rows if not all(map(validation.is_blank, r))]


def column_settings(cells, seed=None) -> SamplingSettings:
    """One column's cells (an old row's missing penalties take their defaults) -> its settings, a blank cell the
    default; a ValueError names the field as the English header does."""
    cells = padded(list(cells), len(COLUMNS))
    return parse_settings(*cells[:4], seed, cells[4], labels=NAMES, blank_is_default=True, **tail_settings(cells))


@dataclass(frozen=True)
class Comparison:
    """What Run compares: one prompt, one seed, 2-4 settings (one request per column)."""

    prompt: str
    seed: int
    max_new_tokens: int
    requests: tuple[Request, ...]

    def to_dict(self) -> dict:
        return {"prompt": self.prompt, "seed": self.seed, "max_new_tokens": self.max_new_tokens,
                "requests": [q.to_dict() for q in self.requests]}


def parse_comparison(prompt, table, seed, max_new_tokens, lang="en") -> Comparison:
    """Raises ValueError naming the field (or the column and field). A blank seed draws one, shared."""
    prompt = validation.text("prompt", prompt)
    max_new = validation.number("max new tokens", max_new_tokens, integer=True, low=1, high=limits.MAX_NEW_TOKENS)
    shared = validation.seed("seed", seed)
    shared = fresh_seed() if shared is None else shared
    rows = table_rows(table)
    if not MIN_COLUMNS <= len(rows) <= MAX_COLUMNS:
        raise ValueError(tr(lang, "compare.error.columns", low=MIN_COLUMNS, high=MAX_COLUMNS, count=len(rows)))
    requests = []
    for letter, cells in zip(LETTERS, rows):
        try:
            settings = column_settings(cells, shared)
        except ValueError as e:
            message = in_language(e, lang, fields=dict(zip(COLUMNS, headers(lang))))
            raise ValueError(tr(lang, "compare.error.column", column=letter, message=message)) from None
        requests.append(Request(prompt, settings, max_new))
    return Comparison(prompt, shared, max_new, tuple(requests))


def first_divergence(columns) -> int | None:
    """The first 0-based step where the columns' chosen tokens differ (a column that has already stopped
    differs from one that goes on); None when every column drew the same tokens."""
    columns = [list(c) for c in columns]
    for i in range(max(map(len, columns), default=0)):
        if len({c[i] if i < len(c) else None for c in columns}) > 1:
            return i
    return None


@dataclass
class CompareRun:
    """A comparison on the page: its records per column as they stream (kept in gr.State; a switch of the
    page's language redraws every view from it)."""

    comparison: Comparison | None = None
    columns: list[list] = field(default_factory=list)  # StepRecords per column
    done: bool = False
    steps: int = 0  # forward steps seen
    batch_sizes: list[int] = field(default_factory=list)  # rows in each step's batch
    # Stop, as the lab's Run keeps it (playground/lab/handlers.py:stop_run): whether the comparison streams,
    # its tag on the page, the steps of it the page says it has (None: no page counts them), the presses of
    # Stop so far, what the page showed at the last one ((tag, steps), None from a caller without a page),
    # and whether Stop ended it
    streaming: bool = False
    tag: str = ""
    page_steps: int | None = None
    stop_presses: int = 0
    stop_seen: tuple[str, int] | None = None
    stopped: bool = False
    # the step the page shows (0-based; set when the comparison ends and by the scrubber): a language change redraws
    # it from here, as the scrubber's value its event carries was read when the event was queued
    shown: int | None = None
    replayed: bool = False  # a scene's comparison kept at start (common/kept_batches.py), shown at once

    def progress(self) -> tuple:
        """What a redraw of this comparison depends on besides the language: it changed if any of these did."""
        return self.streaming, self.length, self.done, self.stopped, self.shown

    def tokens(self) -> list[list[int]]:
        return [[r.token_id for r in c] for c in self.columns]

    @property
    def divergence(self) -> int | None:
        return first_divergence(self.tokens())

    @property
    def length(self) -> int:
        return max((len(c) for c in self.columns), default=0)

    def upto(self, steps: int | None) -> CompareRun:
        """The comparison as far as `steps` (None, or past its end: all of it): what the page has of it."""
        if steps is None or steps >= self.length:
            return self
        return replace(self, columns=[c[:steps] for c in self.columns], batch_sizes=self.batch_sizes[:steps])

    def freeze(self) -> None:
        """Stopped: every column cut to the steps the page showed (all of them without a page counting)."""
        seen = self.stop_seen
        keep = self.length if seen is None else min(seen[1], self.length) if seen[0] == self.tag else 0
        self.columns = [c[:keep] for c in self.columns]
        self.batch_sizes, self.steps = self.batch_sizes[:keep], min(self.steps, keep)
        self.done = self.stopped = True
