"""Asynchronous output processing, as vLLM's engine does it: a step's records are built and handed to their
callers in a thread of their own while the next step's forward pass runs.

The scheduler's loop draws step N's tokens and decides at once who stops (engine/step.py:RowState.advance): that
is all the next forward pass needs. Step N's summaries (the stages read off the tensors, one packed copy to the
host), its records and their delivery go to this worker; the loop starts step N+1's forward pass, and waits for
the worker before it samples again. So a step's sink calls (records, then the end of the step) come in order,
never beside the next step's, and the host work of a step costs no wall time when it fits inside a forward
pass. One worker, one job at a time: there is never more than one step in flight.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue

log = logging.getLogger(__name__)


class OutputWorker:
    def __init__(self, name: str = "model-output"):
        self._jobs: SimpleQueue[Callable[[], None] | None] = SimpleQueue()
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[], None]) -> None:
        """Run `work` in the worker thread, after the work before it (wait() first: one step in flight)."""
        self._idle.clear()
        self._jobs.put(work)

    def wait(self) -> None:
        """Block until the work submitted so far has run."""
        self._idle.wait()

    def close(self, timeout: float = 10.0) -> None:
        """Run what was submitted, then end the thread (a daemon thread killed inside a torch op at interpreter exit
        aborts the process)."""
        self.wait()
        self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while (work := self._jobs.get()) is not None:
            try:
                work()  # the work reports its own errors to its callers (Scheduler._emit)
            except Exception:  # noqa: BLE001 - one caller's broken sink must not end the worker, and with it the room
                log.exception("a step's output failed")
            finally:
                self._idle.set()


__all__ = ["OutputWorker"]
