"""The decode step at static shapes: what a CUDA graph replays (and torch.compile traces once per bucket).

runner.Decoder's batch changes shape every step (its cache grows a column, rows join and leave), so an eager
forward pass launches its ~2,000 kernels one by one from Python. Here the running batch lives in fixed buffers:

- a static KV cache of `slots` rows x `length` columns (`slots` from limits.GRAPH_BATCH_BUCKETS, `length` a power
  of two from limits.GRAPH_MIN_LENGTH); rows are left-padded as in runner.Decoder, so every row writes the same
  column each step and the cache's write position is one number (its layers' `cumulative_length`);
- persistent inputs that a step fills in place: token ids (slots, 1), positions (slots, 1), the cache position (1,)
  and the attention mask (slots, length), 1 on each row's real tokens; a slot beyond the batch's rows reads a pad
  token and attends to its own column only (its logits are never read);
- one traced decode function per (slots, length) bucket, with no data-dependent Python (tests/model/
  test_static_decode.py compiles it with torch.compile(backend="aot_eager", fullgraph=True) on a CPU: no graph
  break, no recompile within a bucket over 50 steps). On CUDA the backend is "cudagraphs": the bucket's forward is
  captured once and replayed, one launch per step. On by default on CUDA (measured: bench/bench_gpu.py (e)),
  NTP_CUDA_GRAPHS=false turns it off; never on ZeroGPU (no torch.compile there); a failure falls back to the
  eager decoder (engine/scheduler.py:Scheduler._eager_from_now).

Prefill stays eager: a newcomer reads its prompt in its own runner.Decoder and its cache is copied into a free slot
when it joins. A batch that outgrows its bucket moves to the next (a copy, and that bucket's graph); a row that
leaves is compacted away; leading columns that are pads in every row are cut (a shift), as runner.Decoder does.
"""

from __future__ import annotations

import collections
import threading
import time

import torch
from transformers.cache_utils import Cache, StaticLayer

from .. import env, limits
from .invariant import is_batch_invariant
from .runner import Decoder, sync


def uses_graphs(model) -> bool:
    """CUDA graphs for the room's decode step: NTP_CUDA_GRAPHS, else the device's default (limits.py); never with
    the batch-invariant attention (a loop over rows that reads the mask: no static graph), never on ZeroGPU (its
    leases do not support torch.compile)."""
    if model is None or env.zero_gpu():
        return False
    wanted = env.cuda_graphs()
    wanted = limits.CUDA_GRAPHS_DEFAULT.get(model.device.type, False) if wanted is None else wanted
    return wanted and model.device.type == "cuda" and not is_batch_invariant(model)


def cudagraph_state_in_this_thread() -> None:
    """CUDA graph trees keep their managers in thread-local state. torch 2.11 sets it up only in the thread that
    imported them and asserts elsewhere: the room's thread, or a new room's after a model switch, would fall back to
    eager (seen on an H200: tests/model/test_static_decode.py). Newer torch sets it up when missing; so does this."""
    from torch._inductor import cudagraph_trees as trees

    if not hasattr(trees.local, "tree_manager_containers"):
        trees.local.tree_manager_containers = {}
        trees.local.tree_manager_locks = collections.defaultdict(threading.Lock)


def bucket(n: int, buckets) -> int:
    """The smallest bucket that holds n (n itself beyond the largest: a host's --max-rows above it)."""
    return next((b for b in buckets if b >= n), n)


def lengths(least: int) -> int:
    """The cache length bucket for a batch `least` columns wide: a power of two, at least GRAPH_MIN_LENGTH."""
    length = limits.GRAPH_MIN_LENGTH
    while length < least:
        length *= 2
    return length


class StaticDecoder:
    """runner.Decoder's interface for the running batch (step, keep, join, rows, forward_ms) on static buffers.
    backend: torch.compile's ("cudagraphs" on CUDA, "aot_eager" in the CPU test), or None to run the same static
    step eagerly."""

    def __init__(self, model, pad_id: int = 0, backend: str | None = None):
        self.model, self.device, self.pad_id = model, model.device, pad_id
        self.backend = backend
        self.n = 0  # rows in the batch (the first n slots)
        self.width = 0  # columns in use, the same for every row (left-padded)
        self.next_position = torch.zeros(0, dtype=torch.long, device=self.device)  # (n,) each row's length
        self.forward_ms = 0.0
        self.slots = self.length = 0
        self.cache: Cache | None = None
        self._steps: dict[tuple[int, int], object] = {}  # (slots, length) -> its traced step
        self._buffers: dict[tuple[int, int], tuple] = {}  # (slots, length) -> (cache, ids, positions, where, mask)

    @property
    def rows(self) -> int:
        return self.n

    # ---- the step ----------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def step(self, tokens: list[int]) -> torch.Tensor:
        """Feed one token per row: the decode step, at the bucket's static shapes. Returns (n, V) float32 logits."""
        if len(tokens) != self.n:
            raise ValueError(f"got {len(tokens)} tokens for {self.n} rows")
        if self.width + 1 > self.length:
            self._move(self.slots, lengths(self.width + 1))
        started = time.perf_counter()
        cache, ids, positions, where, mask = self._buffers[(self.slots, self.length)]
        n, w = self.n, self.width
        ids[:n, 0].copy_(torch.tensor(tokens), non_blocking=True)
        positions[:n, 0].copy_(self.next_position)
        mask[:, w] = 1  # every slot reads its new column: a row's token, a spare slot's pad
        where.fill_(w)
        for layer in cache.layers:
            layer.cumulative_length.fill_(w)
        # a graph's output lives in memory its next replay writes: the rows leave in a copy of their own
        logits = self._traced()(ids, positions, where, mask)[:n].float().clone()
        self.width, self.next_position = w + 1, self.next_position + 1
        sync(self.device)
        self.forward_ms = (time.perf_counter() - started) * 1000
        return logits

    def _traced(self):
        key = (self.slots, self.length)
        if key not in self._steps:
            cache, model = self.cache, self.model

            def decode(ids, positions, where, mask):
                return model(input_ids=ids, position_ids=positions, cache_position=where, attention_mask=mask,
                             past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]

            if self.backend is None:
                self._steps[key] = decode
            else:
                if self.backend == "cudagraphs":
                    cudagraph_state_in_this_thread()
                torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
                self._steps[key] = torch.compile(decode, backend=self.backend, fullgraph=True, dynamic=False)
        return self._steps[key]

    # ---- the batch changes: rows join and leave ----------------------------------------------------------------

    @torch.inference_mode()
    def join(self, other: Decoder) -> None:
        """Append other's rows (a newcomer's eager cache, its prompt read) after this batch's rows."""
        theirs = [layer for layer in other.cache.layers if layer.is_initialized]
        rows, their_width = other.rows, other.mask.shape[1]
        width = max(self.width, their_width)
        self._move(bucket(self.n + rows, limits.GRAPH_BATCH_BUCKETS), lengths(width + 1), like=theirs[0].keys)
        if width > self.width:  # the batch's rows move right: theirs are wider
            self._shift(width - self.width)
        cache, _, _, _, mask = self._buffers[(self.slots, self.length)]
        new = slice(self.n, self.n + rows)
        for mine, layer in zip(cache.layers, theirs, strict=True):
            mine.keys[new, :, width - their_width: width] = layer.keys
            mine.values[new, :, width - their_width: width] = layer.values
        mask[new] = 0
        mask[new, width - their_width: width] = other.mask
        self.next_position = torch.cat([self.next_position, other.next_position])
        self.n += rows
        self.width = width

    @torch.inference_mode()
    def keep(self, rows: list[int]) -> None:
        """Drop every row not listed (finished or cancelled requests): the kept rows move to the first slots."""
        if len(rows) == self.n:
            return
        if not rows:  # the next batch starts again in the smallest bucket that holds it (its buffers are kept)
            if self.cache is not None:
                self._buffers[(self.slots, self.length)][4].zero_()
            self.n, self.width, self.next_position = 0, 0, self.next_position[:0]
            self.slots = self.length = 0
            self.cache = None
            return
        cache, _, _, _, mask = self._buffers[(self.slots, self.length)]
        index = torch.tensor(rows, device=self.device)
        for layer in cache.layers:
            layer.keys[: len(rows)] = layer.keys[index]
            layer.values[: len(rows)] = layer.values[index]
        mask[: len(rows)] = mask[index]
        mask[len(rows):] = 0
        self.n, self.next_position = len(rows), self.next_position[index]
        self._trim()

    def _trim(self) -> None:
        """Cut the leading columns that are pads in every row (left by a long row that left)."""
        mask = self._buffers[(self.slots, self.length)][4]
        first = int(mask[: self.n, : self.width].any(dim=0).int().argmax())
        if first > 0:
            self._shift(-first)

    def _shift(self, by: int) -> None:
        """Move the batch's columns right (by > 0: pads come in on the left) or left (by < 0: leading pads go)."""
        cache, _, _, _, mask = self._buffers[(self.slots, self.length)]
        n, w = self.n, self.width
        src, dst = (slice(0, w), slice(by, w + by)) if by > 0 else (slice(-by, w), slice(0, w + by))
        for layer in cache.layers:
            layer.keys[:n, :, dst] = layer.keys[:n, :, src].clone()
            layer.values[:n, :, dst] = layer.values[:n, :, src].clone()
        mask[:n, dst] = mask[:n, src].clone()
        if by > 0:
            mask[:n, :by] = 0
        else:
            mask[:, w + by: w] = 0
        self.width = w + by

    def _move(self, slots: int, length: int, like: torch.Tensor | None = None) -> None:
        """Take the bucket (slots, length) at least as large as now, and copy the batch into it."""
        slots, length = max(slots, self.slots), max(length, self.length)
        if (slots, length) == (self.slots, self.length):
            return
        old = self._buffers.get((self.slots, self.length))
        if (slots, length) not in self._buffers:
            self._buffers[(slots, length)] = self._allocate(slots, length, like if like is not None else
                                                            old[0].layers[0].keys)
        cache, _, _, _, mask = self._buffers[(slots, length)]
        mask.zero_()
        if old is not None and self.n:
            n, w = self.n, self.width
            for mine, layer in zip(cache.layers, old[0].layers, strict=True):
                mine.keys[:n, :, :w], mine.values[:n, :, :w] = layer.keys[:n, :, :w], layer.values[:n, :, :w]
            mask[:n, :w] = old[4][:n, :w]
        self.slots, self.length, self.cache = slots, length, cache

    def _allocate(self, slots: int, length: int, like: torch.Tensor) -> tuple:
        """A bucket's static cache (full-attention layers, as runner.Decoder's: a sliding window is the mask's
        work) and its persistent inputs."""
        layers = self.model.config.get_text_config(decoder=True).num_hidden_layers
        cache = Cache(layers=[StaticLayer(max_cache_len=length) for _ in range(layers)])
        heads, dim = like.shape[1], like.shape[-1]
        shape = torch.empty((slots, heads, 1, dim), dtype=like.dtype, device=self.device)
        for layer in cache.layers:
            layer.lazy_initialization(shape, shape)
        ids = torch.full((slots, 1), self.pad_id, dtype=torch.long, device=self.device)
        positions = torch.zeros((slots, 1), dtype=torch.long, device=self.device)
        where = torch.zeros(1, dtype=torch.long, device=self.device)
        mask = torch.zeros((slots, length), dtype=torch.long, device=self.device)
        for buffer in (ids, positions, where, mask):  # a graph reads them where they are: no copy in per replay
            torch._dynamo.mark_static_address(buffer)
        return cache, ids, positions, where, mask

    @torch.inference_mode()
    def warm(self, rows: int) -> list[tuple[int, int]]:
        """Trace (and on CUDA capture) the step of every batch bucket up to `rows` at the first cache length, before
        anyone waits on it: a bucket first met mid-room would stall the room while it is captured. Returns the
        buckets warmed. The batch must be empty."""
        if self.n:
            raise RuntimeError("warm an empty batch")
        config = self.model.config.get_text_config(decoder=True)
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        like = torch.empty((1, heads, 1, dim), dtype=self.model.dtype, device=self.device)
        warmed = []
        for slots in limits.GRAPH_BATCH_BUCKETS:
            if slots > bucket(rows, limits.GRAPH_BATCH_BUCKETS):
                break
            key = (slots, limits.GRAPH_MIN_LENGTH)
            self._buffers.setdefault(key, self._allocate(*key, like))
            self.slots, self.length = key
            self.cache, _, _, _, mask = self._buffers[key]
            for _ in range(3):  # cudagraph trees warm up, then record; later calls replay
                mask[:, 0] = 1
                self._step_spare()
            mask.zero_()
            warmed.append(key)
        self.slots = self.length = 0
        self.cache = None
        return warmed

    def _step_spare(self) -> None:
        """One step of the bucket with no rows (warm): every slot reads a pad at column 0."""
        cache, ids, positions, where, mask = self._buffers[(self.slots, self.length)]
        where.zero_()
        for layer in cache.layers:
            layer.cumulative_length.zero_()
        self._traced()(ids, positions, where, mask)


__all__ = ["StaticDecoder", "bucket", "lengths", "uses_graphs"]
