"""The decode loop's parts: a KV-cached forward pass per token, one sampling step for a batch of
rows, and each row's running state (its generator, its text, its stop conditions) that turns a
sampled token into a StepRecord. `ModelService.generate` and the batched engine share all of them.

Prefill runs the whole prompt once with logits_to_keep=1 (the LM head only for the last position,
the one that decides the next token); every later step feeds one token and reuses the cache.
"""

from __future__ import annotations

import math
import time

import torch
from transformers import DynamicCache

from .records import Stage, StepRecord, r6
from .sampling import Stages, draw, fresh_seed, make_generator, run_stages, stage_names
from .settings import SamplingSettings
from .text_stream import TextStream


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Decoder:
    """Forward passes for one sequence (B = 1) with a KV cache. Returns float32 logits (1, V)."""

    def __init__(self, model):
        self.model = model
        self.device = model.device
        self.cache = DynamicCache(config=model.config)
        self.forward_ms = 0.0  # time of the last forward pass

    @torch.inference_mode()
    def prefill(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self._forward(input_ids.to(self.device), logits_to_keep=1)  # (1, T) -> (1, V)

    @torch.inference_mode()
    def step(self, token_id: int) -> torch.Tensor:
        ids = torch.tensor([[token_id]], device=self.device)  # (1, 1)
        return self._forward(ids)

    def _forward(self, ids: torch.Tensor, **kwargs) -> torch.Tensor:
        started = time.perf_counter()
        out = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True, **kwargs)
        logits = out.logits[:, -1, :].float()  # upcast once: every stage works in float32
        _sync(self.device)
        self.forward_ms = (time.perf_counter() - started) * 1000
        return logits


def summarise(stages: Stages, tokens: torch.Tensor, top_n: int, orders: list[str]):
    """Per row: (top-N token ids, tuple[Stage]) — only N + a few scalars per stage leave the device.

    tokens: (B,) each row's chosen token; orders: each row's order, which sets the sequence of its
    stages (a mixed batch computes them under shared names)."""
    # Stages a transform left unchanged share tensors: summarise each distinct one once, each on its
    # own (B, V) tensor (stacking them into one (B, S, V) block outgrows the cache at large B).
    unique: dict[int, int] = {}  # id(probs tensor) -> index among the distinct ones
    names = []  # first stage name of each distinct distribution
    for n in stages.names:
        if id(stages.probs[n]) not in unique:
            unique[id(stages.probs[n])] = len(names)
            names.append(n)
    column = [unique[id(stages.probs[n])] for n in stages.names]  # stage -> distinct index
    ids = stages.window[:, :top_n]  # (B, N)
    chosen_col = tokens.view(-1, 1)
    per = [
        (
            stages.kept[n].sum(dim=-1),  # kept count (B,)
            -torch.special.xlogy(stages.probs[n], stages.probs[n]).sum(dim=-1) / math.log(2),  # entropy, bits
            stages.probs[n].gather(1, chosen_col).squeeze(1),  # the chosen token's probability (B,)
            stages.probs[n].gather(1, ids),  # the top-N's probabilities (B, N)
        )
        for n in names
    ]
    kept_count = torch.stack([p[0] for p in per], dim=1)  # (B, U)
    entropy = torch.stack([p[1] for p in per], dim=1)
    chosen = torch.stack([p[2] for p in per], dim=1)
    top = torch.stack([p[3] for p in per], dim=1)  # (B, U, N)
    # kept mass: each stage's survivors measured under the stage before it (raw's is itself); a pair
    # of stages that share their distribution is computed once
    masses: dict[tuple[int, int], torch.Tensor] = {}
    for i in range(len(column)):
        pair = (column[max(i - 1, 0)], column[i])
        if pair not in masses:
            masses[pair] = (stages.probs[names[pair[0]]] * stages.kept[names[pair[1]]]).sum(dim=-1)
    kept_mass = torch.stack([masses[(column[max(i - 1, 0)], column[i])] for i in range(len(column))], dim=1)  # (B, S)

    rows = []
    for b, (row_ids, row_top, counts, masses, ents, ch) in enumerate(
        zip(ids.tolist(), top.tolist(), kept_count.tolist(), kept_mass.tolist(), entropy.tolist(), chosen.tolist())
    ):
        by_name = {
            name: Stage(
                name=name,
                probs=tuple(r6(p) for p in row_top[column[s]]),
                kept_count=int(counts[column[s]]),
                kept_mass=r6(min(masses[s], 1.0)),
                entropy_bits=r6(max(ents[column[s]], 0.0)),
                chosen_prob=r6(ch[column[s]]),
            )
            for s, name in enumerate(stages.names)
        }
        rows.append((row_ids, tuple(by_name[n] for n in stage_names(orders[b]))))
    return rows


class RowState:
    """One request's running state across steps."""

    def __init__(self, service, settings: SamplingSettings, max_new_tokens: int, stop=(), prefix=(), ignore_eos=False):
        self.service = service
        self.settings = settings
        self.max_new_tokens = max_new_tokens
        self.ignore_eos = ignore_eos
        self.seed = settings.seed if settings.seed is not None else fresh_seed()
        self.generator = make_generator(self.seed, service.model.device)
        if prefix:
            # one draw per step already taken: the generator resumes where a full run would be
            torch.rand(len(prefix), generator=self.generator, device=self.generator.device)
        self.text = TextStream(service.decode, stop)
        for t in prefix:
            self.text.push(t)

    def record(self, step, token_id, draw_info, summary, forward_ms, sampling_ms) -> StepRecord:
        """Check the stop conditions for the token just drawn; the record a viewer may see."""
        is_eos = token_id in self.service.eos_token_ids and not self.ignore_eos
        if not is_eos:
            self.text.push(token_id)
        stop_reason = (
            "eos" if is_eos
            else "stop_string" if self.text.stopped
            else "max_tokens" if step == self.max_new_tokens - 1
            else None
        )
        if stop_reason is not None:
            self.text.flush()
        token = self.service.pieces(token_id)
        candidate_ids, stages = summary if summary is not None else ((), ())
        return StepRecord(
            step=step,
            token_id=token_id,
            piece=token.piece,
            special=token.special,
            text=self.text.visible,
            candidates=tuple(self.service.pieces(i) for i in candidate_ids),
            stages=stages,
            chosen_rank=draw_info.rank,
            draw=draw_info,
            seed=self.seed,
            forward_ms=round(forward_ms, 3),
            sampling_ms=round(sampling_ms, 3),
            stop_reason=stop_reason,
            order=self.settings.order,
        )


@torch.inference_mode()  # no autograd bookkeeping on the ~60 small ops of a step
def sample_rows(logits: torch.Tensor, rows: list[RowState], top_n: int, capture: bool = True):
    """One sampling step for (B, V) logits, row i with rows[i]'s settings and generator.
    Returns (token ids, draws, summaries or Nones, sampling ms)."""
    started = time.perf_counter()
    settings = [r.settings for r in rows]
    stages = run_stages(logits, settings, capture=capture, min_window=top_n)
    token_ids, draws = draw(stages, [s.greedy for s in settings], [r.generator for r in rows])
    summaries = summarise(stages, token_ids, top_n, [s.order for s in settings]) if capture else [None] * len(rows)
    tokens = token_ids.tolist()
    return tokens, draws, summaries, (time.perf_counter() - started) * 1000
