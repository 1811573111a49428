"""The logits a lab run keeps, so that a knob moved after the run redraws a step with no forward pass.

A page names its run with a key (generate(..., keep=key)); the service keeps, for each step of that run, the raw
logits row the step was drawn from (float32, on the CPU) and the u its row's generator gave that step. A what-if
(engine/what_if.py) reads them back for the step on screen: the step's own logits, the tokens before it, its u.

    page key ──► KeptRun: the prompt's ids, the tokens known so far, per step (logits, u) or nothing
                 one run per key: a new run under the key takes its place (a continued run keeps the steps before
                 where it continues)

Bounded twice (model_service/limits.py): a run past KEPT_LOGITS_PAGE_BYTES lets its oldest steps go; the room
past KEPT_LOGITS_TOTAL_BYTES lets go the run of the key that was used longest ago. A what-if on a step let go (or
on a run never kept: a branch, a loaded run file) recomputes the step with one forward pass and keeps it; why it
had to is said by `Missing`, which the page tells the learner.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import limits

EVICTED_REMEMBERED = 4096  # keys whose run the room let go, remembered to say so


class Missing(enum.Enum):
    """Why a step's logits were not kept (the what-if then recomputes them)."""

    NOT_KEPT = "not_kept"  # this run was never kept under the key: a branch, a run file, another run
    PAGE = "page"  # the run was longer than a page keeps: its oldest steps were let go
    ROOM = "room"  # the room let go the run of the page that was used longest ago


@dataclass
class KeptRun:
    ids: tuple[int, ...]  # the prompt's token ids
    tokens: list[int]  # the tokens generated so far, as far as known
    steps: dict[int, tuple] = field(default_factory=dict)  # step -> (logits (V,) float32 on the CPU, u)
    bytes: int = 0
    trimmed: int = 0  # steps let go for the page's cap (the oldest)

    def matches(self, ids: Sequence[int], prefix: Sequence[int]) -> bool:
        return self.ids == tuple(ids) and len(self.tokens) >= len(prefix) and self.tokens[: len(prefix)] == list(prefix)


class KeptRuns:
    """Every page's kept run, in the service's process. Thread-safe: runs are kept by the threads that read their
    streams, and read by the what-ifs of other requests."""

    def __init__(self, page_bytes: int = limits.KEPT_LOGITS_PAGE_BYTES,
                 total_bytes: int = limits.KEPT_LOGITS_TOTAL_BYTES):
        self.page_bytes, self.total_bytes = page_bytes, total_bytes
        self._runs: OrderedDict[str, KeptRun] = OrderedDict()  # least recently used first
        self._evicted: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0

    def start(self, key: str, ids: Sequence[int], prefix: Sequence[int]) -> None:
        """A run under `key` begins after `prefix` (tokens already generated): the key's run goes on from there if
        it is the same run, else it is replaced."""
        with self._lock:
            run = self._runs.get(key)
            if run is not None and run.matches(ids, prefix):
                del run.tokens[len(prefix):]
                for step in [s for s in run.steps if s >= len(prefix)]:
                    self._forget(run, step)
            else:
                self._drop(key)
                self._runs[key] = KeptRun(tuple(ids), list(prefix))
            self._runs.move_to_end(key)
            self._evicted.pop(key, None)

    def add(self, key: str, step: int, token: int | None, logits, u: float) -> None:
        """Step `step`'s logits ((1, V) or (V,)) and u; token: the token it drew (None: a step recomputed for a
        what-if, whose token the page knows). Past the caps the oldest steps, then the oldest pages, are let go."""
        row = logits.detach().reshape(-1).to("cpu", dtype=logits.dtype, copy=True)
        with self._lock:
            run = self._runs.get(key)
            if run is None or step > len(run.tokens):
                return  # the run was let go, or replaced, while this one streamed
            if token is not None and step == len(run.tokens):
                run.tokens.append(token)
            self._forget(run, step)
            run.steps[step] = (row, float(u))
            size = row.numel() * row.element_size()
            run.bytes += size
            self.bytes += size
            while run.bytes > self.page_bytes and len(run.steps) > 1:
                self._forget(run, min(s for s in run.steps if s != step))
                run.trimmed += 1
            while self.bytes > self.total_bytes and len(self._runs) > 1:
                oldest = next(k for k in self._runs if k != key)
                self._drop(oldest)
                self._evicted[oldest] = None
                while len(self._evicted) > EVICTED_REMEMBERED:
                    self._evicted.popitem(last=False)

    def find(self, key: str, ids: Sequence[int], prefix: Sequence[int]) -> tuple | Missing:
        """The kept (logits (V,), u) of the step after `prefix` of the run under `key`, or why there is none."""
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                return Missing.ROOM if key in self._evicted else Missing.NOT_KEPT
            self._runs.move_to_end(key)
            if not run.matches(ids, prefix):
                return Missing.NOT_KEPT
            kept = run.steps.get(len(prefix))
            if kept is not None:
                return kept
            return Missing.PAGE if run.trimmed and len(prefix) < len(run.tokens) else Missing.NOT_KEPT

    def step(self, key: str, step: int) -> tuple | None:
        """The kept (logits, u) of a step of the run under `key`, if kept (the lease that ran it hands it back)."""
        with self._lock:
            run = self._runs.get(key)
            return None if run is None else run.steps.get(step)

    def keep_recomputed(self, key: str, ids: Sequence[int], prefix: Sequence[int], logits, u: float) -> None:
        """A step a what-if recomputed: kept under the key, joining its run if it is this one (else replacing it)."""
        with self._lock:
            run = self._runs.get(key)
            if run is None or not run.matches(ids, prefix):
                self._drop(key)
                self._runs[key] = KeptRun(tuple(ids), list(prefix))
        self.add(key, len(prefix), None, logits, u)

    def _forget(self, run: KeptRun, step: int) -> None:
        kept = run.steps.pop(step, None)
        if kept is not None:
            size = kept[0].numel() * kept[0].element_size()
            run.bytes -= size
            self.bytes -= size

    def _drop(self, key: str) -> None:
        run = self._runs.pop(key, None)
        if run is not None:
            self.bytes -= run.bytes

    def __len__(self) -> int:
        return len(self._runs)


__all__ = ["KeptRun", "KeptRuns", "Missing"]
