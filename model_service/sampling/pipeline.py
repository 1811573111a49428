"""The sampling pipeline: one row of logits in, every intermediate distribution out, one token drawn.

Pipeline order, per `SamplingSettings.order` (the only place it is written down):

    "hf"        raw -> temperature -> top_k -> top_p -> min_p -> final   (Hugging Face generate(); the lesson's order)
    "vllm"      raw -> temperature -> min_p -> top_k -> top_p -> final   (vLLM v1 sampler)
    "llama.cpp" raw -> top_k -> top_p -> min_p -> temperature -> final   (llama.cpp: cut at T=1, then reshape)

Every stage's distribution is softmax of the logits that survive so far ("removed" = -inf), so each one
is already renormalised. "final" is the distribution the token is drawn from: the last transform's
distribution, or one-hot on the argmax of the raw logits for a greedy row (temperature 0; in vLLM
order also any T < 1e-5). A transform that is off still appears, equal to the stage before it.
The exact semantics (ties, greedy, clamps, the draw) are in docs/sampling.md; transformers' logits warpers are
the oracle for the "hf" order.

Every transform keeps or drops a tail of the ranking and temperature (T > 0) is monotone, so the
ranking of surviving tokens never changes: the top-N of every stage are the raw top-N, and a cut needs
the ranking only as far as the cut. Rows are ranked to WINDOW // 4 first; a row whose cut falls further
is ranked again, wider (WINDOW, then 4 x WINDOW, then the whole vocabulary), on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..records.settings import ORDERS, SamplingSettings, fresh_seed, stage_names
from ..records.step import DrawInfo

__all__ = ["ORDERS", "SamplingSettings", "stage_names", "pipeline", "run_stages", "draw", "sample"]

@dataclass(frozen=True)
class BatchParams:
    """Per-row settings as the sampler receives them: one tensor per knob, shape (B,)."""

    temperature: torch.Tensor  # float32, effective divisor (1 for greedy rows)
    top_k: torch.Tensor  # int64, 0 = off
    top_p: torch.Tensor  # float32, 1 = off
    min_p: torch.Tensor  # float32, 0 = off
    greedy: torch.Tensor  # bool

    @classmethod
    def from_settings(cls, settings: Sequence[SamplingSettings], device) -> BatchParams:
        return cls(
            temperature=torch.tensor([s.effective_temperature for s in settings], dtype=torch.float32, device=device),
            top_k=torch.tensor([s.top_k for s in settings], dtype=torch.int64, device=device),
            top_p=torch.tensor([s.top_p for s in settings], dtype=torch.float32, device=device),
            min_p=torch.tensor([s.min_p for s in settings], dtype=torch.float32, device=device),
            greedy=torch.tensor([s.greedy for s in settings], dtype=torch.bool, device=device),
        )

    def to_dict(self) -> dict:
        return {name: getattr(self, name).tolist() for name in ("temperature", "top_k", "top_p", "min_p", "greedy")}


# --- the transforms. Each works on full (B, V) rows in vocabulary order; the ranking is needed only
# to find a cut, and it is read from `window`: the W best token ids per row, most probable first. ---

WINDOW = 1024  # the draw's bar starts with this many tokens, most probable first (docs/sampling.md)
# Most rows' cuts and draws fall within their first few hundred tokens, and ranking 49k logits to 256 costs a
# quarter of ranking them to 1,024 (16 rows: 2.9 vs 10.7 ms on this repo's 2-core CPU). So rows are ranked
# to WINDOW // 4 first, and only a row that needs more is ranked again: to WINDOW, 4 x WINDOW, then fully.


def _widths(vocab: int, least: int) -> list[int]:
    """The ranking widths tried in turn, narrowest first, never below `least` (the summaries' top-N)."""
    tiers = [max(WINDOW // 4, least, 1), WINDOW, 4 * WINDOW, vocab]
    return sorted({min(w, vocab) for w in tiers if w >= tiers[0]})


def _remove_top_k(z: torch.Tensor, k: torch.Tensor, window: torch.Tensor):
    """Remove logits below the k-th largest; ties with it are kept. Also returns the rows whose k-th
    token lies beyond the window (B,), for which the mask is not yet right."""
    vocab, width = z.shape[-1], window.shape[-1]
    active = (k > 0) & (k < vocab)
    kth = z.gather(1, window).gather(1, (k.clamp(1, width) - 1).unsqueeze(1))  # (B, 1)
    return (z < kth) & active.unsqueeze(1), active & (k > width)


def _remove_top_p(z: torch.Tensor, p: torch.Tensor, window: torch.Tensor):
    """HF/vLLM top-p: with tokens sorted ascending, remove those whose cumulative probability is
    <= 1 - p; the token that crosses p and the most probable token always stay. Also returns the rows
    whose cut lies beyond the window (B,), for which the mask is not yet right.

    The ascending cumsum at a window token = the mass beyond the window + the window's suffix sum.
    When the mass beyond the window is itself <= 1 - p, every token out there is removed."""
    vocab, width = z.shape[-1], window.shape[-1]
    active = p < 1
    probs = z.softmax(dim=-1)
    inside = probs.gather(1, window)  # (B, W), descending
    beyond = (probs.sum(dim=-1) - inside.sum(dim=-1)).clamp(min=0) if width < vocab else torch.zeros_like(p)
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


def _remove_min_p(z: torch.Tensor, m: torch.Tensor, window: torch.Tensor):
    """Remove tokens whose probability is below m times the top token's (no ranking needed)."""
    probs = z.softmax(dim=-1)
    return (probs < m.unsqueeze(1) * probs.amax(dim=-1, keepdim=True)) & (m > 0).unsqueeze(1), None


def _cut(name: str, z: torch.Tensor, knob: torch.Tensor, window: torch.Tensor, x: torch.Tensor, widths) -> torch.Tensor:
    """The tokens `name` removes (B, V). A row whose cut falls beyond the window is cut again on its own,
    on its raw logits `x` ranked to the next of `widths`, until the ranking reaches its cut (only such a row
    pays for a wider ranking: one flat row used to make a 16-row batch sort the whole vocabulary)."""
    removed, beyond = _REMOVERS[name](z, knob, window)
    if beyond is not None and window.shape[-1] < z.shape[-1] and bool(beyond.any()):
        rows = beyond.nonzero().view(-1)
        wider = _ranked_window(x[rows], next(w for w in widths if w > window.shape[-1]))
        removed[rows] = _cut(name, z[rows], knob[rows], wider, x[rows], widths)
    return removed


_REMOVERS = {"top_k": _remove_top_k, "top_p": _remove_top_p, "min_p": _remove_min_p}


@dataclass
class Stages:
    """The pipeline's result (internal: tensors never leave model_service).

    logits: (B, V) raw float32 logits; window: (B, W) best token ids, most probable first (W >= the
    top-N any summary asks for); per stage name, probs (B, V) and the surviving mask (B, V), both in
    vocabulary order. A stage that changed nothing shares its predecessor's tensors.
    """

    logits: torch.Tensor
    window: torch.Tensor
    names: tuple[str, ...]
    probs: dict[str, torch.Tensor]
    kept: dict[str, torch.Tensor]
    _bar: torch.Tensor | None = None

    @property
    def bar(self) -> torch.Tensor:
        """(B, min(WINDOW, V)) the ids the draw's cumulative bar lays out first, most probable first; the rest
        follow in id order. Always ranked the same way, to exactly WINDOW, whatever width a row's cut needed:
        a bar cut from a wider ranking can order the tokens tied at its edge otherwise, so a seeded row would
        draw other tokens next to a stranger than alone."""
        if self._bar is None:
            width = min(WINDOW, self.logits.shape[-1])
            same = self.window.shape[-1] == width
            self._bar = self.window if same else _ranked_window(self.logits, width)
        return self._bar


def _run_order(x: torch.Tensor, window: torch.Tensor, params: BatchParams, order: str, capture: bool, widths) -> Stages:
    """Apply one order's chain to rows that all use it. capture=False keeps only "final". `widths`: the
    rankings a cut beyond the window may ask for (_cut)."""
    z = x
    alive = torch.ones_like(x, dtype=torch.bool)
    probs, kept = {}, {}
    last_probs, last_kept = None, alive
    if capture:
        last_probs = probs["raw"] = x.softmax(dim=-1)
        kept["raw"] = alive
    for name in ORDERS[order]:
        if name == "temperature":
            active = bool((params.temperature != 1).any())
            if active:
                z = z / params.temperature.unsqueeze(1)
        else:
            knob = getattr(params, name)
            # a knob that is off in every row removes nothing: skip its pass over the vocabulary
            off = bool((knob == (1 if name == "top_p" else 0)).all())
            removed = None if off else _cut(name, z, knob, window, x, widths)
            active = removed is not None and bool(removed.any())
            if active:
                z = z.masked_fill(removed, float("-inf"))
                alive = alive & ~removed
        if capture:
            if active or last_probs is None:
                last_probs, last_kept = z.softmax(dim=-1), alive
            probs[name], kept[name] = last_probs, last_kept
    final = last_probs if capture else z.softmax(dim=-1)
    if params.greedy.any():
        # Greedy = argmax of the raw logits; argmax returns the first maximum, the lowest id among ties.
        one_hot = torch.zeros_like(final).scatter_(1, x.argmax(dim=-1, keepdim=True), 1.0)
        g = params.greedy.unsqueeze(1)
        final, alive = torch.where(g, one_hot, final), torch.where(g, one_hot.bool(), alive)
    probs["final"], kept["final"] = final, alive
    return Stages(logits=x, window=window, names=stage_names(order), probs=probs, kept=kept)


def _ranked_window(x: torch.Tensor, width: int) -> torch.Tensor:
    """The `width` best token ids per row, most probable first, ties ranked by lower id."""
    if width >= x.shape[-1]:
        return x.sort(dim=-1, descending=True, stable=True).indices
    values, ids = torch.topk(x, width, dim=-1)
    ids, by_id = ids.sort(dim=-1)
    _, by_value = values.gather(1, by_id).sort(dim=-1, descending=True, stable=True)
    return ids.gather(1, by_value)


def run_stages(
    logits: torch.Tensor, settings: Sequence[SamplingSettings], capture: bool = True, min_window: int = 0
) -> Stages:
    """All stages for a (B, V) batch. Rows are grouped by order (at most three groups); within a
    group every knob is a (B,) tensor, so there is no loop over rows. A row whose cut falls beyond
    the window is ranked wider for that cut alone (_cut). With mixed orders the stage dict uses HF's names;
    each row's own chain is its settings.order."""
    x = logits.float()
    vocab = x.shape[-1]
    # The window is where top-k / top-p find their cut and where the draw reads first. Greedy rows with
    # neither need only the top-N the summaries show: a top-20 costs a fraction of a top-256.
    ranked = any(not s.greedy or s.top_k > 0 or s.top_p < 1 for s in settings)
    widths = _widths(vocab, min_window) if ranked else [min(vocab, max(min_window, 1)), vocab]
    window = _ranked_window(x, widths[0])
    orders = [s.order for s in settings]

    def run(rows_x, rows_window, rows_settings, order):
        return _run_order(rows_x, rows_window, BatchParams.from_settings(rows_settings, x.device), order, capture, widths)

    if len(set(orders)) == 1:
        return run(x, window, settings, orders[0])
    groups = []
    for order in dict.fromkeys(orders):
        rows = torch.tensor([i for i, o in enumerate(orders) if o == order], device=x.device)
        groups.append((rows, run(x[rows], window[rows], [settings[i] for i in rows.tolist()], order)))
    return _merge(groups, x, window, stage_names("hf") if capture else ("final",))


def _merge(parts: list[tuple[torch.Tensor, Stages]], x: torch.Tensor, window: torch.Tensor, names) -> Stages:
    """Stages of groups of rows (their row indices, their Stages) put back in batch order, under `names`. The
    window is the batch's. A stage that shares the
    previous stage's tensors in every group shares them here too (summarise computes each distinct one once)."""
    keys = [n for n in names if n in parts[0][1].probs]  # capture off: "final" only
    probs, kept = {}, {}
    for i, n in enumerate(keys):
        before = keys[i - 1] if i else None
        if before and all(st.probs[n] is st.probs[before] and st.kept[n] is st.kept[before] for _, st in parts):
            probs[n], kept[n] = probs[before], kept[before]
            continue
        probs[n], kept[n] = torch.empty_like(x), torch.empty_like(x, dtype=torch.bool)
        for rows, st in parts:
            probs[n][rows], kept[n][rows] = st.probs[n], st.kept[n]
    return Stages(logits=x, window=window, names=tuple(names), probs=probs, kept=kept)


def _as_batch(logits: torch.Tensor, settings) -> tuple[torch.Tensor, list[SamplingSettings], bool]:
    single = logits.dim() == 1
    x = logits.unsqueeze(0) if single else logits
    if x.dim() != 2:
        raise ValueError(f"logits must have shape (V,) or (B, V), got {tuple(logits.shape)}")
    rows = [settings] * x.shape[0] if isinstance(settings, SamplingSettings) else list(settings)
    if len(rows) != x.shape[0]:
        raise ValueError(f"got {len(rows)} settings for {x.shape[0]} rows of logits")
    return x, rows, single


def pipeline(logits: torch.Tensor, settings) -> list[tuple[str, torch.Tensor]]:
    """Every stage of the sampling pipeline, in order: [("raw", p), ..., ("final", p)].

    logits: (V,) or (B, V); settings: one SamplingSettings or one per row. Each probability tensor
    has the shape of `logits`, in vocabulary order. The input is never modified.
    """
    x, rows, single = _as_batch(logits, settings)
    stages = run_stages(x, rows)
    return [(name, stages.probs[name][0] if single else stages.probs[name]) for name in stages.names]


def draw(stages: Stages, greedy: Sequence[bool], generators: Sequence[torch.Generator | None]):
    """Draw one token per row from stages.probs["final"] by inverse CDF (the same law as multinomial).

    Layout of the cumulative bar: the bar's WINDOW tokens from most to least probable, then the rest in
    id order; u ~ U[0, 1) picks the token whose interval [low, high) holds it. Each row uses its own
    generator, so a seeded row's draw does not depend on its batch-mates.
    Returns (token_ids (B,) int64, [DrawInfo per row]).
    """
    final = stages.probs["final"]  # (B, V) float32
    # Every row consumes one draw per step, greedy or not, so the generator's state after k steps is
    # the same whatever the settings were: a run continued step by step replays a full run.
    us = [float(torch.rand((), generator=gen, device=gen.device)) for gen in generators]
    us = [None if g else v for g, v in zip(greedy, us)]
    u = torch.tensor([0.0 if v is None else v for v in us], dtype=torch.float64, device=final.device)
    total = final.sum(dim=-1, dtype=torch.float64)
    target = (u * total).unsqueeze(1)  # scaled, so float round-off never runs past the end
    vocab, width = final.shape[-1], min(WINDOW, final.shape[-1])
    greedy_t = torch.tensor(list(greedy), device=final.device)
    # Read on the bar, or first on a narrower window: up to a token whose logit beats the window's edge, the window
    # and the bar hold the same tokens in the same order, so the same sums: the same token. A draw that lands
    # further is read again on the bar, its row alone.
    narrow = stages.window.shape[-1] < width
    window = stages.window if narrow else stages.bar
    tokens, high, position, beyond = _read_bar(final, window, target, total, tail=not narrow)
    edge = stages.logits.gather(1, window[:, -1:]).squeeze(1)
    if narrow:
        value = stages.logits.gather(1, tokens.unsqueeze(1)).squeeze(1)
        again = (beyond | (value <= edge)) & ~greedy_t
        if bool(again.any()):
            rows = again.nonzero().view(-1)
            bar = _ranked_window(stages.logits[rows], width)
            t, h, p, b = _read_bar(final[rows], bar, target[rows], total[rows])
            tokens, high, position, beyond = (tokens.index_copy(0, rows, t), high.index_copy(0, rows, h),
                                              position.index_copy(0, rows, p), beyond.index_copy(0, rows, b))
            edge = edge.index_copy(0, rows, stages.logits[rows].gather(1, bar[:, -1:]).squeeze(1))
    if bool(greedy_t.any()):
        tokens = torch.where(greedy_t, final.argmax(dim=-1), tokens)
        high = torch.where(greedy_t, torch.ones_like(high), high)
    p_token = final.gather(1, tokens.unsqueeze(1)).squeeze(1)
    # A bar token's rank is its position (the bar is the raw ranking, ties by lower id) when its logit beats
    # every token outside the bar; otherwise (drawn beyond it, or tied with its edge) count over the vocabulary.
    value = stages.logits.gather(1, tokens.unsqueeze(1)).squeeze(1)
    exact = greedy_t | (~beyond & (value > edge)) | (width == vocab)
    ranks = torch.where(greedy_t, torch.zeros_like(position), position)
    if not bool(exact.all()):
        ranks = torch.where(exact, ranks, rank_of(stages.logits, tokens))
    draws = [
        DrawInfo(u=v, rank=int(r), low=max(0.0, (h - p) / t), high=min(1.0, h / t))
        for v, r, h, p, t in zip(us, ranks.tolist(), high.tolist(), p_token.tolist(), total.tolist())
    ]
    return tokens, draws


def _read_bar(final: torch.Tensor, window: torch.Tensor, target: torch.Tensor, total: torch.Tensor, tail=True):
    """Where each row's target (B, 1) lands on the cumulative bar of `final` (B, V), of mass `total` (B,), laid
    out as `window`'s tokens (B, W), then the rest in id order. Returns (tokens, the upper end of each token's
    interval, its position on the bar, whether it lies beyond the window), each (B,). tail=False leaves the
    token and interval of a row that lands beyond the window unread (its caller reads that row again)."""
    inside = final.gather(1, window).double()  # (B, W); float64 only where the cumulative bar is read
    cum_inside = inside.cumsum(dim=-1)
    rest_mass = (total - cum_inside[:, -1]).clamp(min=0)
    position = torch.searchsorted(cum_inside, target, right=True).squeeze(1)  # W = beyond the window
    # past the window's end with nothing left beyond it (round-off): the last token that has mass
    position = torch.where((position >= window.shape[-1]) & (rest_mass <= 0), (inside > 0).sum(dim=-1) - 1, position)
    beyond = position >= window.shape[-1]
    last = position.clamp(max=window.shape[-1] - 1).unsqueeze(1)
    tokens = window.gather(1, last).squeeze(1)
    high = cum_inside.gather(1, last).squeeze(1)
    if tail and bool(beyond.any()):
        r = beyond.nonzero().view(-1)  # only these rows lay out their tail
        rest = final[r].scatter(1, window[r], 0.0).double()  # the tail, in id order
        cum_rest = cum_inside[r, -1:] + rest.cumsum(dim=-1)
        in_rest = torch.searchsorted(cum_rest, target[r], right=True).squeeze(1).clamp(max=final.shape[-1] - 1)
        tokens = tokens.index_copy(0, r, in_rest)
        high = high.index_copy(0, r, cum_rest.gather(1, in_rest.unsqueeze(1)).squeeze(1))
    return tokens, high, position, beyond


def rank_of(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """0-based rank of each row's token under the raw logits (ties ranked by lower id). (B,)"""
    value = logits.gather(1, tokens.unsqueeze(1))
    ids = torch.arange(logits.shape[-1], device=logits.device)
    ahead = (logits > value) | ((logits == value) & (ids < tokens.unsqueeze(1)))
    return ahead.sum(dim=-1)


def make_generator(seed: int, device="cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def sample(logits: torch.Tensor, settings, generators=None):
    """Convenience: pipeline + draw for (V,) or (B, V) logits. Returns (token ids (B,), draws).
    Without generators each row gets one seeded from its settings (or fresh randomness)."""
    x, rows, _ = _as_batch(logits, settings)
    if generators is None:
        generators = [make_generator(s.seed if s.seed is not None else fresh_seed()) for s in rows]
    stages = run_stages(x, rows, capture=False)
    return draw(stages, [s.greedy for s in rows], generators)
