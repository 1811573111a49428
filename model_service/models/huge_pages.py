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

Getting the huge pages costs the start: the kernel finds (compacting memory where it must) and zeroes each 2 MB page
at the first touch, 0.7-1.4 s for 538 MB on this machine against 0.2 s in 4 KB pages. So `reserve` asks for the
mapping before the weights are read, sized from the checkpoint's headers, and a thread of its own touches it while
they are read (on another core); `move` then copies into pages already there.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from pathlib import Path

import torch
from torch import nn

log = logging.getLogger(__name__)

HUGE_PAGE = 2 << 20  # bytes: x86-64's and arm64's transparent huge page
SMALLEST = 1 << 16  # bytes: a tensor below this (norm weights, biases) stays where it is
ALIGN = 64  # bytes: each tensor starts on a cache line


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


class Reserved:
    """A mapping for `nbytes` of weights, touched page by page by a thread of its own (the GIL released: torch's
    fill_) while the weights are read. `take(nbytes)` waits for it and hands it over if it is large enough."""

    def __init__(self, nbytes: int):
        self.area = _advised(nbytes + HUGE_PAGE)
        self._thread = None
        if self.area is not None:
            whole = torch.frombuffer(self.area, dtype=torch.uint8)
            self._thread = threading.Thread(target=whole.fill_, args=(0,), name="huge-pages", daemon=True)
            self._thread.start()

    def take(self, nbytes: int) -> mmap.mmap | None:
        """The mapping, its pages in, if it holds `nbytes` and a huge page to align them (then it is no longer this
        reservation's); else None (the caller maps its own)."""
        if self._thread is not None:
            self._thread.join()
        area, self.area = self.area, None
        if area is not None and len(area) < nbytes + HUGE_PAGE:
            area.close()
            return None
        return area

    def close(self) -> None:
        """Give the pages back unused (the weights could not be read)."""
        area = self.take(0)
        if area is not None:
            area.close()


def checkpoint_bytes(directory: str | Path, element_size: int) -> int:
    """The bytes `move` will want for the weights in `directory`'s safetensors files, read at `element_size` bytes
    each (0 where it has none): the sum of the large tensors' sizes, each rounded up to ALIGN."""
    from safetensors import safe_open

    total = 0
    for file in sorted(Path(directory).glob("*.safetensors")) if Path(directory).is_dir() else ():
        with safe_open(file, framework="pt") as f:
            for name in f.keys():
                n = element_size
                for d in f.get_slice(name).get_shape():
                    n *= d
                total += -(-n // ALIGN) * ALIGN if n >= SMALLEST else 0
    return total


def reserve(directory: str | Path, element_size: int) -> Reserved | None:
    """Start getting the huge pages for the weights in `directory` (checkpoint_bytes), beside the reading of them;
    None where this system has no huge pages, the checkpoint is not a local safetensors one, or the pages and the
    weights read from it would not both fit in the free memory (the peak is twice the weights until `move`)."""
    if not hasattr(mmap, "MADV_HUGEPAGE") or not hasattr(os, "sysconf"):
        return None
    nbytes = checkpoint_bytes(directory, element_size)
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return Reserved(nbytes) if 0 < nbytes and 2 * nbytes < free else None


def move(model: nn.Module, reserved: Reserved | None = None) -> int:
    """Move the model's large CPU tensors into one mapping advised for huge pages, in place: `reserved`'s if it holds
    them, else a new one. Returns the bytes moved (0 where this system has no such advice)."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return 0
    tensors = _large(model)
    sizes = [-(-t.numel() * t.element_size() // ALIGN) * ALIGN for _, _, t in tensors]
    if not tensors:
        return 0
    area = reserved.take(sum(sizes)) if reserved is not None else None
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
    if len(area) - offset >= HUGE_PAGE:  # a reservation larger than the weights: its tail's pages go back
        tail = (offset + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        area.madvise(mmap.MADV_DONTNEED, tail, len(area) - tail)
    log.info("moved %d tensors (%.0f MB) of weights into huge pages", len(tensors), sum(sizes) / 1e6)
    return sum(sizes)


__all__ = ["Reserved", "checkpoint_bytes", "move", "reserve"]
