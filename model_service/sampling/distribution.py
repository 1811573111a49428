"""One stage's distribution, measured once and only as far as it is read.

A stage is softmax of its logits `z` (B, V) over the tokens that survive so far (`alive`; -inf elsewhere). Every
transform before it kept a head of the raw ranking and temperature (T > 0) is monotone, so the raw top token is
every stage's most probable one, and a stage whose survivors all lie in the ranking window (sampling/window.py)
is measured on the window alone: its log-normaliser, entropy, top-N and bar are (B, W) sums, not (B, V) ones.
Only a stage that cut nothing (raw, temperature) or kept more than the window pays a pass over the vocabulary:

    d = z - z_top,  e = exp(d),  s = sum e          (one exp over what is read)
    lse = z_top + log s                             the log-normaliser: p(t) = exp(z_t - lse)
    H = log s - sum(e d) / s                        the entropy in nats (two non-negative terms: no cancellation)

and the probabilities of the whole vocabulary (`probs`, a softmax) are made only for a reader that needs them
(the lesson's charts, a draw that lands beyond the window). The kept mass of a cut needs no pass at all: a cut
leaves the survivors' logits as they were, so the mass it keeps is exp(lse_after - lse_before).
"""

from __future__ import annotations

from functools import cached_property

import torch


def _measure(z: torch.Tensor, top: torch.Tensor, entropy: bool):
    """(lse, entropy in nats or None) of softmax over each row of z (R, N), its largest value `top` (R, 1)."""
    d = z - top
    e = d.exp()
    s = e.sum(dim=-1)
    log_s = s.log()
    lse = top.squeeze(1) + log_s
    if not entropy:
        return lse, None
    # removed tokens give e = 0 and d = -inf: their 0 * -inf is nan, and nansum drops it
    return lse, (log_s - (e * d).nansum(dim=-1) / s).clamp_min(0.0)


class Distribution:
    """softmax(z) over `alive` (None: every token), with `window` (B, W) the raw ranking, most probable first."""

    def __init__(self, z: torch.Tensor, alive: torch.Tensor | None, window: torch.Tensor, entropy: bool = True,
                 top: torch.Tensor | None = None):
        """top: each row's most probable token (B, 1); the window's first unless given."""
        self.z, self.alive, self.window = z, alive, window
        self.top = window[:, :1] if top is None else top
        self._entropy = entropy  # measure the entropy in the same pass as the normaliser (a captured step)

    @cached_property
    def count(self) -> torch.Tensor:
        """Survivors per row (B,), int64."""
        if self.alive is None:
            return torch.full(self.z.shape[:1], self.z.shape[-1], dtype=torch.int64, device=self.z.device)
        return torch.count_nonzero(self.alive, dim=-1)

    def within(self, window: torch.Tensor) -> torch.Tensor:
        """(B,) bool: the rows whose survivors all lie in `window` (B, W)."""
        if self.alive is None:
            return torch.full(self.z.shape[:1], window.shape[-1] >= self.z.shape[-1], device=self.z.device)
        return self.alive.gather(1, window).sum(dim=-1) == self.count

    @cached_property
    def _measured(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        top = self.z.gather(1, self.top)
        narrow = self.within(self.window)
        if bool(narrow.all()):
            return _measure(self.z.gather(1, self.window), top, self._entropy)
        if not bool(narrow.any()):
            return _measure(self.z, top, self._entropy)
        lse, h = _measure(self.z, top, self._entropy)  # rare: a batch with some rows on the window, some wide
        rows = narrow.nonzero().view(-1)
        w_lse, w_h = _measure(self.z[rows].gather(1, self.window[rows]), top[rows], self._entropy)
        lse = lse.index_copy(0, rows, w_lse)
        return lse, (h.index_copy(0, rows, w_h) if h is not None else None)

    @property
    def lse(self) -> torch.Tensor:
        """log sum exp of the survivors' logits (B,)."""
        return self._measured[0]

    @property
    def entropy_nats(self) -> torch.Tensor:
        if self._measured[1] is None:
            self._entropy = True
            del self.__dict__["_measured"]
        return self._measured[1]

    def at(self, ids: torch.Tensor) -> torch.Tensor:
        """The probabilities of the tokens `ids` (B, N) (0 for a removed one)."""
        return (self.z.gather(1, ids) - self.lse.unsqueeze(1)).exp()

    @cached_property
    def probs(self) -> torch.Tensor:
        """(B, V) in vocabulary order, for a reader that needs the whole vocabulary."""
        return self.z.softmax(dim=-1)

    @cached_property
    def kept(self) -> torch.Tensor:
        return torch.ones_like(self.z, dtype=torch.bool) if self.alive is None else self.alive


def one_hot(x: torch.Tensor, window: torch.Tensor) -> Distribution:
    """Greedy: all the mass on the raw argmax (argmax returns the first maximum: the lowest id among ties)."""
    top = x.argmax(dim=-1, keepdim=True)
    z = torch.full_like(x, float("-inf")).scatter_(1, top, 0.0)
    return Distribution(z, torch.zeros_like(x, dtype=torch.bool).scatter_(1, top, True), window, top=top)


__all__ = ["Distribution", "one_hot"]
