"""The sampler's oracles, one row at a time: transformers' own processors and warpers for the "hf" order, and the
"vllm" and "llama.cpp" chains written out plainly from their engines' sources (docs/sampling.md says which)."""

from __future__ import annotations

import math

import torch
from transformers.generation.logits_process import (
    EpsilonLogitsWarper,
    EtaLogitsWarper,
    MinNewTokensLengthLogitsProcessor,
    MinPLogitsWarper,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    SequenceBiasLogitsProcessor,
    TemperatureLogitsWarper,
    TopHLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from model_service.sampling.pipeline import SamplingSettings

NEG = float("-inf")



HF_WARPERS = [  # (stage, is it on, the warper): transformers applies only the knobs that are on
    ("temperature", lambda s: s.temperature > 0 and s.temperature != 1, lambda s: TemperatureLogitsWarper(s.temperature)),
    ("top_h", lambda s: s.top_h > 0, lambda s: TopHLogitsWarper(s.top_h)),  # top_h=None in transformers: off
    ("top_k", lambda s: s.top_k > 0, lambda s: TopKLogitsWarper(s.top_k)),
    ("top_p", lambda s: s.top_p < 1, lambda s: TopPLogitsWarper(s.top_p)),
    ("min_p", lambda s: s.min_p > 0, lambda s: MinPLogitsWarper(s.min_p)),
    ("typical_p", lambda s: s.typical_p < 1, lambda s: TypicalLogitsWarper(s.typical_p)),
    ("epsilon_cutoff", lambda s: s.epsilon_cutoff > 0, lambda s: EpsilonLogitsWarper(s.epsilon_cutoff)),
    ("eta_cutoff", lambda s: s.eta_cutoff > 0, lambda s: EtaLogitsWarper(s.eta_cutoff)),
]


def hf_stages(x: torch.Tensor, s: SamplingSettings, context=((), ())) -> dict[str, torch.Tensor]:
    """transformers' own processors and warpers, chained in generate()'s order; off knobs are not applied (as HF)."""
    scores = x.unsqueeze(0).clone()
    out = {"raw": scores.softmax(-1)[0]}
    ids = torch.tensor([[*context[0], *context[1]]], dtype=torch.long)
    if s.logit_bias:
        scores = SequenceBiasLogitsProcessor({(t,): b for t, b in s.logit_bias})(ids, scores)
    out["logit_bias"] = scores.softmax(-1)[0]
    if s.repetition_penalty != 1 and ids.numel():
        scores = RepetitionPenaltyLogitsProcessor(s.repetition_penalty)(ids, scores)
    out["penalties"] = scores.softmax(-1)[0]
    if s.no_repeat_ngram_size and ids.numel():
        scores = NoRepeatNGramLogitsProcessor(s.no_repeat_ngram_size)(ids, scores)
    out["no_repeat_ngram"] = scores.softmax(-1)[0]
    if s.min_tokens and stop_ids_of(context):
        scores = MinNewTokensLengthLogitsProcessor(len(context[0]), s.min_tokens, list(stop_ids_of(context)))(ids, scores)
    out["min_tokens"] = scores.softmax(-1)[0]
    adjusted = scores[0].clone()
    for name, on, warper in HF_WARPERS:  # generate()'s order
        if on(s):
            scores = warper(s)(None, scores)
        out[name] = scores.softmax(-1)[0]
    out["final"] = one_hot_argmax(adjusted) if s.temperature == 0 else out["eta_cutoff"]
    return out


def stop_ids_of(context) -> tuple[int, ...]:
    """The end tokens a context names (a RowContext's stop_ids; a plain (prompt, generated) pair names none)."""
    return tuple(getattr(context, "stop_ids", ()))


def plain_adjusters(x, s, context, out):
    """vLLM's and llama.cpp's bias and penalties (and vLLM's min_tokens), written from their sources one token at a
    time (vllm model_executor/layers/utils.py apply_penalties, v1/sample/logits_processor MinTokensLogitsProcessor;
    llama.cpp src/llama-sampling.cpp llama_sampler_penalties_apply)."""
    z = x.clone()
    for t, b in s.logit_bias:
        z[t] += b
    out["logit_bias"] = z.softmax(-1)
    prompt, generated = list(context[0]), list(context[1])
    if s.order == "vllm":
        if len(generated) < s.min_tokens:
            for t in stop_ids_of(context):
                z[t] = NEG
        out["min_tokens"] = z.softmax(-1)
    if s.order == "vllm":
        for t in set(prompt + generated):
            z[t] = z[t] * (1.0 / s.repetition_penalty if z[t] > 0 else s.repetition_penalty)
        for t in set(generated):
            z[t] -= s.frequency_penalty * generated.count(t)
            z[t] -= s.presence_penalty
    else:
        n = s.penalty_last_n
        last = (prompt + generated)[-n:] if n > 0 else (prompt + generated) if n < 0 else []
        for t in set(last):
            c = last.count(t)
            z[t] = z[t] * s.repetition_penalty if z[t] <= 0 else z[t] / s.repetition_penalty
            z[t] -= c * s.frequency_penalty + s.presence_penalty
    out["penalties"] = z.softmax(-1)
    return z


def one_hot_argmax(x):
    return torch.zeros_like(x).scatter_(0, x.argmax().view(1), 1.0)


def ref_top_k(z, k):
    if k == 0 or k >= z.numel():
        return z
    kth = torch.topk(z, k).values[-1]
    return z.masked_fill(z < kth, NEG)


def ref_top_p(z, p):
    if p >= 1:
        return z
    values, ids = torch.sort(z)  # ascending
    cum = values.softmax(-1).cumsum(-1)
    remove = cum <= 1 - p
    remove[-1] = False
    return z.masked_fill(torch.zeros_like(remove).scatter(0, ids, remove), NEG)


def ref_min_p(z, m):
    if m == 0:
        return z
    probs = z.softmax(-1)
    return z.masked_fill(probs < m * probs.max(), NEG)


def vllm_stages(x, s, context=((), ())):
    """vLLM v1: bias, penalties, then temperature -> min-p -> top-k -> top-p; T < 1e-5 greedy, small T clamped to
    0.01."""
    greedy = s.temperature < 1e-5
    t = 1.0 if greedy else max(s.temperature, 0.01)
    out = {"raw": x.softmax(-1)}
    x = plain_adjusters(x, s, context, out)
    chained(x, out, [("temperature", lambda z: z / t), ("min_p", lambda z: ref_min_p(z, s.min_p)),
                     ("top_k", lambda z: ref_top_k(z, s.top_k)), ("top_p", lambda z: ref_top_p(z, s.top_p))])
    out["final"] = one_hot_argmax(x) if greedy else out["top_p"]
    return out


def chained(z, out, steps):
    """Apply each (stage, transform) in turn, recording each stage's distribution in `out`; the last logits."""
    for name, transform in steps:
        z = transform(z)
        out[name] = z.softmax(-1)
    return z


def ref_top_n_sigma(z, n):
    """llama.cpp llama_sampler_top_n_sigma_apply: mean and population std of the finite logits."""
    if n <= 0:
        return z
    finite = [float(v) for v in z if math.isfinite(v)]
    if len(finite) <= 1:
        return z
    mean = sum(finite) / len(finite)
    std = math.sqrt(sum((v - mean) ** 2 for v in finite) / len(finite))
    return z.masked_fill(z < max(finite) - n * std, NEG)


def _survivors(z):
    """(id, p) of the finite logits, most probable first, ties by lower id."""
    p = z.softmax(-1)
    return sorted(((i, float(p[i])) for i in range(len(z)) if math.isfinite(z[i])), key=lambda t: (-t[1], t[0]))


def ref_typical_llama(z, mass):
    """llama.cpp llama_sampler_typical_apply: by |-log p - H| ascending, through the first token past `mass`."""
    if mass >= 1:
        return z
    kept = _survivors(z)
    entropy = -sum(p * math.log(p) for _, p in kept if p > 0)
    by_surprise = sorted(kept, key=lambda t: (abs(-math.log(t[1]) - entropy) if t[1] > 0 else math.inf, t[0]))
    keep, total = set(), 0.0
    for i, p in by_surprise:
        keep.add(i)
        total += p
        if total > mass:
            break
    return z.masked_fill(torch.tensor([i not in keep for i in range(len(z))]), NEG)


def ref_xtc(z, probability, threshold, chance):
    """llama.cpp llama_sampler_xtc_apply: all the tokens at least `threshold` probable but the last go."""
    if probability <= 0 or threshold > 0.5 or chance > probability:
        return z
    kept = _survivors(z)
    if len(kept) < 2:
        return z
    last = 0
    for position, (_, p) in enumerate(kept):
        if p < threshold:
            break
        last = position
    gone = {i for i, _ in kept[:last]}
    return z.masked_fill(torch.tensor([i in gone for i in range(len(z))]), NEG)


def ref_temperature_llama(z, s):
    """llama.cpp llama_sampler_temp_ext_apply: with dynatemp_range > 0, T from the survivors' entropy."""
    t = 1.0 if s.temperature < 1e-5 else s.temperature
    if s.dynatemp_range <= 0 or s.temperature < 1e-5:
        return z / t
    kept = _survivors(z)
    if len(kept) <= 1:
        return z
    low, high = max(0.0, t - s.dynatemp_range), t + s.dynatemp_range
    entropy = -sum(p * math.log(p) for _, p in kept if p > 0)
    return z / max(low + (high - low) * (entropy / math.log(len(kept))) ** s.dynatemp_exponent, 1e-5)


def ref_dry(tokens, breakers, s) -> dict[int, float]:
    """DRY by brute force (no Z-algorithm): for every earlier position, how far back its tokens equal the context's
    last ones (not across the last breaker); the token after it would extend that repeat."""
    if s.dry_multiplier == 0 or s.dry_penalty_last_n == 0:
        return {}
    n = len(tokens) if s.dry_penalty_last_n < 0 else min(len(tokens), s.dry_penalty_last_n)
    w = list(tokens)[len(tokens) - n:]
    if n <= s.dry_allowed_length:
        return {}
    limit = n
    for i in range(n):
        if w[n - 1 - i] in breakers:
            limit = i
            break
    longest = {}
    for end in range(n - 1):  # a repeat ending at `end`, followed by w[end + 1]
        m = 0
        while m <= end and w[end - m] == w[n - 1 - m]:
            m += 1
        m = min(m, limit)
        if m >= s.dry_allowed_length:
            longest[w[end + 1]] = max(longest.get(w[end + 1], 0), m)
    cap = int(88.7228391 / math.log(s.dry_base)) if s.dry_base > 1.000001 else 0
    return {t: s.dry_multiplier * s.dry_base ** (min(m - s.dry_allowed_length, cap) if cap else m - s.dry_allowed_length)
            for t, m in longest.items() if t not in breakers}


def ref_mirostat(z, s, mu):
    """llama.cpp's mirostat cuts, in float64 one token at a time: v2 keeps surprise <= mu (the top always); v1 keeps
    the top k, k from the Zipf exponent of the top 100."""
    if s.mirostat == 0:
        return z
    kept = _survivors(z)
    if s.mirostat == 2:
        keep = {i for i, p in kept if -math.log2(p) <= mu} | {kept[0][0]}
    else:
        top = [p for _, p in kept[:100]]
        t = [math.log((i + 2) / (i + 1)) for i in range(len(top) - 1)]
        b = [math.log(top[i] / top[i + 1]) for i in range(len(top) - 1)]
        s_hat = sum(a * c for a, c in zip(t, b)) / sum(a * a for a in t)
        eps = s_hat - 1
        k = max(int((eps * 2 ** mu / (1 - len(z) ** -eps)) ** (1 / s_hat)), 1)
        kth = kept[min(k, len(kept)) - 1][1]
        keep = {i for i, p in kept if p >= kth}
    return z.masked_fill(torch.tensor([i not in keep for i in range(len(z))]), NEG)


def llamacpp_stages(x, s, context=((), ())):
    """llama.cpp: bias, penalties, DRY, top-n-sigma -> top-k -> typical -> top-p -> min-p -> XTC decided at T = 1,
    then temperature (or the dynamic one) reshapes the survivors, then mirostat's cut (when on)."""
    out = {"raw": x.softmax(-1)}
    x = plain_adjusters(x, s, context, out)
    chance = context[2] if len(context) > 2 else 0.0
    breakers = context[3] if len(context) > 3 else frozenset()
    mu = context[4] if len(context) > 4 and not math.isnan(context[4]) else 2 * s.mirostat_tau
    for t, penalty in ref_dry([*context[0], *context[1]], breakers, s).items():
        x[t] -= penalty
    out["dry"] = x.softmax(-1)
    chained(x, out, [("top_n_sigma", lambda z: ref_top_n_sigma(z, s.top_n_sigma)),
                     ("top_k", lambda z: ref_top_k(z, s.top_k)), ("typical_p", lambda z: ref_typical_llama(z, s.typical_p)),
                     ("top_p", lambda z: ref_top_p(z, s.top_p)), ("min_p", lambda z: ref_min_p(z, s.min_p)),
                     ("xtc", lambda z: ref_xtc(z, s.xtc_probability, s.xtc_threshold, chance)),
                     ("temperature", lambda z: ref_temperature_llama(z, s)),
                     ("mirostat", lambda z: ref_mirostat(z, s, mu))])
    out["final"] = one_hot_argmax(x) if s.temperature < 1e-5 else out["mirostat"]
    return out


ORACLES = {"hf": hf_stages, "vllm": vllm_stages, "llama.cpp": llamacpp_stages}
