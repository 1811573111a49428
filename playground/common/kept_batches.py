"""The Engine and Compare scenes' batches, computed once in the background when the model is ready and shown again at
once, as the lab's scene runs are (playground/lab/replays.py).

Opening "Inside an engine" ran six requests for up to 32 tokens each, and "The same seed, two temperatures" two runs
of 16: 5-7 s on a 2-core CPU while the room waited, the slowest scenes of the walk. Each of their requests is seeded
or greedy, so the model and the requests determine every step: `warm` runs each scene's batch once, and `KeptBatches`
keeps its steps with the seconds each came after the start, keyed by the model's name, its epoch (a host's switch
starts another), the requests and the candidates kept per step. The tab's Run shows a kept batch at once when its
requests are one of them, and says so (its tokens per second are the kept run's own); any other batch runs live. A
kept batch ran alone; in a busy room under the default arithmetic a live one can differ by round-off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from model_service.records.settings import Request
from model_service.records.step import BatchStep
from playground import limits

from .kept import Kept

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeptStep:
    """A step of a kept batch, and the seconds after the batch's start that it came."""

    step: BatchStep
    seconds: float


def keepable(requests: Iterable[Request]) -> bool:
    """Requests whose steps their settings determine: each seeded, or greedy (temperature 0: no draw decides)."""
    requests = list(requests)
    return bool(requests) and all(r.settings.seed is not None or r.settings.temperature == 0 for r in requests)


def timed(steps) -> Iterator[KeptStep | object]:
    """A live batch's steps with the seconds since its start (anything else, a Waiting, as it comes); closing this
    closes the batch (its rows leave the room's batch at the next step)."""
    started = time.monotonic()
    try:
        for step in steps:
            yield KeptStep(step, time.monotonic() - started) if isinstance(step, BatchStep) else step
    finally:
        getattr(steps, "close", lambda: None)()


class KeptBatches(Kept):
    """(model, epoch, requests, top_n) -> the batch's steps, at most limits.SCENE_BATCHES, the oldest let go first."""

    def __init__(self, limit: int = limits.SCENE_BATCHES):
        super().__init__(limit)

    def get(self, service, requests, top_n: int) -> tuple[KeptStep, ...] | None:
        """The kept steps of this batch on the model serving now, or None."""
        return self.lookup(service, (tuple(requests), top_n))

    def keep(self, service, requests, top_n: int, steps: Iterable[KeptStep]) -> None:
        """Keep a whole batch (one whose every request has ended)."""
        steps = tuple(s for s in steps if isinstance(s, KeptStep))
        if steps and all(r is None or r.stop_reason for r in steps[-1].step.rows):
            self.store(service, (tuple(requests), top_n), steps)

    def warm(self, service, batches: Iterable[tuple[tuple[Request, ...], int]],
             after: threading.Thread | None = None) -> threading.Thread:
        """Run each keepable batch once, one after another, in a daemon thread started now: after `after` (the lab's
        scene runs) and the model are ready. A batch that fails is skipped (the tab runs it live)."""

        def run_all():
            for requests, top_n in batches:
                if not keepable(requests) or self.get(service, requests, top_n) is not None:
                    continue
                try:
                    self.keep(service, requests, top_n, list(timed(service.generate_batch(requests, top_n=top_n))))
                except (ValueError, RuntimeError) as e:
                    log.info("scene batch not kept (%d requests): %s", len(requests), e)
            log.info("scene batches kept: %d", self.count)

        return self.start_warming(service, "scene-batches", run_all, after)


__all__ = ["KeptBatches", "KeptStep", "keepable", "timed"]
