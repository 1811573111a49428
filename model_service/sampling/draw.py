"""The draw: one token per row from the final distribution, by inverse CDF on a cumulative bar, with each row's
own seeded generator (so a seeded row draws the same tokens alone or among strangers), and what the page shows
of it: u, the token's interval [low, high) on the bar, its rank (records/step.py:DrawInfo)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from ..records.step import DrawInfo, r6
from . import window as ranking


def draw(stages, greedy: Sequence[bool], generators: Sequence[torch.Generator | None]):
    """Draw one token per row from stages.probs["final"] by inverse CDF (the same law as multinomial).

    Layout of the cumulative bar: the bar's WINDOW tokens from most to least probable, then the rest in
    id order; u ~ U[0, 1) picks the token whose interval [low, high) holds it. Each row uses its own
    generator, so a seeded row's draw does not depend on its batch-mates.
    Returns (token_ids (B,) int64, [DrawInfo per row]).
    """
    us = take_us(generators)
    return draw_at(stages, [None if g else v for g, v in zip(greedy, us)])


def take_us(generators: Sequence[torch.Generator]) -> list[float]:
    """Each row's u for this step, one from its generator. Every row consumes one draw per step, greedy or not, so
    the generator's state after k steps is the same whatever the settings were: a run continued step by step
    replays a full run, and a greedy step's u is what the step would read at a temperature above 0."""
    return [float(torch.rand((), generator=gen, device=gen.device)) for gen in generators]


def u_at(seed: int, step: int, device="cpu") -> float:
    """The u a run seeded `seed` on `device` draws at `step` (0-based): draw() takes one number per step, greedy or
    not, and a row continued after `step` tokens skips them in one call (engine/step.py:RowState)."""
    generator = make_generator(seed, device)
    if step:
        torch.rand(step, generator=generator, device=generator.device)
    return float(torch.rand((), generator=generator, device=generator.device))


def side_chance(seed: int, step: int) -> float:
    """A second random number of a seeded row at a step, apart from its draw's u: the chance XTC compares with
    xtc_probability. A function of (seed, step) alone (SHA-512 of both, Python's Mersenne Twister), so a step
    recomputed later (many draws, a busy-room check) or a row resumed mid-run reads the same chance, and the
    row's generator, whose u the draws read in turn, is left as it is."""
    return random.Random(f"side:{seed}:{step}").random()


def draw_at(stages, us: Sequence[float | None]):
    """draw() with each row's u given (None: greedy, the argmax): where u lands on the row's cumulative bar."""
    greedy = [v is None for v in us]
    final = stages.dists["final"]
    device = final.z.device
    if all(greedy):  # no bar to read: each row's argmax, its whole bar [0, 1), rank 0 (as below)
        return _greedy_draws(stages, final, len(us))
    u = torch.tensor([0.0 if v is None else v for v in us], dtype=torch.float64, device=device)
    vocab, width = final.z.shape[-1], min(ranking.WINDOW, final.z.shape[-1])
    greedy_t = torch.tensor(list(greedy), device=device)
    # Read on the bar, or first on a narrower window: up to a token whose logit beats the window's edge, the window
    # and the bar hold the same tokens in the same order, so the same sums: the same token. A draw that lands
    # further is read again on the bar, its row alone.
    narrow = stages.window.shape[-1] < width
    window = stages.window if narrow else stages.bar
    inside, total = _on_window(final, window)
    target = (u * total).unsqueeze(1)  # scaled, so float round-off never runs past the end
    tokens, high, p_token, position, beyond = _read_bar(final, window, inside, target, total, tail=not narrow)
    edge = stages.logits.gather(1, window[:, -1:]).squeeze(1)
    if narrow:
        value = stages.logits.gather(1, tokens.unsqueeze(1)).squeeze(1)
        again = (beyond | (value <= edge)) & ~greedy_t
        if bool(again.any()):
            rows = again.nonzero().view(-1)
            bar = ranking.ranked_window(stages.logits[rows], width)
            t, h, m, p, b = _read_bar(final, bar, _on_window(final, bar, rows)[0], target[rows], total[rows], rows)
            tokens, high, p_token = tokens.index_copy(0, rows, t), high.index_copy(0, rows, h), p_token.index_copy(0, rows, m)
            position, beyond = position.index_copy(0, rows, p), beyond.index_copy(0, rows, b)
            edge = edge.index_copy(0, rows, stages.logits[rows].gather(1, bar[:, -1:]).squeeze(1))
    if bool(greedy_t.any()):
        tokens = torch.where(greedy_t, final.top.squeeze(1), tokens)
        high, p_token = torch.where(greedy_t, total, high), torch.where(greedy_t, total, p_token)
    # A bar token's rank is its position (the bar is the raw ranking, ties by lower id) when its logit beats
    # every token outside the bar; otherwise (drawn beyond it, or tied with its edge) count over the vocabulary.
    value = stages.logits.gather(1, tokens.unsqueeze(1)).squeeze(1)
    exact = greedy_t | (~beyond & (value > edge)) | (width == vocab)
    ranks = torch.where(greedy_t, torch.zeros_like(position), position)
    if not bool(exact.all()):
        ranks = torch.where(exact, ranks, rank_of(stages.logits, tokens))
    margins = _margins(target.squeeze(1), high, p_token, total)
    gaps = _logit_gaps(stages.logits, greedy_t, stages.window)
    # one copy to the host for the whole draw (on a GPU each .tolist() would wait for the device again)
    packed = torch.stack([ranks.double(), high.double(), p_token.double(), total, margins, gaps])
    host = packed.cpu().tolist()
    draws = [
        DrawInfo(u=v, rank=int(r), low=max(0.0, (h - p) / t), high=min(1.0, h / t),
                 margin=None if v is None else r6(m), logit_gap=None if v is not None else r6(g))
        for v, r, h, p, t, m, g in zip(us, *host)
    ]
    return tokens, draws


def _greedy_draws(stages, final, rows: int):
    """draw_at's answer for rows that are all greedy (the general path gives each the same numbers)."""
    tokens = final.top.squeeze(1)
    gaps = _logit_gaps(stages.logits, torch.ones(rows, dtype=torch.bool, device=tokens.device), stages.window)
    return tokens, [DrawInfo(u=None, rank=0, low=0.0, high=1.0, margin=None, logit_gap=r6(g)) for g in gaps.tolist()]


def _on_window(final, window: torch.Tensor, rows: torch.Tensor | None = None):
    """The final distribution's probabilities on `window` (R, W), float64, and each row's total mass (R,): read on
    the window alone for a row whose survivors all lie in it (exp(z - lse): the numbers the summaries show), else
    from the whole vocabulary's softmax. `rows`: the rows `window` ranks (all by default)."""
    inside = final.at(window, rows).double()
    total = inside.sum(dim=-1)
    wide = ~final.within(window, rows)
    if bool(wide.any()):
        w = wide.nonzero().view(-1)
        probs = final.probs_of(w if rows is None else rows[w])
        inside[w] = probs.gather(1, window[w]).double()
        total[w] = probs.sum(dim=-1, dtype=torch.float64)
    return inside, total


def _margins(target: torch.Tensor, high: torch.Tensor, p_token: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """Each row's distance from u to the nearer edge of its token's interval, on the normalised bar (float64:
    the bar's own precision; target = u * total)."""
    high = high.double()
    low = high - p_token.double()
    return torch.minimum(target - low, high - target).clamp(min=0) / total


def _logit_gaps(logits: torch.Tensor, greedy: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """The raw logits' top two apart, for the greedy rows (0 for the others: not read); `window`: their ranking
    (its first two are the top two)."""
    gaps = torch.zeros(logits.shape[0], dtype=torch.float64, device=logits.device)
    if bool(greedy.any()) and logits.shape[-1] > 1:
        rows = greedy.nonzero().view(-1)
        top = (logits[rows].gather(1, window[rows, :2]) if window.shape[-1] >= 2
               else logits[rows].topk(2, dim=-1).values).double()
        gaps[rows] = top[:, 0] - top[:, 1]
    return gaps


def _read_bar(final, window: torch.Tensor, inside: torch.Tensor, target: torch.Tensor, total: torch.Tensor,
              rows: torch.Tensor | None = None, tail=True):
    """Where each row's target (R, 1) lands on the cumulative bar of the final distribution, of mass `total` (R,),
    laid out as `window`'s tokens (R, W) (their probabilities `inside`, float64), then the rest in id order.
    `rows`: the rows of `final` these are (all by default). Returns (tokens, the upper end of each token's
    interval, its probability on the bar, its position on the bar, whether it lies beyond the window), each (R,). tail=False leaves the
    token and interval of a row that lands beyond the window unread (its caller reads that row again)."""
    cum_inside = inside.cumsum(dim=-1)
    rest_mass = (total - cum_inside[:, -1]).clamp(min=0)
    position = torch.searchsorted(cum_inside, target, right=True).squeeze(1)  # W = beyond the window
    # past the window's end with nothing left beyond it (round-off): the last token that has mass
    position = torch.where((position >= window.shape[-1]) & (rest_mass <= 0), (inside > 0).sum(dim=-1) - 1, position)
    beyond = position >= window.shape[-1]
    last = position.clamp(max=window.shape[-1] - 1).unsqueeze(1)
    tokens = window.gather(1, last).squeeze(1)
    high = cum_inside.gather(1, last).squeeze(1)
    mass = inside.gather(1, last).squeeze(1)
    if tail and bool(beyond.any()):
        r = beyond.nonzero().view(-1)  # only these rows lay out their tail
        probs = final.probs_of(r if rows is None else rows[r])
        rest = probs.scatter(1, window[r], 0.0).double()  # the tail, in id order
        cum_rest = cum_inside[r, -1:] + rest.cumsum(dim=-1)
        in_rest = torch.searchsorted(cum_rest, target[r], right=True).squeeze(1).clamp(max=probs.shape[-1] - 1)
        tokens = tokens.index_copy(0, r, in_rest)
        high = high.index_copy(0, r, cum_rest.gather(1, in_rest.unsqueeze(1)).squeeze(1))
        mass = mass.index_copy(0, r, rest.gather(1, in_rest.unsqueeze(1)).squeeze(1))
    return tokens, high, mass, position, beyond


def rank_of(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """0-based rank of each row's token under the raw logits (ties ranked by lower id). (B,)"""
    value = logits.gather(1, tokens.unsqueeze(1))
    ids = torch.arange(logits.shape[-1], device=logits.device)
    ahead = (logits > value) | ((logits == value) & (ids < tokens.unsqueeze(1)))
    return ahead.sum(dim=-1)


def make_generator(seed: int, device="cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


__all__ = ["draw", "draw_at", "make_generator", "rank_of", "u_at"]
