"""A CPU model's weights moved into transparent huge pages: a decode step streams every weight once, and in 4 KB pages
that stream walks a page table entry every 4 KB (131,000 of them for SmolLM2's 538 MB in float32); in 2 MB pages,
every 2 MB.

Measured on this project's 2-core EPYC (Linux, transparent huge pages on "madvise"), the native float32 step of the
embedded model: 15.3-15.4 ms in 4 KB pages, 14.0-14.1 ms in 2 MB pages (BENCHMARKS.md, "Huge pages").

torch allocates a tensor's memory with malloc, which the kernel backs with 4 KB pages unless asked. So `move` asks:
one private anonymous mapping, advised MADV_HUGEPAGE, the large parameters and buffers copied into it one by one (the
old memory freed as each moves: the peak is the model plus its largest tensor), each Parameter keeping its identity
(a tied head stays tied; whatever holds a layer holds the same weight). Where the system has no huge pages (not Linux,
or set to "never") the mapping is plain memory and nothing changes but where the bytes live.

Getting the huge pages costs time: the kernel finds (compacting memory where it must) and zeroes each 2 MB page at
the first touch, 0.5-1.4 s for 538 MB on this machine against 0.1 s in 4 KB pages, and done beside a start it
slowed the start by 0.2 s (one copy of the model) to 0.7 s (the room's process loading its copy beside the app's).
So a start moves nothing: `Later` waits for the loop that decodes with the weights (engine/scheduler.py) to have
served its first step and gone idle, then gets the pages by a thread of its own, and the loop, idle again, copies
the weights in (~0.05 s) under its lock and points the native step at them (`done`).
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import threading
import time

import torch
from torch import nn

log = logging.getLogger(__name__)

HUGE_PAGE = 2 << 20  # bytes: x86-64's and arm64's transparent huge page
SMALLEST = 1 << 16  # bytes: a tensor below this (norm weights, biases) stays where it is
ALIGN = 64  # bytes: each tensor starts on a cache line
POLL_S = 0.05  # s: an idle loop looks this often whether the pages are in


def _large(model: nn.Module) -> list[tuple[nn.Module, str, torch.Tensor]]:
    """(owner, name, tensor) of each large parameter and buffer on the CPU, each tensor once (a tied one once)."""
    seen, found = set(), []
    for module in model.modules():
        for name, tensor in [*module._parameters.items(), *module._buffers.items()]:
            if (tensor is None or id(tensor) in seen or tensor.device.type != "cpu"
                    or tensor.numel() * tensor.element_size() < SMALLEST or not tensor.is_contiguous()):
                continue
            seen.add(id(tensor))
            found.append((module, name, tensor))
    return found


def _advised(nbytes: int) -> mmap.mmap | None:
    """A private anonymous mapping of `nbytes` advised for huge pages; None where the kernel has no such advice."""
    area = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        area.madvise(mmap.MADV_HUGEPAGE)
    except OSError as e:  # a kernel built without transparent huge pages
        log.info("no huge pages for the weights: %s", e)
        area.close()
        return None
    return area


def _touch(area: mmap.mmap) -> None:
    """Every page of `area` written once (memset through ctypes: the GIL released, and no torch op, which a daemon
    thread must not be inside when the interpreter exits)."""
    first = ctypes.c_char.from_buffer(area)
    try:
        ctypes.memset(ctypes.addressof(first), 0, len(area))
    finally:
        del first  # (the mapping can be closed again)


class Reserved:
    """A mapping for `nbytes` of weights (and a huge page to align them), touched page by page by a thread of its
    own. `take()` waits for it and hands the mapping over."""

    def __init__(self, nbytes: int):
        self.area = _advised(nbytes + HUGE_PAGE)
        self._thread = None
        if self.area is not None:
            self._thread = threading.Thread(target=_touch, args=(self.area,), name="huge-pages", daemon=True)
            self._thread.start()

    def pages_in(self) -> bool:
        """Whether the thread has touched every page."""
        return self._thread is None or not self._thread.is_alive()

    def take(self) -> mmap.mmap | None:
        """The mapping, its pages in (then it is no longer this reservation's)."""
        if self._thread is not None:
            self._thread.join()
        area, self.area = self.area, None
        return area


def _bytes(tensors) -> list[int]:
    return [-(-t.numel() * t.element_size() // ALIGN) * ALIGN for _, _, t in tensors]


class Later:
    """A model's weights, to move into huge pages at idle moments of the loop that decodes with them (`work`, when
    `due`): once it has served a step, the pages are got by a thread of their own; at the next idle moment after
    they are in, the weights move, under the model's lock, and the native step is built again on them. A copied
    model (the precision check's) has none."""

    def __init__(self, model: nn.Module):
        self.model, self.reserved, self.done = model, None, False

    def due(self, served: bool) -> bool:
        """Whether `work` has something to do now (`served`: the loop has served a step since its start)."""
        return served and not self.done and (self.reserved is None or self.reserved.pages_in())

    def poll_s(self) -> float | None:
        """How long an idle loop may wait before asking `due` again (None: until it is woken)."""
        return POLL_S if self.reserved is not None and not self.done else None

    def work(self, lock) -> None:
        """Start getting the pages; or, once they are in, move the weights into them under `lock` (no forward pass
        runs, and the caller's room has no rows: no native run points at the weights)."""
        from .native_step import rebuilt  # (the native step is built on the weights where they are)

        try:
            if self.reserved is None:
                nbytes = sum(_bytes(_large(self.model)))
                self.reserved = Reserved(nbytes) if nbytes and hasattr(mmap, "MADV_HUGEPAGE") else None
                self.done = self.reserved is None or self.reserved.area is None
                return
            with lock:
                rebuilt(self.model, lambda: move(self.model, self.reserved))
            self.reserved, self.done = None, True
        except (OSError, RuntimeError, ValueError) as e:  # the weights stay where they are: every tensor is whole
            log.warning("could not move the weights into huge pages: %s", e)
            self.reserved, self.done = None, True

    def __deepcopy__(self, memo) -> None:
        return None

    def __reduce__(self):
        return _none, ()


def settled(model: nn.Module, timeout: float = 30.0) -> bool:
    """Wait (at most `timeout` s) until a model's weights have moved, where a room's loop in this process moves them
    (its first step served; a benchmark times the steady room after this). True when done or nothing to move."""
    later = getattr(model, "ntp_huge_pages", None)
    end = time.monotonic() + timeout
    while later is not None and not later.done and time.monotonic() < end:
        time.sleep(POLL_S)
    return later is None or later.done


def _none() -> None:
    return None


def move(model: nn.Module, reserved: Reserved | None = None) -> int:
    """Move the model's large CPU tensors into one mapping advised for huge pages, in place: `reserved`'s (Later's,
    sized for them), else a new one. Returns the bytes moved (0 where this system has no such advice)."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return 0
    tensors = _large(model)
    sizes = _bytes(tensors)
    if not tensors:
        return 0
    area = reserved.take() if reserved is not None else None  # (sized by Later from these same tensors)
    area = area if area is not None else _advised(sum(sizes) + HUGE_PAGE)
    if area is None:
        return 0
    whole = torch.frombuffer(area, dtype=torch.uint8)  # holds `area` open as long as any view of it lives
    offset = -whole.data_ptr() % HUGE_PAGE  # the first tensor on a huge page's boundary
    with torch.no_grad():
        for (owner, name, tensor), size in zip(tensors, sizes, strict=True):
            nbytes = tensor.numel() * tensor.element_size()
            moved = whole[offset: offset + nbytes].view(tensor.dtype).view(tensor.shape)
            moved.copy_(tensor)
            if isinstance(tensor, nn.Parameter):
                tensor.data = moved  # the same Parameter, its storage in the mapping
            else:
                owner._buffers[name] = moved
            offset += size
    log.info("moved %d tensors (%.0f MB) of weights into huge pages", len(tensors), sum(sizes) / 1e6)
    return sum(sizes)


__all__ = ["Later", "Reserved", "move", "settled"]
