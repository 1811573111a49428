"""Logit bias and the penalties: the stages that read a row's context and may change any logit.

Every engine applies them first, before temperature and the cuts (docs/sampling.md, "Bias and penalties"), so the
cuts rank the adjusted logits. Which tokens a penalty counts is each engine's own rule, chosen by the row's order:

    order       repetition penalty hits          frequency / presence count
    hf          prompt + generated (all)         - (transformers has none: settings refuse them)
    vllm        prompt + generated (all)         generated tokens only
    llama.cpp   the last penalty_last_n tokens of prompt + generated (-1: all, 0: none), for all three

and how it changes a counted token's logit z (count c, c > 0 for a counted token):

    repetition  z / r if z > 0 else z * r        (vLLM multiplies by 1 / r; llama.cpp divides when z > 0)
    frequency   z - c * f
    presence    z - p                            (llama.cpp subtracts c * f + p in one step; vLLM one by one)

A row's context (RowContext) is its prompt's and its generated token ids as the row has them at this step, and the
chance its XTC drew for this step (sampling/draw.py:side_chance; 0 when none was drawn: XTC then always fires).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..records.settings import SamplingSettings


class RowContext(NamedTuple):
    """What one row's sampler reads besides its logits and settings."""

    prompt: Sequence[int] = ()
    generated: Sequence[int] = ()
    xtc_chance: float = 0.0


Context = RowContext | tuple  # a RowContext, or (prompt ids, generated ids[, xtc chance])


def bias(settings: Sequence[SamplingSettings], vocab: int, device) -> torch.Tensor | None:
    """(B, V) each row's logit bias, or None where no row has one. Ids beyond the vocabulary are the service's to
    refuse (service.check_generate); here they are dropped, so a bias never indexes out of bounds."""
    if not any(s.logit_bias for s in settings):
        return None
    out = torch.zeros((len(settings), vocab), dtype=torch.float32)
    for r, s in enumerate(settings):
        kept = [(t, b) for t, b in s.logit_bias if t < vocab]
        if kept:
            ids, values = zip(*kept, strict=True)
            out[r, list(ids)] = torch.tensor(values, dtype=torch.float32)
    return out.to(device)


def _counts(rows: list[Sequence[int]], vocab: int, device) -> torch.Tensor:
    """(B, V) float32 how often each token appears in each row's list (one scatter over the padded lists)."""
    width = max((len(r) for r in rows), default=0)
    if width == 0:
        return torch.zeros((len(rows), vocab), dtype=torch.float32, device=device)
    ids = torch.full((len(rows), width), vocab, dtype=torch.int64)  # the pad lands in a column cut off below
    for r, tokens in enumerate(rows):
        if tokens:
            ids[r, : len(tokens)] = torch.as_tensor(list(tokens), dtype=torch.int64)
    ids = ids.to(device)
    counts = torch.zeros((len(rows), vocab + 1), dtype=torch.float32, device=device)
    return counts.scatter_add_(1, ids, torch.ones_like(ids, dtype=torch.float32))[:, :vocab]


def counted(settings: Sequence[SamplingSettings], contexts: Sequence[Context] | None, order: str, vocab: int,
            device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(hit, counts), each (B, V): the tokens the repetition penalty hits (bool) and the counts the frequency and
    presence penalties read (float32), by the order's rule (module docstring). None where no row is penalised."""
    if not any(s.penalised for s in settings):
        return None
    contexts = [RowContext(*c) for c in contexts] if contexts is not None else [RowContext()] * len(settings)
    hits, counts = [], []
    for s, (prompt, generated, _) in zip(settings, contexts, strict=True):
        whole = [*prompt, *generated]
        if not s.penalised:
            hits.append(()), counts.append(())
        elif order == "llama.cpp":
            n = s.penalty_last_n
            window = whole if n < 0 else whole[len(whole) - n:] if n > 0 else []
            hits.append(window), counts.append(window)
        else:  # hf, vllm: the repetition penalty hits the whole context; vLLM counts generated tokens only
            hits.append(whole), counts.append(generated if order == "vllm" else ())
    return _counts(hits, vocab, device) > 0, _counts(counts, vocab, device)


def penalise(z: torch.Tensor, settings: Sequence[SamplingSettings], hit: torch.Tensor, counts: torch.Tensor,
             order: str) -> torch.Tensor:
    """The penalties of every row of one order group on its logits z (B, V), each engine's arithmetic."""
    device = z.device

    def per_row(name):
        return torch.tensor([getattr(s, name) for s in settings], dtype=torch.float32, device=device).unsqueeze(1)

    r, f, p = per_row("repetition_penalty"), per_row("frequency_penalty"), per_row("presence_penalty")
    if order == "vllm":
        scaled = z * torch.where(z > 0, 1.0 / r, r)  # vllm/model_executor/layers/utils.py apply_penalties
    else:
        scaled = torch.where(z > 0, z / r, z * r)  # transformers' RepetitionPenaltyLogitsProcessor, llama.cpp
    z = torch.where(hit, scaled, z)
    if not bool(((f != 0) | (p != 0)).any()):
        return z
    present = (counts > 0).float()
    if order == "vllm":
        return z - f * counts - p * present
    return z - (counts * f + present * p)  # llama.cpp: one subtraction


__all__ = ["Context", "RowContext", "bias", "counted", "penalise"]
