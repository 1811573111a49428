"""Lesson 13.4, the math of each knob: one public, documented function per transform, as transformers writes
one warper per knob. Each takes a batch's current logits z (B, V) and the knob per row (B,), and returns the
tokens it removes (B, V) (the pipeline sets them to -inf and renormalises), plus the rows whose answer needs a
wider ranking than `window` (sampling/window.py), or None where the transform needs no ranking.

    temperature  z / T                      reshapes; removes nothing (T = 0 is greedy: pipeline.py)
    top_k        keep the k largest logits  (ties with the k-th are kept)
    top_p        keep the smallest head of the ranking whose probability reaches p (the token that crosses p,
                 and the most probable token, always stay)
    min_p        keep tokens with probability >= m x the top token's

`window`: each row's best token ids, most probable first (ties by lower id), as far as the ranking has been
computed; a cut that falls beyond it is computed again on a wider ranking (window.cut). The plain, whole-
vocabulary version of all four, to read first, is sampling/reference.py.
"""

from __future__ import annotations

import torch


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

__all__ = ["REMOVERS", "min_p", "temperature", "top_k", "top_p"]
