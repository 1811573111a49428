"""Sample one frozen step many times: the law of large numbers, and a check that the sampler draws what
the bars say.

The n draws are one vectorised operation on the step's final distribution, with the law of
model_service/sampling/pipeline.py:draw: the cumulative bar lays the window's tokens out from most to least
probable, then the rest in id order, and u ~ U[0, 1) picks the token whose interval holds u. Here the
bar is built once for the whole vocabulary and n u's (one seeded generator) are read on it with one
searchsorted. Then Pearson's chi-square test of the counts against the distribution.
"""

from __future__ import annotations

import time

import torch

from ..records.step import ManyDraws, r6
from .pipeline import Stages, make_generator

POOL_BELOW = 5.0  # expected count under which a token's bin is pooled (the usual rule for Pearson's test)


def draw_many(final: torch.Tensor, window: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Token ids (n,) for the u's (n,) in [0, 1) on one row's final distribution (V,) and its window (W,):
    the token draw() would pick for each u."""
    vocab = final.shape[-1]
    rest = torch.ones(vocab, dtype=torch.bool, device=final.device)
    rest[window] = False
    order = torch.cat([window, torch.arange(vocab, device=final.device)[rest]])  # the bar's layout
    mass = final[order].double()
    cum = mass.cumsum(dim=0)
    total = final.sum(dtype=torch.float64)
    position = torch.searchsorted(cum, u.double().to(final.device) * total, right=True)
    # u * total at the very end of the bar (float round-off): the last token that has mass
    last = int(torch.nonzero(mass > 0).max())
    return order[position.clamp(max=last)]


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, int, float | None, int]:
    """Pearson's test of counts (V,) against probs (V,): (chi2, dof, p-value, bins).

    A token with expected count n*p >= POOL_BELOW is its own bin; the others are pooled into one bin
    (tokens of probability 0 included: a draw there makes chi2 infinite). A pooled bin still under
    POOL_BELOW joins the smallest bin. With one bin there is nothing to test: p-value None."""
    n = float(counts.sum())
    p = probs.double() / probs.double().sum()
    expected, observed = n * p, counts.double()
    impossible = bool(((p <= 0) & (observed > 0)).any())  # a draw the distribution forbids: reject outright
    big = expected >= POOL_BELOW
    e, o = expected[big], observed[big]
    e_rest, o_rest = float(n - e.sum()), float(n - o.sum())
    if e_rest >= POOL_BELOW or e.numel() == 0:
        e, o = torch.cat([e, e.new_tensor([e_rest])]), torch.cat([o, o.new_tensor([o_rest])])
    elif e_rest > 0 or o_rest > 0:
        smallest = int(e.argmin())
        e[smallest] += e_rest
        o[smallest] += o_rest
    bins = int(e.numel())
    if impossible:
        return float("inf"), max(bins - 1, 1), 0.0, bins
    if bins < 2:
        return 0.0, 0, None, bins
    chi2 = float(((o - e) ** 2 / e).sum())
    dof = bins - 1
    # the upper tail of chi-square with dof degrees of freedom: Q(dof/2, chi2/2)
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                            torch.tensor(chi2 / 2, dtype=torch.float64)))
    return chi2, dof, p_value, bins


def sample_step(stages: Stages, n: int, seed: int, top_n: int, pieces, step: int, token_id: int,
                forward_ms: float, pending_hex: str = "") -> ManyDraws:
    """n draws from row 0 of stages (capture off is enough: only "final" is read), as a ManyDraws record."""
    started = time.perf_counter()
    final, window = stages.probs["final"][0], stages.bar[0]
    generator = make_generator(seed, final.device)
    u = torch.rand(n, generator=generator, device=final.device, dtype=torch.float64)
    tokens = draw_many(final, window, u)
    counts = torch.bincount(tokens, minlength=final.shape[-1])
    chi2, dof, p_value, _ = chi_square(counts, final)
    top = window[:top_n]
    top = top[final[top] > 0]  # the final distribution's best tokens (a filter may have left fewer)
    top_counts, top_probs = counts[top].tolist(), final[top].tolist()
    ids = top.tolist()
    draw_ms = (time.perf_counter() - started) * 1000
    return ManyDraws(
        step=step, n=n, seed=seed, tokens=tuple(pieces(i) for i in ids), counts=tuple(int(c) for c in top_counts),
        probs=tuple(r6(q) for q in top_probs), other_count=n - sum(top_counts),
        other_prob=r6(max(0.0, 1.0 - sum(top_probs))), distinct=int((counts > 0).sum()),
        support=int((final > 0).sum()), chi2=r6(chi2) if chi2 != float("inf") else chi2, dof=dof,
        p_value=None if p_value is None else r6(p_value), token_id=token_id, forward_ms=round(forward_ms, 3),
        draw_ms=round(draw_ms, 3), pending_hex=pending_hex,
    )
