"""The batched engine (lesson 13, "Inside an engine"): many requests, one forward pass per step.

Each step produces one row of logits per live request; the sampler applies every row's own settings
in one vectorised pass; each row checks its own stop conditions; finished rows leave the batch (and
the KV cache), so they stop costing compute.

Prompts of different lengths are left-padded: the attention mask hides the pads and position ids
count only real tokens, so a row computes what it would alone, up to float round-off.
"""

from __future__ import annotations

import time

import torch
from transformers import DynamicCache

from .records import BatchStep
from .sampling import BatchParams
from .step_loop import RowState, _sync, sample_rows


class BatchDecoder:
    """Forward passes for B left-padded sequences with one KV cache. Returns float32 logits (B, V)."""

    def __init__(self, model, pad_id: int):
        self.model = model
        self.device = model.device
        self.pad_id = pad_id
        self.cache = DynamicCache(config=model.config)
        self.forward_ms = 0.0

    @torch.inference_mode()
    def prefill(self, prompts: list[list[int]]) -> torch.Tensor:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)  # (B, T)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        self.mask = mask.to(self.device)
        self.next_position = self.mask.sum(dim=1)  # (B,): each row's own length
        positions = (self.mask.cumsum(dim=1) - 1).clamp(min=0)  # pads get 0; real tokens 0..len-1
        return self._forward(ids.to(self.device), positions, logits_to_keep=1)

    @torch.inference_mode()
    def keep(self, rows: list[int]) -> None:
        """Drop every batch row not listed (finished requests), from the cache too."""
        index = torch.tensor(rows, device=self.device)
        self.cache.batch_select_indices(index)
        self.mask, self.next_position = self.mask[index], self.next_position[index]

    @torch.inference_mode()
    def step(self, tokens: list[int]) -> torch.Tensor:
        ids = torch.tensor(tokens, device=self.device).unsqueeze(1)  # (B, 1)
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        positions = self.next_position.unsqueeze(1)
        self.next_position = self.next_position + 1
        return self._forward(ids, positions)

    def _forward(self, ids, positions, **kwargs) -> torch.Tensor:
        started = time.perf_counter()
        out = self.model(
            input_ids=ids, attention_mask=self.mask, position_ids=positions, past_key_values=self.cache,
            use_cache=True, **kwargs,
        )
        logits = out.logits[:, -1, :].float()
        _sync(self.device)
        self.forward_ms = (time.perf_counter() - started) * 1000
        return logits


def run_batch(service, prompts: list[list[int]], rows: list[RowState], top_n: int):
    """Yield a BatchStep per step until every request has stopped."""
    pad = next(iter(service.eos_token_ids), 0) if service.tokenizer.pad_token_id is None else service.tokenizer.pad_token_id
    decoder = BatchDecoder(service.model, pad)
    logits = decoder.prefill(prompts)  # (B, V)
    active = list(range(len(rows)))  # request index of each batch row
    step = 0
    while active:
        batch_rows = [rows[i] for i in active]
        params = BatchParams.from_settings([r.settings for r in batch_rows], "cpu").to_dict()
        tokens, draws, summaries, sampling_ms = sample_rows(logits, batch_rows, top_n)
        out: list = [None] * len(rows)
        for j, i in enumerate(active):
            out[i] = rows[i].record(step, tokens[j], draws[j], summaries[j], decoder.forward_ms, sampling_ms)
        yield BatchStep(
            step=step, rows=tuple(out), active=tuple(active), logits_shape=tuple(logits.shape), params=params,
            forward_ms=round(decoder.forward_ms, 3), sampling_ms=round(sampling_ms, 3),
        )
        still = [j for j, i in enumerate(active) if out[i].stop_reason is None]
        if not still:
            return
        if len(still) < len(active):
            decoder.keep(still)
        active = [active[j] for j in still]
        logits = decoder.step([tokens[j] for j in still])
        step += 1
