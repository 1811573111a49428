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

DRY (llama.cpp's "don't repeat yourself", `dry`): a token that would extend a sequence already seen in the last
dry_penalty_last_n tokens (prompt + generated) loses multiplier x base^(length - allowed_length) from its logit, where
`length` is the longest such repeat (at least allowed_length), found with the Z-algorithm as llama.cpp finds it. A
repeat does not run back across a sequence breaker, and a breaker token is never penalised. A breaker here is a
token whose text holds one of the breaker strings (LoadedModel.breakers): llama.cpp's own rule for a breaker inside
one token, which covers its four defaults ("\n", ":", '"', "*"); a longer breaker split over several tokens is
not matched.

A row's context (RowContext) is its prompt's and its generated token ids as the row has them at this step, the
chance its XTC drew for this step (sampling/draw.py:side_chance; 0 when none was drawn: XTC then always fires), its
DRY breaker token ids, its mirostat mu (NaN: none given; the pipeline starts from 2 tau) and the end token ids
min_tokens holds back (sampling/bans.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..records.settings import SamplingSettings

FLOAT_MAX_LOG = 88.7228391  # llama.cpp caps DRY's exponent so that base^exponent stays a finite float


class RowContext(NamedTuple):
    """What one row's sampler reads besides its logits and settings."""

    prompt: Sequence[int] = ()
    generated: Sequence[int] = ()
    xtc_chance: float = 0.0
    breakers: frozenset = frozenset()  # DRY: the ids of the tokens that hold a sequence breaker
    mirostat_mu: float = math.nan  # mirostat's mu at this step (NaN: start from 2 tau)
    stop_ids: frozenset = frozenset()  # min_tokens: the end tokens it holds back (the model's EOS ids)


Context = RowContext | tuple  # a RowContext, (prompt ids, generated ids[, xtc chance]), or a flat list of token ids


def row_context(c) -> RowContext:
    """A row's context as given: a RowContext, a (prompt ids, generated ids, ...) tuple, or a flat sequence of token
    ids (the tokens so far, read as generated: every penalty counts them)."""
    if isinstance(c, RowContext):
        return c
    c = tuple(c)
    if c and all(isinstance(t, int) or getattr(t, "ndim", None) == 0 for t in c):
        return RowContext((), tuple(int(t) for t in c))
    return RowContext(*c)


def biased(z: torch.Tensor, settings: Sequence[SamplingSettings]) -> torch.Tensor | None:
    """z with each row's logit bias added (a new tensor), or None where no row has one. Ids beyond the vocabulary
    are the service's to refuse (service.check_generate); here they are dropped, so a bias never indexes out of
    bounds. Only the biased entries are touched."""
    entries = [(r, t, b) for r, s in enumerate(settings) for t, b in s.logit_bias if t < z.shape[-1]]
    if not entries:
        return None
    rows, ids, values = (torch.tensor(column, device=z.device) for column in zip(*entries, strict=True))
    return z.index_put((rows, ids), values.to(z.dtype), accumulate=True)


class Counted(NamedTuple):
    """Per row, the distinct tokens a penalty reads, padded to one width L: ids (B, L), whether the repetition
    penalty hits each (B, L), and the count the frequency and presence penalties read (B, L). A pad repeats its
    row's first entry (the same token, the same value written twice), or is token 0 unhit and uncounted."""

    ids: torch.Tensor
    hit: torch.Tensor
    counts: torch.Tensor


def counted(settings: Sequence[SamplingSettings], contexts: Sequence[Context] | None, order: str,
            device) -> Counted | None:
    """The tokens each row's penalties read, by the order's rule (module docstring); None where no row is
    penalised."""
    if not any(s.penalised for s in settings):
        return None
    contexts = [row_context(c) for c in contexts] if contexts is not None else [RowContext()] * len(settings)
    rows = []
    for s, (prompt, generated, *_) in zip(settings, contexts, strict=True):
        whole = [*prompt, *generated]
        if not s.penalised:
            hits, counts = (), ()
        elif order == "llama.cpp":
            n = s.penalty_last_n
            hits = counts = whole if n < 0 else whole[len(whole) - n:] if n > 0 else []
        else:  # hf, vllm: the repetition penalty hits the whole context; vLLM counts generated tokens only
            hits, counts = whole, (generated if order == "vllm" else ())
        tally, hit = Counter(counts), dict.fromkeys(hits)
        rows.append([(t, True, tally.get(t, 0)) for t in hit] + [(t, False, c) for t, c in tally.items() if t not in hit])
    width = max(1, max(len(r) for r in rows))
    padded = [r + [r[0] if r else (0, False, 0)] * (width - len(r)) for r in rows]
    ids, hit, counts = (torch.tensor([[e[k] for e in r] for r in padded], device=device) for k in range(3))
    return Counted(ids, hit, counts.float())


def penalise(z: torch.Tensor, settings: Sequence[SamplingSettings], counted: Counted, order: str) -> torch.Tensor:
    """The penalties of every row of one order group on its logits z (B, V), each engine's arithmetic, on the
    counted entries only (a new tensor)."""
    def per_row(name):
        return torch.tensor([getattr(s, name) for s in settings], dtype=torch.float32, device=z.device).unsqueeze(1)

    r, f, p = per_row("repetition_penalty"), per_row("frequency_penalty"), per_row("presence_penalty")
    x = z.gather(1, counted.ids)
    if order == "vllm":
        scaled = x * torch.where(x > 0, 1.0 / r, r)  # vllm/model_executor/layers/utils.py apply_penalties
    else:
        scaled = torch.where(x > 0, x / r, x * r)  # transformers' RepetitionPenaltyLogitsProcessor, llama.cpp
    x = torch.where(counted.hit, scaled, x)
    c, present = counted.counts, (counted.counts > 0).float()
    x = x - f * c - p * present if order == "vllm" else x - (c * f + present * p)  # llama.cpp: one subtraction
    return z.scatter(1, counted.ids, x)


def dry(z: torch.Tensor, settings: Sequence[SamplingSettings], contexts: Sequence[Context] | None) -> torch.Tensor | None:
    """z with each DRY row's penalties subtracted (a new tensor), or None where DRY penalises nothing."""
    if not any(s.dry for s in settings) or contexts is None:
        return None
    entries = []
    for r, (s, c) in enumerate(zip(settings, contexts, strict=True)):
        c = row_context(c)
        if s.dry:
            found = dry_penalties([*c.prompt, *c.generated], c.breakers, s.dry_multiplier, s.dry_base,
                                  s.dry_allowed_length, s.dry_penalty_last_n)
            entries += [(r, t, -p) for t, p in found.items() if t < z.shape[-1]]
    if not entries:
        return None
    rows, ids, values = (torch.tensor(column, device=z.device) for column in zip(*entries, strict=True))
    return z.index_put((rows, ids), values.to(z.dtype), accumulate=True)


def dry_penalties(tokens: Sequence[int], breakers, multiplier: float, base: float, allowed: int,
                  last_n: int) -> dict[int, float]:
    """One row's DRY: token id -> the amount its logit loses (llama.cpp's llama_sampler_dry_apply, step by step)."""
    n = len(tokens) if last_n < 0 else min(len(tokens), last_n)
    if multiplier == 0 or base < 1 or last_n == 0 or n <= allowed:
        return {}
    window = list(tokens[len(tokens) - n:])
    # 1. a repeat runs back at most to the last breaker
    limit = next((i for i in range(n) if window[n - 1 - i] in breakers), n)
    if limit < allowed:
        return {}
    # 2. z[k]: how many tokens before position n-1-k match the window's last tokens (Z-algorithm, reversed window)
    rev, z, left, right = window[::-1], [0] * n, 0, 0
    for k in range(1, n):
        if k < right:
            z[k] = min(right - k, z[k - left])
        while k + z[k] < n and rev[z[k]] == rev[k + z[k]]:
            z[k] += 1
        if k + z[k] > right:
            left, right = k, k + z[k]
    # 3. the token after each repeat would extend it: keep the longest repeat each token would extend
    longest: dict[int, int] = {}
    for k in range(1, n):
        length = min(z[k], limit)
        if length >= allowed:
            token = window[n - k]
            longest[token] = max(longest.get(token, 0), length)
    # 4. the penalty, with the exponent capped as llama.cpp caps it; a breaker token is never penalised
    cap = int(FLOAT_MAX_LOG / math.log(base)) if base > 1.000001 else 0
    return {t: multiplier * base ** (min(length - allowed, cap) if cap > 0 else length - allowed)
            for t, length in longest.items() if t not in breakers}


__all__ = ["Context", "Counted", "RowContext", "row_context", "biased", "counted", "dry", "dry_penalties", "penalise"]
