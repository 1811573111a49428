"""Load the model in a background thread so the page is up at once and can show load progress, and
switch it for another one on the host's allowlist the same way.

`LoadingService` stands in for a `ModelService` from the first second: it reports progress while
the weights load, then forwards every call to the loaded service. A failed load is kept and
reported, not raised into the web server.

A switch (the host's act: see playground/hosting.py:switch_policy) first closes the old service —
its requests in flight end with "the host switched the model", new ones are told to wait — and frees
its memory, then loads the new model in the background with progress. Freeing before loading keeps the
peak at one model (an 8B model and a second one may not both fit a card). If the new model fails to
load, the previous one is loaded again so the room keeps working, and the failure is reported.
`epoch` counts the models served so far: a page that saw another epoch re-reads its numbers.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import threading

from .. import heap
from ..client import ModelClient
from ..records.step import LoadStatus
from ..records.validation import Unavailable

log = logging.getLogger(__name__)


class ServiceNotReady(Unavailable):
    """The model is still loading (or failed to); the message says which."""


class LoadingService(ModelClient):
    # what a page reads before the first load (and what a test's bare instance has)
    _service = None
    _switching: str | None = None
    current = ""
    models: tuple[str, ...] = ()
    epoch = 0

    def __init__(self, model: str | None = None, device: str | None = None, *, service=None, threads: int | None = None,
                 max_rows: int | None = None, queue_size: int | None = None, models: tuple[str, ...] | None = None,
                 scheduler: str = "thread", batch_invariant: bool | None = None, precision: str | None = None):
        """model: the key (catalog.py) or name to start with; models: the allowlist a switch may pick from
        (default: only the start model); scheduler: where the room's loop runs (ModelService.load)."""
        from .catalog import canonical
        from .loading import DEFAULT_MODEL, serve_beside_web_server

        serve_beside_web_server(threads)  # leave a core to the web server
        self.current = canonical(model) if model else DEFAULT_MODEL
        self.models = tuple(dict.fromkeys([self.current, *(models or ())]))
        self._device = device
        # the scheduler's limits (None: env, then limits) and its place
        self._room_limits = {"max_rows": max_rows, "queue_size": queue_size, "scheduler": scheduler,
                             "batch_invariant": batch_invariant, "precision": precision}
        self._service = service
        self._status = LoadStatus(1.0, service.description, True) if service else LoadStatus(0.0, "starting", False)
        self._switching: str | None = None  # the key being switched to
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.epoch = 1 if service is not None else 0
        if service is not None:
            self._done.set()
        else:
            self._start(self._load, self.current)

    def _start(self, target, *args) -> None:
        threading.Thread(target=target, args=args, daemon=True, name="model-loader").start()

    def _load(self, key: str) -> bool:
        from ..service import ModelService
        from .catalog import load_target
        from .loading import ModelLoadError

        try:
            log.info("loading %s", key)
            self._service = ModelService.load(load_target(key), self._device, progress=self._progress, **self._room_limits)
            self.current = key
            self.epoch += 1
            self._status = LoadStatus(1.0, self._service.description, True)
            heap.settle()  # what the model and the page keep, frozen out of the collector's full passes
            log.info("serving %s", self._service.description)
            return True
        except (ModelLoadError, OSError, ValueError, RuntimeError) as e:
            self._status = LoadStatus(self._status.fraction, "model failed to load", False, str(e))
            log.warning("%s failed to load: %s", key, e)
            return False
        finally:
            self._done.set()

    def _progress(self, fraction: float, message: str) -> None:
        if self._switching:
            message = f"switching to {self._switching}: {message}"
        self._status = LoadStatus(fraction, message, False)

    # ---- the host's model switch -------------------------------------------------------------------------

    @property
    def switching(self) -> str | None:
        return self._switching

    def switch(self, key: str) -> LoadStatus:
        """Start switching to `key` (one of `models`; checked by the caller's policy first). Returns at
        once; `status` and `wait()` follow the load. A switch under way, or a first load, refuses another."""
        from .catalog import choose

        key = choose("model", key, self.models)
        with self._lock:
            if self._switching or not self._done.is_set():
                raise Unavailable("switch_busy")
            if key == self.current and self._service is not None:
                return self._status
            self._switching = key
            self._done.clear()
            self._status = LoadStatus(0.0, f"switching to {key}", False)
        self._start(self._switch, key)
        return self._status

    def _switch(self, key: str) -> None:
        previous, old = self.current, self._service
        try:
            self._service = None
            if old is not None:
                old.close(Unavailable("switched", model=key))
                device = old.info.device
                del old
                release_memory(device)
            if not self._load(key):
                error = self._status.error
                self._done.clear()
                self._switching = previous
                if self._load(previous):  # the room keeps its model; the page says why the switch failed
                    self._status = LoadStatus(1.0, self._service.description, True,
                                              f"could not switch to {key}: {error}")
        finally:
            self._switching = None
            self._done.set()

    # ---- what the page reads ---------------------------------------------------------------------------------

    @property
    def status(self) -> LoadStatus:
        return self._status

    def wait(self, timeout: float | None = None) -> LoadStatus:
        self._done.wait(timeout)
        return self._status

    @property
    def service(self):
        """The loaded service, or ServiceNotReady with a message fit for the page."""
        service = self._service
        if service is None:
            s = self._status
            if self._switching:
                raise ServiceNotReady("switching", percent=f"{s.fraction:.0%}", message=s.message)
            if s.error:
                raise ServiceNotReady("load_failed", error=s.error)
            raise ServiceNotReady("loading", percent=f"{s.fraction:.0%}", message=s.message)
        return service

    @property
    def description(self) -> str:
        return self.service.description

    # the client interface: the loaded service's, or ServiceNotReady while it loads
    def _generate(self, call):
        return self.service._generate(call)

    def _generate_batch(self, call):
        return self.service._generate_batch(call)

    def _what_if(self, call):
        return self.service._what_if(call)

    def _sample_many(self, call):
        return self.service._sample_many(call)

    def _batch_effect(self, *args):
        return self.service._batch_effect(*args)

    def _trace(self, *args):
        return self.service._trace(*args)

    def _trace_attention(self, *args):
        return self.service._trace_attention(*args)

    def _attribute(self, *args):
        return self.service._attribute(*args)

    def _knock_out(self, *args):
        return self.service._knock_out(*args)

    def _precision_effect(self, *args):
        return self.service._precision_effect(*args)

    def _patch(self, *args):
        return self.service._patch(*args)

    def _steer(self, *args):
        return self.service._steer(*args)

    def _lm_head(self, *args):
        return self.service._lm_head(*args)

    def _prompt_logprobs(self, *args):
        return self.service._prompt_logprobs(*args)

    def _room(self):
        return self.service._room()

    def _encode(self, *args):
        return self.service._encode(*args)

    def _pieces_of(self, ids):
        return self.service._pieces_of(ids)

    def __getattr__(self, name):
        # generate, encode, info, ... of the loaded service (only reached for names not defined here)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.service, name)


def release_memory(device: str = "cpu") -> None:
    """Give a dropped model's memory back: collect the cycles that still hold its tensors, empty PyTorch's
    CUDA cache, and ask glibc to return freed heap pages to the system (it keeps them otherwise)."""
    heap.thaw()  # the old model's objects were frozen when it loaded: the collection must see them
    gc.collect()
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): the allocator decides
        pass


