"""Load the model in a background thread so the page is up at once and can show load progress.

`LoadingService` stands in for a `ModelService` from the first second: it reports progress while
the weights load, then forwards every call to the loaded service. A failed load is kept and
reported, not raised into the web server.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .validation import Unavailable


class ServiceNotReady(Unavailable):
    """The model is still loading (or failed to); the message says which."""


@dataclass(frozen=True)
class LoadStatus:
    fraction: float
    message: str
    ready: bool
    error: str | None = None

    def to_dict(self) -> dict:
        return {"fraction": self.fraction, "message": self.message, "ready": self.ready, "error": self.error}


class LoadingService:
    def __init__(self, model: str | None = None, device: str | None = None, *, service=None, threads: int | None = None,
                 max_rows: int | None = None, queue_size: int | None = None):
        import torch

        from .loading import serving_threads

        torch.set_num_threads(threads or serving_threads())  # leave a core to the web server
        self._service = service
        self._status = LoadStatus(1.0, service.description, True) if service else LoadStatus(0.0, "starting", False)
        self._done = threading.Event()
        if service is not None:
            self._done.set()
        else:
            room = {"max_rows": max_rows, "queue_size": queue_size}  # the scheduler's limits (None: env, then limits)
            threading.Thread(target=self._load, args=(model, device, room), daemon=True, name="model-loader").start()

    def _load(self, model, device, room):
        from .loading import ModelLoadError
        from .service import ModelService

        try:
            self._service = ModelService.load(model, device, progress=self._progress, **room)
            self._status = LoadStatus(1.0, self._service.description, True)
        except (ModelLoadError, OSError, ValueError, RuntimeError) as e:
            self._status = LoadStatus(self._status.fraction, "model failed to load", False, str(e))
        finally:
            self._done.set()

    def _progress(self, fraction: float, message: str) -> None:
        self._status = LoadStatus(fraction, message, False)

    @property
    def status(self) -> LoadStatus:
        return self._status

    def wait(self, timeout: float | None = None) -> LoadStatus:
        self._done.wait(timeout)
        return self._status

    @property
    def service(self):
        """The loaded service, or ServiceNotReady with a message fit for the page."""
        if self._service is None:
            s = self._status
            if s.error:
                raise ServiceNotReady("load_failed", error=s.error)
            raise ServiceNotReady("loading", percent=f"{s.fraction:.0%}", message=s.message)
        return self._service

    def __getattr__(self, name):
        # generate, encode, info, ... of the loaded service (only reached for names not defined here)
        return getattr(self.service, name)


def wait_until_ready(loader: LoadingService, poll: float = 0.25, timeout: float = 600.0):
    """Yield LoadStatus while loading, at most every `poll` seconds; ends when loaded or failed."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        status = loader.wait(poll)
        if status != last:
            yield status
            last = status
        if status.ready or status.error or time.monotonic() > deadline:
            return
