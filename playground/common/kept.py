"""What the scenes keep, computed once when the model is ready: results keyed by the model that made them.

`Kept` is the store the lab's scene runs (lab/replays.py), the Engine and Compare scenes' batches (kept_batches.py)
and the interventions' scenes (forward/kept_interventions.py) share: at most `limit` entries, the oldest let go
first, each under (the model's name, its epoch, what was asked), so a host's switch of the model keeps none of the
old model's. Thread-safe: a warming thread keeps while pages read.
"""

from __future__ import annotations

import threading


class Kept:
    """(model, epoch, what) -> a result, at most `limit` of them, the oldest let go first."""

    def __init__(self, limit: int):
        self.limit, self._kept, self._lock = limit, {}, threading.Lock()
        self.warming: threading.Thread | None = None  # the warming thread, while or after it runs

    @property
    def count(self) -> int:
        """How many results are kept."""
        return len(self._kept)

    @staticmethod
    def key_of(service, what) -> tuple | None:
        """The key of `what` on the model serving now; None while it cannot say which (loading, a switch)."""
        try:
            return service.info.name, getattr(service, "epoch", None), what
        except RuntimeError:  # loading, or a host's switch under way
            return None

    def lookup(self, service, what):
        """The result kept for `what` on the model serving now, or None."""
        if not self._kept:  # (nothing kept: a service that was never warmed need not say what it is)
            return None
        key = self.key_of(service, what)
        with self._lock:
            return self._kept.get(key) if key is not None else None

    def start_warming(self, service, name: str, work, after: threading.Thread | None = None) -> threading.Thread:
        """`work()` in a daemon thread started now (`warming`), once `after` (another store's warming) has ended and
        the model is ready; nothing if it never gets ready."""

        def run():
            if after is not None:
                after.join()
            if getattr(service.wait(None), "ready", False):
                work()

        self.warming = threading.Thread(target=run, name=name, daemon=True)
        self.warming.start()
        return self.warming

    def store(self, service, what, result) -> None:
        key = self.key_of(service, what)
        if key is None:
            return
        with self._lock:
            self._kept.pop(key, None)
            self._kept[key] = result
            while len(self._kept) > self.limit:
                self._kept.pop(next(iter(self._kept)))


__all__ = ["Kept"]
