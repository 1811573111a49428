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

    def within(self, window: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """(R,) bool: the rows (all, or `rows`) whose survivors all lie in `window` (R, W)."""
        if self.alive is None:
            return torch.full(window.shape[:1], window.shape[-1] >= self.z.shape[-1], device=self.z.device)
        alive, count = (self.alive, self.count) if rows is None else (self.alive[rows], self.count[rows])
        return alive.gather(1, window).sum(dim=-1) == count

    @cached_property
    def _measured(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        top = self.z.gather(1, self.top)
        narrow = self.within(self.window)
        if bool(narrow.all()):
            return _measure(self.z.gather(1, self.window), top, self._entropy)
        if not bool(narrow.any()):
            return _measure(self.z, top, self._entropy)
        # some rows on the window, some over the vocabulary: each on its own
        lse = torch.empty(self.z.shape[0], dtype=self.z.dtype, device=self.z.device)
        h = torch.empty_like(lse) if self._entropy else None
        for rows, wide in ((narrow.nonzero().view(-1), False), ((~narrow).nonzero().view(-1), True)):
            z = self.z[rows] if wide else self.z[rows].gather(1, self.window[rows])
            part_lse, part_h = _measure(z, top[rows], self._entropy)
            lse[rows] = part_lse
            if h is not None:
                h[rows] = part_h
        return lse, h

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

    def at(self, ids: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The probabilities of the tokens `ids` (R, N) of every row, or of `rows` (0 for a removed token)."""
        z, lse = (self.z, self.lse) if rows is None else (self.z[rows], self.lse[rows])
        return (z.gather(1, ids) - lse.unsqueeze(1)).exp()

    @cached_property
    def probs(self) -> torch.Tensor:
        """(B, V) in vocabulary order, for a reader that needs the whole vocabulary."""
        return self.z.softmax(dim=-1)

    def probs_of(self, rows: torch.Tensor) -> torch.Tensor:
        """(R, V) the whole vocabulary's probabilities of a few rows (a draw that lands beyond the window)."""
        if "probs" in self.__dict__:
            return self.probs[rows]
        return self.z[rows].softmax(dim=-1)

    @cached_property
    def kept(self) -> torch.Tensor:
        return torch.ones_like(self.z, dtype=torch.bool) if self.alive is None else self.alive


def _gathered(name: str) -> cached_property:
    """A Merged attribute read from each group's Distribution, put in batch order once."""
    return cached_property(lambda self: self._rows(lambda rows, d: getattr(d, name)))


class Merged:
    """Groups of rows' Distributions (each with its row indices), read as one batch in batch order: a mixed-order
    batch's stage (sampling/pipeline.py:_merge). What is read per row (normalisers, counts, entropies, the
    probabilities of a few tokens) is gathered from the groups; the whole vocabulary (z, kept, probs) is put
    together only for a reader that needs it."""

    def __init__(self, parts: list[tuple[torch.Tensor, Distribution]], window: torch.Tensor):
        self.parts, self.window = parts, window
        self.top = self._gather(lambda rows, d: d.top, window[:, :1])

    def _gather(self, read, like: torch.Tensor) -> torch.Tensor:
        out = torch.empty((self.window.shape[0], *like.shape[1:]), dtype=like.dtype, device=like.device)
        for rows, d in self.parts:
            out.index_copy_(0, rows, read(rows, d))
        return out

    def _rows(self, read) -> torch.Tensor:
        first = read(*self.parts[0])
        return self._gather(read, first)

    lse = _gathered("lse")
    entropy_nats = _gathered("entropy_nats")
    count = _gathered("count")
    z = _gathered("z")  # the whole vocabulary: put together only when read
    kept = _gathered("kept")
    probs = _gathered("probs")

    def at(self, ids: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        if rows is None:
            return self._rows(lambda r, d: d.at(ids.index_select(0, r)))
        return (self.z[rows].gather(1, ids) - self.lse[rows].unsqueeze(1)).exp()

    def within(self, window: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        if rows is None:
            return self._rows(lambda r, d: d.within(window.index_select(0, r)))
        return self.kept[rows].gather(1, window).sum(dim=-1) == self.count[rows]

    def probs_of(self, rows: torch.Tensor) -> torch.Tensor:
        """(R, V) a few rows' probabilities, each from its own group."""
        if "probs" in self.__dict__:
            return self.probs[rows]
        out = torch.empty((len(rows), self.vocab), dtype=self.lse.dtype, device=self.window.device)
        for prows, d in self.parts:
            here = torch.isin(rows, prows)
            if bool(here.any()):
                local = torch.searchsorted(prows, rows[here])  # prows ascend: a row's place in its group
                out[here] = d.probs_of(local)
        return out

    @property
    def vocab(self) -> int:
        return self.parts[0][1].z.shape[-1]


def one_hot(x: torch.Tensor, window: torch.Tensor) -> Distribution:
    """Greedy: all the mass on the raw argmax (argmax returns the first maximum: the lowest id among ties)."""
    top = x.argmax(dim=-1, keepdim=True)
    z = torch.full_like(x, float("-inf")).scatter_(1, top, 0.0)
    return Distribution(z, torch.zeros_like(x, dtype=torch.bool).scatter_(1, top, True), window, top=top)


__all__ = ["Distribution", "Merged", "one_hot"]
