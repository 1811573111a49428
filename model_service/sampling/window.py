"""The ranking window: how far each row's logits are ranked, and the cut that ranks a row wider when it needs to.

A transform that keeps a head of the ranking (top-k, top-p) needs the ranking only as far as its cut, and
temperature (T > 0) never changes the ranking of surviving tokens. So rows are ranked to WINDOW // 4 first, and
only a row whose cut falls further is ranked again, on its own: to WINDOW, 4 x WINDOW, then the whole
vocabulary. Ties are ranked by the lower token id, so a row is ranked the same alone or among strangers.

On a CPU whose start loaded the native library (models/native_step.py), float32 rows are ranked by its ntp_rank
(native/rank.h): exactly a stable sort's head, ~15 us a row of 49k logits against torch's 70-140 us (torch's topk
below may take any of the ids tied at the window's edge).
"""

from __future__ import annotations

import torch

from .transforms import REMOVERS

WINDOW = 1024  # the draw's bar starts with this many tokens, most probable first (docs/sampling.md)
# Most rows' cuts and draws fall within their first few hundred tokens, and ranking 49k logits to 256 costs a
# quarter of ranking them to 1,024 (16 rows: 2.9 vs 10.7 ms on this repo's 2-core CPU). So rows are ranked
# to WINDOW // 4 first, and only a row that needs more is ranked again: to WINDOW, 4 x WINDOW, then fully.


def widths(vocab: int, least: int) -> list[int]:
    """The ranking widths tried in turn, narrowest first, never below `least` (the summaries' top-N)."""
    tiers = [max(WINDOW // 4, least, 1), WINDOW, 4 * WINDOW, vocab]
    return sorted({min(w, vocab) for w in tiers if w >= tiers[0]})


_native = None  # the native library's ntp_rank, once a CPU start has loaded it (use_native)


def use_native(rank) -> None:
    """Rank float32 CPU rows with `rank` (the native library's ntp_rank; None: torch's again)."""
    global _native
    _native = rank


def ranked_window(x: torch.Tensor, width: int) -> torch.Tensor:
    """The `width` best token ids per row, most probable first, ties ranked by lower id."""
    if width >= x.shape[-1]:
        return x.sort(dim=-1, descending=True, stable=True).indices
    rank = _native
    if rank is not None and x.dim() == 2 and x.dtype == torch.float32 and x.device.type == "cpu":
        x = x.contiguous()
        ids = torch.empty(x.shape[0], width, dtype=torch.int64)
        if rank(x.data_ptr(), x.shape[0], x.shape[1], width, ids.data_ptr()) == 0:
            return ids
    values, ids = torch.topk(x, width, dim=-1)
    ids, by_id = ids.sort(dim=-1)
    _, by_value = values.gather(1, by_id).sort(dim=-1, descending=True, stable=True)
    return ids.gather(1, by_value)


def cut(name: str, z: torch.Tensor, knob: torch.Tensor, window: torch.Tensor, x: torch.Tensor, widths,
        lse: torch.Tensor | None = None) -> torch.Tensor:
    """The tokens `name` removes (B, V). A row whose cut falls beyond the window is cut again on its own,
    on its raw logits `x` ranked to the next of `widths`, until the ranking reaches its cut (only such a row
    pays for a wider ranking: one flat row used to make a 16-row batch sort the whole vocabulary). lse: the
    log-normaliser of z (B,), if known."""
    removed, beyond = REMOVERS[name](z, knob, window, lse)
    if beyond is not None and window.shape[-1] < z.shape[-1] and bool(beyond.any()):
        rows = beyond.nonzero().view(-1)
        wider = ranked_window(x[rows], next(w for w in widths if w > window.shape[-1]))
        removed[rows] = cut(name, z[rows], knob[rows], wider, x[rows], widths, None if lse is None else lse[rows])
    return removed


__all__ = ["WINDOW", "cut", "ranked_window", "use_native", "widths"]
