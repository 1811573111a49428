"""The bans: stages that read a row's context and remove tokens outright (their logit becomes -inf), before any
cut, so greedy and every cut after them never see a banned token.

    no_repeat_ngram   transformers' NoRepeatNGramLogitsProcessor (`no_repeat_ngram_size` n, the hf order): a token
                      that would complete an n-gram already in the context (prompt + generated) is banned. With
                      n = 1 every token seen is banned; a context shorter than n - 1 tokens bans nothing.
    min_tokens        vLLM's min_tokens (transformers' min_new_tokens; the vllm and hf orders): while fewer than
                      `min_tokens` tokens are generated, the row's end tokens are banned (RowContext.stop_ids: the
                      model's end-of-text ids, none when the request ignores them, as vLLM has it).

A ban commutes with the bias and the penalties (-inf plus or times anything finite stays -inf), so where each
engine applies it among them changes no number, only which stage panel shows it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..records.settings import SamplingSettings
from .penalties import RowContext


def ngram_banned(tokens: Sequence[int], n: int) -> set[int]:
    """The tokens that would complete an n-gram already in `tokens` (transformers' _get_generated_ngrams):
    every token that followed an earlier occurrence of the last n - 1 tokens."""
    if n <= 0 or len(tokens) + 1 < n:
        return set()
    tail = tuple(tokens[len(tokens) - (n - 1):]) if n > 1 else ()
    return {tokens[i + n - 1] for i in range(len(tokens) - n + 1) if tuple(tokens[i:i + n - 1]) == tail}


def _banned(z: torch.Tensor, entries: list[tuple[int, int]]) -> torch.Tensor | None:
    entries = [(r, t) for r, t in entries if 0 <= t < z.shape[-1]]
    if not entries:
        return None
    rows, ids = (torch.tensor(column, device=z.device) for column in zip(*entries, strict=True))
    return z.index_put((rows, ids), torch.tensor(float("-inf"), dtype=z.dtype, device=z.device))


def no_repeat_ngram(z: torch.Tensor, settings: Sequence[SamplingSettings],
                    contexts: Sequence[RowContext] | None) -> torch.Tensor | None:
    """z with each row's repeated n-gram completions banned (a new tensor), or None where nothing is banned."""
    if contexts is None or not any(s.no_repeat_ngram_size for s in settings):
        return None
    return _banned(z, [(r, t) for r, (s, c) in enumerate(zip(settings, contexts, strict=True))
                       if s.no_repeat_ngram_size for t in ngram_banned([*c.prompt, *c.generated], s.no_repeat_ngram_size)])


def min_tokens(z: torch.Tensor, settings: Sequence[SamplingSettings],
               contexts: Sequence[RowContext] | None) -> torch.Tensor | None:
    """z with each row's end tokens banned while it has generated fewer than min_tokens (a new tensor), or None
    where nothing is banned."""
    if contexts is None or not any(s.min_tokens for s in settings):
        return None
    return _banned(z, [(r, t) for r, (s, c) in enumerate(zip(settings, contexts, strict=True))
                       if len(c.generated) < s.min_tokens for t in c.stop_ids])


__all__ = ["min_tokens", "ngram_banned", "no_repeat_ngram"]
