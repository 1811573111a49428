"""Lesson 13.4, the math of each knob: one public, documented function per transform, as transformers writes
one warper per knob. Each takes a batch's current logits z (B, V) and the knob per row (B,), and returns the
tokens it removes (B, V) (the pipeline sets them to -inf and renormalises), plus the rows whose answer needs a
wider ranking than `window` (sampling/window.py), or None where the transform needs no ranking.

    temperature  z / T                      reshapes; removes nothing (T = 0 is greedy: pipeline.py)
    top_k        keep the k largest logits  (ties with the k-th are kept)
    top_p        keep the smallest head of the ranking whose probability reaches p (the token that crosses p,
                 and the most probable token, always stay)
    min_p        keep tokens with probability >= m x the top token's
    top_n_sigma  keep logits >= max - n x their standard deviation (llama.cpp)
    epsilon      remove tokens below probability e, the top one always stays (transformers)
    eta          remove tokens below min(eta, sqrt(eta) exp(-entropy)), the top one stays (transformers)
    top_h        keep the head of the 100 most probable tokens whose cumulative entropy stays within h x theirs
                 (transformers' Top-H)
    typical_p    keep the tokens whose surprise -log p is nearest the entropy, up to mass p (transformers' and
                 llama.cpp's rules: they differ at the edge); it may remove the most probable token
    xtc          with some chance, remove every token at least `threshold` probable but the least of them
                 (llama.cpp); it removes the top
    mirostat     v2: remove tokens whose surprise -log2 p exceeds mu; v1: keep the top k, k from mu and the
                 Zipf exponent of the top 100 tokens (llama.cpp); mu follows the observed surprise (engine/step.py)

`window`: each row's best token ids, most probable first (ties by lower id), as far as the ranking has been
computed; a cut that falls beyond it is computed again on a wider ranking (window.cut). The plain, whole-
vocabulary version of all four, to read first, is sampling/reference.py.
"""

from __future__ import annotations

import math

import torch

from .. import limits


def temperature(z: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Divide each row's logits by its temperature (B,): T < 1 sharpens the distribution, T > 1 flattens it.
    The caller passes the effective divisor (1 for a greedy row: its stages show the untempered shape)."""
    return z / t.unsqueeze(1)


def top_k(z: torch.Tensor, k: torch.Tensor, window: torch.Tensor, lse: torch.Tensor | None = None):
    """Remove logits below the k-th largest; ties with it are kept. Also returns the rows whose k-th
    token lies beyond the window (B,), for which the mask is not yet right."""
    vocab, width = z.shape[-1], window.shape[-1]
    active = (k > 0) & (k < vocab)
    kth = z.gather(1, window).gather(1, (k.clamp(1, width) - 1).unsqueeze(1))  # (B, 1)
    return (z < kth) & active.unsqueeze(1), active & (k > width)


def top_p(z: torch.Tensor, p: torch.Tensor, window: torch.Tensor, lse: torch.Tensor | None = None):
    """HF/vLLM top-p: with tokens sorted ascending, remove those whose cumulative probability is
    <= 1 - p; the token that crosses p and the most probable token always stay. Also returns the rows
    whose cut lies beyond the window (B,), for which the mask is not yet right.

    The ascending cumsum at a window token = the mass beyond the window + the window's suffix sum.
    When the mass beyond the window is itself <= 1 - p, every token out there is removed. Only the window's
    probabilities are read: exp(z - lse), `lse` the log-normaliser of z (B,) (computed here if not given)."""
    vocab, width = z.shape[-1], window.shape[-1]
    active = p < 1
    lse = z.logsumexp(dim=-1) if lse is None else lse
    inside = (z.gather(1, window) - lse.unsqueeze(1)).exp()  # (B, W), descending
    beyond = (1 - inside.sum(dim=-1)).clamp(min=0) if width < vocab else torch.zeros_like(p)
    ascending_cum = inside.flip(-1).cumsum(dim=-1).flip(-1) + beyond.unsqueeze(1)  # (B, W)
    remove_inside = ascending_cum <= (1 - p).unsqueeze(1)
    remove_inside[:, 0] = False
    removed = torch.ones_like(z, dtype=torch.bool).scatter_(1, window, remove_inside)
    further = beyond > 1 - p
    if width < vocab:
        # The window keeps a prefix. If its last kept token ties with the window's edge, tokens tied with it may lie
        # beyond the window with lower ids, and ties go to the lower id: such a row is ranked wider too.
        kept = (~remove_inside).sum(dim=-1, keepdim=True)  # (B, 1)
        last_kept = z.gather(1, window.gather(1, kept - 1)).squeeze(1)
        further |= last_kept == z.gather(1, window[:, -1:]).squeeze(1)
    return removed & active.unsqueeze(1), active & further


def min_p(z: torch.Tensor, m: torch.Tensor, window: torch.Tensor, lse: torch.Tensor | None = None):
    """Remove tokens whose probability is below m times the top token's (no ranking needed: the top token is the
    window's first)."""
    lse = z.logsumexp(dim=-1) if lse is None else lse
    probs = (z - lse.unsqueeze(1)).exp()
    return (probs < m.unsqueeze(1) * probs.gather(1, window[:, :1])) & (m > 0).unsqueeze(1), None


REMOVERS = {"top_k": top_k, "top_p": top_p, "min_p": min_p}


def _keep_top(removed: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """transformers' min_tokens_to_keep = 1: never remove a token tied with the largest logit."""
    return removed & (z < z.max(dim=-1, keepdim=True).values)


def top_n_sigma(z: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """llama.cpp's top-n-sigma: the mean and (population) standard deviation of the finite logits, then remove
    logits below max - n x std. n = 0: off."""
    finite = torch.isfinite(z)
    count = finite.sum(dim=-1, keepdim=True).clamp(min=1)
    mean = torch.where(finite, z, 0.0).sum(dim=-1, keepdim=True) / count
    std = (torch.where(finite, z - mean, 0.0).square().sum(dim=-1, keepdim=True) / count).sqrt()
    top = z.max(dim=-1, keepdim=True).values
    return (z < top - n.unsqueeze(1) * std) & ((n > 0) & (count.squeeze(1) > 1)).unsqueeze(1)


def epsilon_cutoff(z: torch.Tensor, epsilon: torch.Tensor) -> torch.Tensor:
    """transformers' EpsilonLogitsWarper: remove probabilities below epsilon, keeping the top token."""
    return _keep_top(z.softmax(dim=-1) < epsilon.unsqueeze(1), z) & (epsilon > 0).unsqueeze(1)


def eta_cutoff(z: torch.Tensor, epsilon: torch.Tensor) -> torch.Tensor:
    """transformers' EtaLogitsWarper: eta = min(epsilon, sqrt(epsilon) exp(-H)), H the entropy in nats; remove
    probabilities below eta, keeping the top token."""
    probs = z.softmax(dim=-1)
    log_p = (z - z.logsumexp(dim=-1, keepdim=True)).clamp(min=torch.finfo(z.dtype).min)  # as Categorical's
    entropy = -(log_p * probs).sum(dim=-1)
    eta = torch.minimum(epsilon, epsilon.sqrt() * (-entropy).exp()).unsqueeze(1)
    return _keep_top(probs < eta, z) & (epsilon > 0).unsqueeze(1)


TYPICAL_FIRST = 512  # typical-p ranks this many tokens first (most steps reach their mass within a few hundred)


def typical_p(z: torch.Tensor, mass: torch.Tensor, rule: str) -> torch.Tensor:
    """Locally typical sampling: rank tokens by |-log p - H| (H the entropy), ascending, and keep a head of that
    ranking. rule "hf" (TypicalLogitsWarper): keep the tokens whose score is at most that of the first token where
    the cumulative probability reaches `mass` (ties kept); "llama.cpp": keep the ranking (ties by lower id) up to and
    including the first token whose cumulative probability exceeds `mass`. 1 = off.

    Only the active rows are ranked, and each only as far as its mass needs: TYPICAL_FIRST tokens, then 4 x as
    many, then all (sorting 49k scores costs ~2.5 ms a row on a 2-core CPU, their 512 smallest ~0.2 ms)."""
    removed = torch.zeros_like(z, dtype=torch.bool)
    rows = (mass < 1).nonzero().view(-1)
    if len(rows) == 0:
        return removed
    log_p = z[rows].log_softmax(dim=-1)
    probs = log_p.exp()
    shifted = (-log_p - (-(log_p * probs).nansum(dim=-1, keepdim=True))).abs()  # a removed token: inf, last
    return removed.index_copy(0, rows, _typical_cut(shifted, probs, mass[rows].unsqueeze(1), rule, TYPICAL_FIRST))


def _typical_cut(shifted, probs, mass, rule: str, width: int) -> torch.Tensor:
    """typical_p's removed tokens for rows of (shifted scores, probabilities), ranking `width` first; a row whose
    edge lies beyond (or ties with a token beyond) is ranked again, wider, on its own."""
    vocab = shifted.shape[-1]
    width = min(width, vocab)
    scores, order = _ascending(shifted, width)
    cumulative = probs.gather(1, order).cumsum(dim=-1)
    reached = (cumulative >= mass) if rule == "hf" else (cumulative > mass)
    first = torch.where(reached.any(dim=-1), reached.float().argmax(dim=-1), width - 1).unsqueeze(1)  # (R, 1)
    edge = scores.gather(1, first)
    if rule == "hf":
        remove = shifted > edge  # every token tied with the edge stays
    else:
        inside = torch.arange(width, device=shifted.device).unsqueeze(0) > first
        remove = torch.ones_like(shifted, dtype=torch.bool).scatter(1, order, inside)
    remove.scatter_(1, order[:, :1], False)  # min_tokens_to_keep = 1
    # a row is settled when its edge lies before the last ranked token and below it: no unranked token ties with it
    wider = ~(reached[:, :-1].any(dim=-1) & (edge.squeeze(1) < scores[:, -1])) if width < vocab else None
    if wider is not None and bool(wider.any()):
        again = wider.nonzero().view(-1)
        remove[again] = _typical_cut(shifted[again], probs[again], mass[again], rule, width * 4)
    return remove


TOP_H_CANDIDATES = 100  # transformers' TopHLogitsWarper.top_n: Top-H reads the 100 most probable tokens only


def top_h(z: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """transformers' TopHLogitsWarper (Top-H decoding, NeurIPS 2025): take the 100 most probable tokens and
    renormalise them; walking down their ranking, keep each token while the running sum of -p log p stays within
    h x their entropy. The top token always stays; every token past the 100 goes. h (B,) in (0, 1]; 0 = off: the
    row removes nothing. Written as transformers writes it (a Categorical's entropy, the same cumulative sum), so a
    row's survivors are transformers' own."""
    n = min(TOP_H_CANDIDATES, z.shape[-1])
    top, ids = z.topk(n, dim=-1, largest=True, sorted=True)
    logits = top - top.logsumexp(dim=-1, keepdim=True)  # torch.distributions.Categorical(logits=top)
    probs = logits.softmax(dim=-1)
    entropy = -(logits.clamp(min=torch.finfo(logits.dtype).min) * probs).sum(dim=-1)
    head = (-probs * probs.log()).cumsum(dim=-1) <= (entropy * h).unsqueeze(1)
    head[:, 0] = True
    kept = torch.zeros_like(z, dtype=torch.bool).scatter(1, ids, head)
    return ~kept & (h > 0).unsqueeze(1)


def _ascending(scores: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `width` smallest scores per row and their ids, ascending, ties by lower id."""
    if width >= scores.shape[-1]:
        return scores.sort(dim=-1, stable=True)
    values, ids = scores.topk(width, dim=-1, largest=False)
    ids, by_id = ids.sort(dim=-1)
    values, by_value = values.gather(1, by_id).sort(dim=-1, stable=True)
    return values, ids.gather(1, by_value)


def xtc(z: torch.Tensor, probability: torch.Tensor, threshold: torch.Tensor, chance: torch.Tensor,
        ranking: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """llama.cpp's XTC ("exclude top choices"): when the row's chance (drawn per step) is at most `probability`,
    the tokens at least `threshold` probable, all but the least probable of them, are removed, so a less obvious
    token stays on top. `ranking`: the survivors' ids, most probable first (ties by lower id), as far as the tokens
    above the threshold reach; lse: the log-normaliser of z. Off when probability is 0 or threshold above 0.5."""
    probs = (z.gather(1, ranking) - lse.unsqueeze(1)).exp()
    above = (probs >= threshold.unsqueeze(1)).sum(dim=-1, keepdim=True)  # a prefix: the ranking is descending
    fire = (probability > 0) & (threshold <= 0.5) & (chance <= probability)
    remove = torch.arange(ranking.shape[-1], device=z.device).unsqueeze(0) < above - 1
    return torch.zeros_like(z, dtype=torch.bool).scatter(1, ranking, remove & fire.unsqueeze(1))


def mirostat(z: torch.Tensor, version: torch.Tensor, mu: torch.Tensor, m: int = limits.MIROSTAT_M) -> torch.Tensor:
    """llama.cpp's mirostat cut for the rows whose version (B,) is 1 or 2, each at its mu (B,) in bits:

    v2 (llama_sampler_mirostat_v2_apply): remove the tokens whose surprise -log2 p is above mu; the most probable
       token always stays.
    v1 (llama_sampler_mirostat_apply): estimate the Zipf exponent s of the ranked probabilities from the top m,
       s = sum t_i b_i / sum t_i^2 with t_i = ln((i + 2) / (i + 1)) and b_i = ln(p_i / p_(i+1)); then keep the top
       k = ((s - 1) 2^mu / (1 - V^-(s - 1)))^(1 / s) tokens (at least 1; ties with the k-th kept, as top_k keeps them).

    The observed surprise of the drawn token then moves mu: mu -= eta (surprise - tau) (engine/step.py:choose)."""
    removed = torch.zeros_like(z, dtype=torch.bool)
    log2p = (z - z.logsumexp(dim=-1, keepdim=True)) / math.log(2)
    v2 = (version == 2).unsqueeze(1)
    removed |= v2 & (-log2p > mu.unsqueeze(1)) & (z < z.max(dim=-1, keepdim=True).values)
    rows = (version == 1).nonzero().view(-1)
    if len(rows):
        vocab = z.shape[-1]
        top = z[rows].topk(min(m, vocab), dim=-1).values
        logp = top - z[rows].logsumexp(dim=-1, keepdim=True)
        i = torch.arange(top.shape[-1] - 1, device=z.device, dtype=z.dtype)
        t = ((i + 2) / (i + 1)).log()
        b = logp[:, :-1] - logp[:, 1:]
        s_hat = (t * b).sum(dim=-1) / (t * t).sum(dim=-1)
        eps = s_hat - 1
        k = ((eps * 2 ** mu[rows]) / (1 - vocab ** (-eps))) ** (1 / s_hat)
        k = torch.where(torch.isfinite(k), k, torch.full_like(k, vocab)).clamp(1, vocab).long()
        kth = z[rows].sort(dim=-1, descending=True).values.gather(1, (k - 1).unsqueeze(1)) if bool((k > m).any()) \
            else top.gather(1, (k.clamp(max=top.shape[-1]) - 1).unsqueeze(1))
        removed[rows] = z[rows] < kth
    return removed


__all__ = ["REMOVERS", "mirostat", "epsilon_cutoff", "eta_cutoff", "min_p", "temperature", "top_h", "top_k", "top_n_sigma",
           "top_p", "typical_p", "xtc"]
