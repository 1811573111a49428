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
"""

from __future__ import annotations

import logging
import mmap

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


def move(model: nn.Module) -> int:
    """Move the model's large CPU tensors into one mapping advised for huge pages, in place. Returns the bytes moved
    (0 where this system has no such advice)."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return 0
    tensors = _large(model)
    sizes = [-(-t.numel() * t.element_size() // ALIGN) * ALIGN for _, _, t in tensors]
    if not tensors:
        return 0
    area = mmap.mmap(-1, sum(sizes) + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        area.madvise(mmap.MADV_HUGEPAGE)
    except OSError as e:  # a kernel built without transparent huge pages
        log.info("no huge pages for the weights: %s", e)
        area.close()
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


__all__ = ["move"]
