"""The forward pass of the decode loop: one KV cache shared by B rows, B = 1 for a run alone.

Rows of different lengths are left-padded: the attention mask hides the pads and position ids count
only a row's real tokens, so each row computes what it would alone, up to float round-off. A row can
join a running batch (`join`: its cache is left-padded to the batch's width, or the batch to its)
and leave it (`keep`); leading columns that are pads in every row are trimmed, so the cache of a
long-lived batch grows only with its longest live row.

On a CPU model with a native step (models/native_step.py) the decode steps are one call into C for every row, each
row's cache in its own native run: no pads there, and the DynamicCache is written only when something reads it.

The cache has plain (full) layers even for models with sliding-window attention (Gemma 3): a
sliding layer drops old columns per batch, which would misalign rows joined at different times.
The model still applies its window through the attention mask: within a row the pads are all on the
left, so column distances equal token distances.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from ..models.native_step import skipped as native_skipped
from ..models.native_step import step_rows
from .invariant import active as invariant_now


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so a timing covers the computation (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _left_pad(x: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    missing = width - x.shape[dim]
    if missing == 0:
        return x
    pad = [0, 0] * (x.dim() - 1 - dim) + [missing, 0]  # F.pad lists dimensions from the last one
    return F.pad(x, pad)


class Decoder:
    """Forward passes for B left-padded rows with one KV cache. Every call returns float32 logits of
    each row's last position, (B, V): the LM head runs for that position only."""

    def __init__(self, model, pad_id: int = 0):
        self.model = model
        self.device = model.device
        self.pad_id = pad_id
        self._rows = None  # the rows as native runs (models/native_step.py), once they have stepped natively
        self.cache = DynamicCache()
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=self.device)  # (B, T): 1 = token, 0 = pad
        self.next_position = torch.zeros(0, dtype=torch.long, device=self.device)  # (B,): each row's length
        self.forward_ms = 0.0  # time of the last forward pass

    @property
    def rows(self) -> int:
        return self.mask.shape[0]

    @torch.inference_mode()
    def prefill(self, prompts: list[list[int]]) -> torch.Tensor:
        """Start the batch from these prompts (left-padded to the longest)."""
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)  # (B, T)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        self.mask = mask.to(self.device)
        self.next_position = self.mask.sum(dim=1)
        positions = (self.mask.cumsum(dim=1) - 1).clamp(min=0)  # pads get 0; real tokens 0..len-1
        return self._forward(ids.to(self.device), positions)

    @torch.inference_mode()
    def extend(self, tokens: list[int]) -> torch.Tensor:
        """Append several tokens to a single row (the next chunk of a long prompt)."""
        if self.rows == 0:
            return self.prefill([tokens])
        if self.rows != 1:
            raise ValueError("extend feeds one row; a batch steps one token per row")
        n = len(tokens)
        ids = torch.tensor([tokens], device=self.device)  # (1, n)
        self._written()
        self.mask = torch.cat([self.mask, torch.ones((1, n), dtype=torch.long, device=self.device)], dim=1)
        positions = self.next_position.unsqueeze(1) + torch.arange(n, device=self.device)
        self.next_position = self.next_position + n
        return self._forward(ids, positions)

    @torch.inference_mode()
    def step(self, tokens: list[int]) -> torch.Tensor:
        """Feed one token per row (B, 1): the decode step. On a model with a native step, the rows take it."""
        if self.rows and self._native_ready():
            started = time.perf_counter()
            logits = step_rows(self._rows.runs, [int(t) for t in tokens])
            self._mask = torch.cat([self._mask, torch.ones_like(self._mask[:, :1])], dim=1)
            self.next_position = self.next_position + 1
            self.forward_ms = (time.perf_counter() - started) * 1000
            return logits
        ids = torch.tensor(tokens, device=self.device).unsqueeze(1)
        self._written()
        # a column of ones changes no row's padding: set _mask directly, keeping _padded
        self._mask = torch.cat([self._mask, torch.ones_like(self._mask[:, :1])], dim=1)
        positions = self.next_position.unsqueeze(1)
        self.next_position = self.next_position + 1
        return self._forward(ids, positions)

    def _native_ready(self) -> bool:
        """Whether this step can be the model's native one (models/native_step.py): the model has one, nothing
        hooks it, the batch-invariant mode is off, and the rows' caches are (or are copied into) native runs."""
        native = getattr(self.model, "ntp_native", None)
        if native is None or native_skipped() or native.hooked() or invariant_now(self.model):
            return False
        if self._rows is None:
            self._rows = native.rows()
        return self._rows.ready(self._cache, self.rows, self.next_position.tolist)

    def _native(self) -> bool:
        """Whether the native runs hold the rows now (the DynamicCache is stale until something reads it)."""
        return self._rows is not None and self._rows.shown is None and bool(self._rows.runs)

    def _written(self) -> None:
        """The DynamicCache written from the native runs at the mask's width now (before a transformers' pass widens
        the mask)."""
        if self._rows is not None:
            self._rows.show(self._cache, self._mask.shape[1])

    @property
    def cache(self) -> DynamicCache:
        """The KV cache, written from the native runs first when they hold the rows."""
        self._written()
        return self._cache

    @cache.setter
    def cache(self, value: DynamicCache) -> None:
        self._cache, self._rows = value, None

    @torch.inference_mode()
    def keep(self, rows: list[int]) -> None:
        """Drop every row not listed (finished or cancelled requests), from the cache too."""
        if len(rows) == self.rows:
            return
        if not rows:
            self.cache = DynamicCache()
            self.mask, self.next_position = self.mask[:0, :0], self.next_position[:0]
            return
        index = torch.tensor(rows, device=self.device)
        if self._native():  # the runs of the rows kept; the cache is written when read
            self._rows.runs = [self._rows.runs[i] for i in rows]
        else:
            for layer in self._layers():
                layer.keys, layer.values = layer.keys[index], layer.values[index]
        self.mask, self.next_position = self.mask[index], self.next_position[index]
        self._trim()

    @torch.inference_mode()
    def join(self, other: Decoder) -> None:
        """Append other's rows to this batch (after this batch's rows). The shorter side is left-padded."""
        if self.rows == 0:
            self._cache, self._rows = other._cache, other._rows
            self.mask, self.next_position = other.mask, other.next_position
            return
        width = max(self.mask.shape[1], other.mask.shape[1])
        if self._native() and other._native_ready():  # run joins runs: no cache is written
            self._rows.runs = self._rows.runs + other._rows.runs
            self.mask = torch.cat([_left_pad(self.mask, width, 1), _left_pad(other.mask, width, 1)])
            self.next_position = torch.cat([self.next_position, other.next_position])
            return
        for mine, theirs in zip(self._layers(), other._layers(), strict=True):
            mine.keys = torch.cat([_left_pad(mine.keys, width, 2), _left_pad(theirs.keys, width, 2)])
            mine.values = torch.cat([_left_pad(mine.values, width, 2), _left_pad(theirs.values, width, 2)])
        self.mask = torch.cat([_left_pad(self.mask, width, 1), _left_pad(other.mask, width, 1)])
        self.next_position = torch.cat([self.next_position, other.next_position])

    @torch.inference_mode()
    def split(self) -> list[Decoder]:
        """One B = 1 decoder per row, its pads dropped (rows read together that go on apart)."""
        parts = []
        for i, n in enumerate(self.next_position.tolist()):
            part = Decoder(self.model, self.pad_id)
            for index, layer in enumerate(self._layers()):
                part.cache.update(layer.keys[i: i + 1, :, -n:], layer.values[i: i + 1, :, -n:], index)
            part.mask, part.next_position = self.mask[i: i + 1, -n:], self.next_position[i: i + 1]
            parts.append(part)
        return parts

    def _layers(self):
        return [layer for layer in self.cache.layers if layer.is_initialized]

    def _trim(self) -> None:
        """Cut the leading columns that are pads in every row (left by a long row that left)."""
        first = int(self.mask.any(dim=0).int().argmax())
        if first > 0:
            if not self._native():
                for layer in self._layers():
                    layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]
            self.mask = self.mask[:, first:]

    @property
    def mask(self) -> torch.Tensor:
        return self._mask

    @mask.setter
    def mask(self, value: torch.Tensor) -> None:
        self._mask = value
        self._padded = None  # rows joined, left or were trimmed: recheck before the next forward

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        started = time.perf_counter()
        # No pads anywhere (a request alone, or rows of equal length): no mask, so attention takes the
        # plain causal path, as generate() does for one sequence. Checked once per change of the rows,
        # not per step (on a GPU the check is a device sync).
        if self._padded is None:
            self._padded = not bool(self._mask.all())
        mask = self._mask if self._padded else None
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=self.cache,
            use_cache=True, logits_to_keep=1,
        )
        logits = out.logits[:, -1, :].float()  # upcast once: every stage works in float32
        sync(self.device)
        self.forward_ms = (time.perf_counter() - started) * 1000
        return logits
