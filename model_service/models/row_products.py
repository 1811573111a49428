"""One-row products on a CPU: the kernel that reads a layer's weight fastest when one row is multiplied by it.

A lone learner's decode step multiplies one row by every weight of the model, and on a CPU those products are most
of the step (bench/bench_peer.py --floor). torch's own kernels for one row are not the fastest on every CPU.
Measured on this project's 2-core AMD EPYC, one thread, the 211 one-row products of SmolLM2-135M (BENCHMARKS.md,
"One-row products"):

- float32: torch's F.linear and torch.mv (MKL) 33 ms, 538 MB at 16 GB/s; numpy's BLAS (the OpenBLAS its wheels ship)
  17.6 ms, 31 GB/s. With 4 or 16 rows the two are even.
- bfloat16: F.linear read the LM head at half torch.mv's rate (12.3 against 6.3-8.9 ms); numpy has no bfloat16.

RowLinear keeps its layer's parameters (a head tied to the embedding stays tied) and sends a one-row product on the
CPU to its kernel; more rows (a prefill, a room's batch), autograd and a compiler's tracing take F.linear. A float32
layer takes numpy's BLAS only where it measured faster at load (`fastest`), so a CPU where torch's is as good keeps
torch's. Either kernel sums in its own order: the numbers differ from F.linear's by float32 round-off (as another CPU's
or another thread count's do), no more.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .. import limits
from .machine import cpu_identity

log = logging.getLogger(__name__)

KERNELS = ("mv", "blas")  # torch.mv; numpy's BLAS (float32 only)


class RowLinear(nn.Linear):
    """A layer whose one-row product on the CPU goes through `kernel` (KERNELS); everything else through F.linear."""

    kernel = "mv"

    @classmethod
    def of(cls, linear: nn.Linear, kernel: str = "mv") -> RowLinear:
        """The same parameters behind the one-row path."""
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        row = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        row.weight, row.bias, row.kernel = linear.weight, linear.bias, kernel
        return row

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x.numel() != self.in_features or x.device.type != "cpu" or torch.compiler.is_compiling()
                or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))):
            return super().forward(x)
        if self.kernel == "blas" and x.dtype == self.weight.dtype == torch.float32:
            y = blas_row(self.weight, x)
        else:
            y = torch.mv(self.weight, x.reshape(-1).to(self.weight.dtype))
        y = y if self.bias is None else y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


def blas_row(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """weight (out, in) times the one row x (in values, any shape), float32 on the CPU, through numpy's BLAS: (out,)."""
    return torch.from_numpy(weight.detach().numpy() @ x.detach().reshape(-1).numpy())


def rows_through(model: nn.Module, kernel: str, layers: list[tuple[nn.Module, str, nn.Linear]] | None = None) -> int:
    """Swap the model's plain nn.Linear layers (or those `layers` names: (parent, name, layer)) for RowLinear with
    `kernel`, in place. Returns how many."""
    layers = plain_linears(model) if layers is None else layers
    for parent, name, child in layers:
        setattr(parent, name, RowLinear.of(child, kernel))
    return len(layers)


def plain_linears(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """(parent, name, layer) for each plain nn.Linear of the model (a quantised or RowLinear layer is not)."""
    return [(parent, name, child) for parent in list(model.modules()) for name, child in list(parent.named_children())
            if type(child) is nn.Linear]


@torch.inference_mode()
def time_one_row(weights: list[torch.Tensor], kernel: str, rounds: int = 3, warm: bool = True) -> float:
    """The median seconds of one one-row product by each weight in turn, through `kernel` ("torch": F.linear), over
    `rounds` (after one more that warms the caches and the kernel's own set-up, if `warm`)."""
    rows = {w.shape[1]: torch.randn(1, 1, w.shape[1], dtype=w.dtype) for w in weights}
    times = []
    for _ in range(rounds + warm):
        started = time.perf_counter()
        for w in weights:
            x = rows[w.shape[1]]
            blas_row(w, x) if kernel == "blas" else F.linear(x, w)
        times.append(time.perf_counter() - started)
    return statistics.median(times[int(warm):])


def fastest(model: nn.Module, kept: Path | None = None) -> int:
    """On a CPU, float32: send the model's one-row products through numpy's BLAS where it reads the weights at least
    limits.ROW_BLAS_GAIN times as fast as torch's F.linear on this model's own layers (medians of
    limits.ROW_TIMING_ROUNDS interleaved rounds, so a moment's contention at start weighs on both; ~0.3 s), logging
    what it measured, and on the model (`ntp_row_products`, the model card's) what it chose. `kept`: a directory
    where the gain measured is kept for a later start on this machine, the same layers, libraries and threads (read
    back, not measured again). Returns how many layers it swapped (0: torch's kept)."""
    layers = plain_linears(model)
    weights = [layer.weight for _, _, layer in layers]
    if not weights or any(w.device.type != "cpu" or w.dtype != torch.float32 for w in weights):
        return 0
    path = None if kept is None else kept / f"{_key(weights)}.json"
    gain = _read_gain(path)
    if gain is None:
        times = {"torch": [], "blas": []}
        for n in range(limits.ROW_TIMING_ROUNDS):
            for kernel, seen in times.items():
                seen.append(time_one_row(weights, kernel, rounds=1, warm=n == 0))
        ours, blas = statistics.median(times["torch"]), statistics.median(times["blas"])
        gain = ours / blas
        log.info("one-row products of %d float32 layers: torch %.1f ms, numpy's BLAS %.1f ms (%.2fx)", len(weights),
                 ours * 1e3, blas * 1e3, gain)
        _keep_gain(path, gain)
    else:
        log.info("one-row products of %d float32 layers: numpy's BLAS %.2fx torch's (measured at an earlier start, "
                 "%s)", len(weights), gain, path)
    chosen = gain >= limits.ROW_BLAS_GAIN
    log.info("one-row products -> %s", "numpy's BLAS" if chosen else "torch's")
    if not chosen:
        return 0
    model.ntp_row_products = f"numpy's BLAS ({gain:.1f}x torch's)"
    return rows_through(model, "blas", layers)


def _key(weights: list[torch.Tensor]) -> str:
    """What the gain depends on: the CPU, torch's and numpy's versions, the threads, the layers' shapes."""
    try:
        blas = importlib.metadata.version("numpy")  # (numpy's BLAS: the version of the wheel that ships it)
    except importlib.metadata.PackageNotFoundError:
        blas = "none"
    shapes = ",".join(f"{w.shape[0]}x{w.shape[1]}" for w in weights)
    what = f"{cpu_identity()}|{torch.__version__}|{blas}|{torch.get_num_threads()}|{shapes}"
    return "row-gain-" + hashlib.sha256(what.encode()).hexdigest()[:16]


def _read_gain(path: Path | None) -> float | None:
    try:
        gain = float(json.loads(path.read_text(encoding="utf-8"))["gain"]) if path is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none kept yet, or unreadable: measured again
    return gain if gain is not None and math.isfinite(gain) and gain > 0 else None


def _keep_gain(path: Path | None, gain: float) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(suffix=".json", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump({"gain": gain}, f)
        os.replace(temporary, path)  # atomic: a start beside this one reads either
    except OSError as e:
        log.info("could not keep the one-row gain in %s: %s", path, e)


def blas_threads(threads: int) -> None:
    """numpy's BLAS threads, as many as torch's (its own default is every core: beside a web server, one too many)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


__all__ = ["KERNELS", "RowLinear", "blas_row", "blas_threads", "fastest", "plain_linears", "rows_through", "time_one_row"]
