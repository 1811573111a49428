"""One step of the sampler, plainly: read this first. The same math as pipeline.py, on one row of logits over the
whole vocabulary, with no batch, no ranking window and no summaries; the tests hold the pipeline to it (beside
transformers' own warpers). Semantics, ties and the engines' orders: docs/sampling.md."""

from __future__ import annotations

import torch

from ..records.settings import ADJUSTERS, ORDERS, SamplingSettings


def _penalised(z: torch.Tensor, s: SamplingSettings, prompt, generated) -> torch.Tensor:
    """The repetition, frequency and presence penalties, one token at a time, by the order's rule."""
    whole = [*prompt, *generated]
    if s.order == "llama.cpp":  # the last penalty_last_n tokens, for all three
        n = s.penalty_last_n
        hit = counted = whole if n < 0 else whole[len(whole) - n:] if n > 0 else []
    else:  # the whole context for the repetition penalty; vLLM counts generated tokens for the other two
        hit, counted = whole, (generated if s.order == "vllm" else [])
    out = z.clone()
    for token in set(hit):
        if s.order == "vllm":
            out[token] = z[token] * (1 / s.repetition_penalty if z[token] > 0 else s.repetition_penalty)
        else:
            out[token] = z[token] / s.repetition_penalty if z[token] > 0 else z[token] * s.repetition_penalty
    for token in set(counted):
        c = counted.count(token)
        if s.order == "vllm":
            out[token] = out[token] - s.frequency_penalty * c - s.presence_penalty
        else:
            out[token] = out[token] - (c * s.frequency_penalty + s.presence_penalty)
    return out


def _banned(s: SamplingSettings, prompt, generated, stop_ids) -> set[int]:
    """The tokens the bans remove: those that would complete an n-gram already seen (no_repeat_ngram_size n), and
    the end tokens while fewer than min_tokens are generated."""
    whole, n, out = [*prompt, *generated], s.no_repeat_ngram_size, set()
    if n and len(whole) >= n - 1:
        out |= {whole[i + n - 1] for i in range(len(whole) - n + 1) if whole[i:i + n - 1] == whole[len(whole) - n + 1:]}
    return out | (set(stop_ids) if len(generated) < s.min_tokens else set())


def reference_step(logits: torch.Tensor, s: SamplingSettings, u: float | None = None, context=((), ()), stop_ids=()):
    """logits (V,) -> (the final distribution (V,), the token u ~ U[0, 1) picks, or None without u).
    context: (prompt ids, generated ids), what the penalties and bans read; stop_ids: the end tokens min_tokens
    holds back."""
    z = logits.float().clone()
    for token, bias in s.logit_bias:  # logit_bias first, in every engine
        z[token] += bias
    if s.penalised:
        z = _penalised(z, s, *context)
    for token in _banned(s, *context, stop_ids):  # -inf commutes with the bias and penalties: their order is moot
        z[token] = float("-inf")
    ranking = torch.sort(z, descending=True, stable=True).indices  # most probable first, ties by lower id
    if s.greedy:  # temperature 0: the argmax of the adjusted logits, nothing drawn
        final = torch.zeros_like(z).scatter_(0, ranking[:1], 1.0)
        return final, int(ranking[0])
    for knob in ORDERS[s.order]:  # the order is the engine's: hf, vllm or llama.cpp
        if knob in ADJUSTERS:
            continue  # applied above: the ranking is made after them
        if knob == "temperature":
            z = z / s.effective_temperature  # T < 1 sharpens, T > 1 flattens; the ranking stays
        elif knob == "top_k" and 0 < s.top_k < len(z):
            z[z < z[ranking[s.top_k - 1]]] = float("-inf")  # keep the k largest (and ties with the k-th)
        elif knob == "top_p" and s.top_p < 1:
            p = z.softmax(-1)[ranking]  # most probable first
            before = p.cumsum(-1) - p  # the mass of the tokens ranked above each token
            z[ranking[1:][before[1:] >= s.top_p]] = float("-inf")  # keep the head that reaches p, the top always
        elif knob == "min_p" and s.min_p > 0:
            p = z.softmax(-1)
            z[p < s.min_p * p.max()] = float("-inf")  # keep tokens at least min_p x as likely as the top one
    final = z.softmax(-1)  # every removed token is -inf: the survivors renormalised
    if u is None:
        return final, None
    bar = final[ranking].double().cumsum(-1)  # the cumulative bar, most probable first
    position = int(torch.searchsorted(bar, u * float(bar[-1]), right=True).clamp(max=len(bar) - 1))
    return final, int(ranking[position])


__all__ = ["reference_step"]
