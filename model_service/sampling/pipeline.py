"""The sampling pipeline: one row of logits in, every intermediate distribution out, one token drawn.

The order of the stages, per `SamplingSettings.order`, is written once, with its picture, in records/knobs.py.

A knob an order's engine does not have is refused for that order (its row's `refused`, records/knobs.py); each
knob's math is in transforms.py, penalties.py and bans.py.

Every stage's distribution is softmax of the logits that survive so far ("removed" = -inf), so each one
is already renormalised. "final" is the distribution the token is drawn from: the last transform's
distribution, or one-hot on the argmax of the adjusted logits (raw + bias + penalties: what every engine's greedy
reads) for a greedy row (temperature 0; in vLLM order also any T < 1e-5). A transform that is off still appears, equal to the stage before it.
The exact semantics (ties, greedy, clamps, the draw) are in docs/sampling.md; transformers' logits warpers are
the oracle for the "hf" order, and reference.py (the same step, plainly) for all three. Each knob's math is in
transforms.py, the ranking window in window.py, the draw in draw.py; this module chains them.

The bias and the penalties (penalties.py) may change any logit, so the ranking is made after them, on the
adjusted logits. Every transform after them keeps or drops a tail of that ranking and temperature (T > 0) is
monotone, so the ranking of surviving tokens never changes, and a cut needs the ranking only as far as the cut.
The candidates a record shows are the raw top-N (`Stages.shown`): what the model proposed, before any adjustment. Rows are ranked to WINDOW // 4 first; a row whose cut falls further
is ranked again, wider (WINDOW, then 4 x WINDOW, then the whole vocabulary), on its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .. import limits
from ..records.knobs import KNOBS as ROWS
from ..records.settings import ADJUSTERS, BANS, GREEDY_EPS, ORDERS, SamplingSettings, fresh_seed, stage_names
from . import bans, penalties, transforms
from . import window as ranking
from .distribution import Distribution, Merged, one_hot
from .draw import draw, make_generator
from .penalties import Context

__all__ = ["ORDERS", "SamplingSettings", "stage_names", "pipeline", "run_stages", "draw", "sample"]

# The knobs a chain reads per row (the rows of knobs.py marked tensor), their dtype and the value that means off
# ("temperature" is the effective divisor).
KNOBS = {k.name: (torch.int64 if k.integer else torch.float32, k.default) for k in ROWS if k.tensor}


@dataclass(frozen=True)
class BatchParams:
    """Per-row settings as the sampler receives them: one tensor per knob (KNOBS), shape (B,), and `greedy`."""

    knobs: dict[str, torch.Tensor]
    greedy: torch.Tensor  # bool
    offs: dict[str, bool] = field(default_factory=dict)  # off() per knob, read once when made

    @classmethod
    def from_settings(cls, settings: Sequence[SamplingSettings], device) -> BatchParams:
        """The batch's knobs as tensors. A run steps with the same settings every step: the same rows' tensors are
        made once and shared (they are never written), not 17 small tensors and 9 reductions a step."""
        return _params_of(tuple(settings), torch.device(device))

    @classmethod
    def _made(cls, settings: Sequence[SamplingSettings], device) -> BatchParams:
        def column(name, dtype):
            values = [s.effective_temperature if name == "temperature" else getattr(s, name) for s in settings]
            return torch.tensor(values, dtype=dtype, device=device)

        knobs = {name: column(name, dtype) for name, (dtype, _) in KNOBS.items()}
        offs = {name: bool((knobs[name] == KNOBS[name][1]).all()) for name in KNOBS}
        return cls(knobs, torch.tensor([s.greedy for s in settings], dtype=torch.bool, device=device), offs)

    def __getattr__(self, name: str) -> torch.Tensor:
        try:
            return self.__dict__["knobs"][name]
        except KeyError:
            raise AttributeError(name) from None

    def off(self, name: str) -> bool:
        """The knob is off in every row: its stage is skipped."""
        return self.offs[name]

    def to_dict(self) -> dict:
        """The lesson's knobs per row, as the Engine tab shows what entered the sampler."""
        return {name: getattr(self, name).tolist() for name in ("temperature", "top_k", "top_p", "min_p", "greedy")}


@functools.lru_cache(maxsize=limits.SAMPLER_PARAMS_CACHED)
def _params_of(settings: tuple[SamplingSettings, ...], device: torch.device) -> BatchParams:
    return BatchParams._made(settings, device)


@dataclass
class Stages:
    """The pipeline's result (internal: tensors never leave model_service).

    logits: (B, V) the float32 logits the ranking and the draw read: raw + bias + penalties (the raw logits
    themselves where nothing adjusts); window: (B, W) their best token ids, most probable first (W >= the
    top-N any summary asks for); raw: the model's own logits, and `shown` their best ids (the candidates a record
    shows), both the same tensors as logits and window where nothing adjusts; per stage name, its Distribution (sampling/distribution.py: the stage's logits, survivors,
    and what is measured of it, on demand). A stage that changed nothing shares its predecessor's Distribution.
    `probs` and `kept` read the whole vocabulary per stage, (B, V) in vocabulary order, made when first read.
    """

    logits: torch.Tensor
    window: torch.Tensor
    names: tuple[str, ...]
    dists: dict[str, Distribution | Merged]
    raw: torch.Tensor | None = None
    raw_window: torch.Tensor | None = None
    applied: dict[str, torch.Tensor] = field(default_factory=dict)  # per stage, a value it computed per row (NaN: none)
    _bar: torch.Tensor | None = None

    def __post_init__(self):
        if self.raw is None:
            self.raw = self.logits

    @property
    def shown(self) -> torch.Tensor:
        """(B, >= N) the raw ranking's best ids: the candidates a record shows."""
        return self.window if self.raw_window is None else self.raw_window

    @property
    def probs(self) -> _Read:
        return _Read(self.dists, "probs")

    @property
    def kept(self) -> _Read:
        return _Read(self.dists, "kept")

    @property
    def bar(self) -> torch.Tensor:
        """(B, min(WINDOW, V)) the ids the draw's cumulative bar lays out first, most probable first; the rest
        follow in id order. Always ranked the same way, to exactly WINDOW, whatever width a row's cut needed:
        a bar cut from a wider ranking can order the tokens tied at its edge otherwise, so a seeded row would
        draw other tokens next to a stranger than alone."""
        if self._bar is None:
            width = min(ranking.WINDOW, self.logits.shape[-1])
            same = self.window.shape[-1] == width
            self._bar = self.window if same else ranking.ranked_window(self.logits, width)
        return self._bar


class _Read(dict):
    """stages.probs / stages.kept: one attribute of each stage's Distribution, computed when a name is read."""

    def __init__(self, dists: dict[str, Distribution], attribute: str):
        super().__init__()
        self._dists, self._attribute = dists, attribute

    def __missing__(self, name: str) -> torch.Tensor:
        return getattr(self._dists[name], self._attribute)

    def __contains__(self, name) -> bool:
        return name in self._dists

    def __iter__(self):
        return iter(self._dists)

    def __len__(self) -> int:
        return len(self._dists)


def _adjusted(x: torch.Tensor, settings, contexts, rule: str, chain: tuple[str, ...]):
    """The bias, penalties, DRY and bans of one group, in its chain's order: (adjusted logits, {stage: its logits
    or None when it changed nothing})."""
    z, changed = x, {}
    for name in (n for n in chain if n in ADJUSTERS):
        if name == "logit_bias":
            out = penalties.biased(z, settings)
        elif name == "penalties":
            counted = penalties.counted(settings, contexts, rule, x.device)
            out = None if counted is None else penalties.penalise(z, settings, counted, rule)
        else:  # dry, no_repeat_ngram, min_tokens
            out = BANS_AND_DRY[name](z, settings, contexts)
        changed[name] = out
        z = z if out is None else out
    return z, changed


BANS_AND_DRY = {"dry": penalties.dry, "no_repeat_ngram": bans.no_repeat_ngram, "min_tokens": bans.min_tokens}


HEAD_CUTS = {"top_k", "top_p", "min_p"}  # a cut of the ranking's tail, made on the ranking window (window.cut)
RANKED_ELSEWHERE = {"typical_p", "xtc"}  # they may remove the top: the ranking is made again after them


def _cut(name: str, z, params: BatchParams, window, y, widths, dist, order: str, chances, mus) -> torch.Tensor | None:
    """The tokens stage `name` removes (B, V), or None where it is off in every row."""
    if name == "mirostat":
        return None if params.off("mirostat") else transforms.mirostat(z, params.mirostat, mus)
    if name in HEAD_CUTS:
        return None if params.off(name) else ranking.cut(name, z, params.knobs[name], window, y, widths, dist.lse)
    if name == "xtc":
        fire = (params.xtc_probability > 0) & (params.xtc_threshold <= 0.5) & (chances <= params.xtc_probability)
        return transforms.xtc(z, params.xtc_probability, params.xtc_threshold, chances,
                              _xtc_ranking(z, params.xtc_threshold, window, dist), dist.lse) if bool(fire.any()) else None
    if params.off(name):
        return None
    if name == "typical_p":
        return transforms.typical_p(z, params.typical_p, "hf" if order == "hf" else "llama.cpp")
    return getattr(transforms, name)(z, params.knobs[name])  # any other cut: the function named as its stage


def _xtc_ranking(z, threshold, window, dist) -> torch.Tensor:
    """The survivors' ranking as far as XTC reads it: the window, or the whole vocabulary for a row whose every
    window token passes the threshold (more may lie beyond)."""
    if window.shape[-1] >= z.shape[-1]:
        return window
    last = (z.gather(1, window[:, -1:]).squeeze(1) - dist.lse).exp()
    if not bool((last >= threshold).any()):
        return window
    return ranking.ranked_window(z, z.shape[-1])


def _temperature(z, params: BatchParams, dist) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(each row's divisor, or None where every row's is 1; the dynamic rows' temperature, NaN elsewhere, or None).
    llama.cpp's dynamic temperature: T_dyn = lo + (hi - lo) (H / log n)^exponent, lo = max(0, T - range),
    hi = T + range, H the entropy of the n survivors; a row with one survivor is left as it is."""
    t = params.temperature
    if params.off("dynatemp_range"):
        return (t if bool((t != 1).any()) else None), None
    dynamic = (params.dynatemp_range > 0) & ~params.greedy & (dist.count > 1)
    low, high = (t - params.dynatemp_range).clamp(min=0), t + params.dynatemp_range
    spread = (dist.entropy_nats / dist.count.clamp(min=2).float().log()).clamp(0, 1) ** params.dynatemp_exponent
    dyn = (low + (high - low) * spread).clamp(min=GREEDY_EPS)
    return torch.where(dynamic, dyn, t), torch.where(dynamic, dyn, torch.full_like(t, float("nan")))


def _mus(settings, rows, device) -> torch.Tensor:
    """Each row's mirostat mu at this step: its context's, else the settings' (a continued run), else 2 tau."""
    def mu(s, r):
        if r is not None and not math.isnan(r.mirostat_mu):
            return r.mirostat_mu
        return s.start_mu

    return torch.tensor([mu(s, rows[i] if rows else None) for i, s in enumerate(settings)], device=device)


def _run_order(x: torch.Tensor, settings, contexts, key: tuple[str, tuple[str, ...]], capture: bool, widths,
               window=None) -> Stages:
    """Apply one chain to rows that all use it: key = (whose arithmetic, the stage names between raw and final).
    capture: measure each stage's entropy with its normaliser (a step whose records carry the stages). `widths`:
    the rankings a cut beyond the window may ask for; window: x's ranking to widths[0], if made already (the
    batch's, when no row adjusts its logits)."""
    order, chain = key
    params = BatchParams.from_settings(settings, x.device)
    rows = [penalties.row_context(c) for c in contexts] if contexts is not None else None
    chances = torch.tensor([r.xtc_chance for r in rows] if rows else [0.0] * len(settings), device=x.device)
    mus = _mus(settings, rows, x.device) if not params.off("mirostat") else None
    y, changed = _adjusted(x, settings, rows, order, chain)
    adjusted = y is not x
    window = ranking.ranked_window(y, widths[0]) if adjusted or window is None else window
    raw_window = ranking.ranked_window(x, widths[0]) if adjusted else None
    z, alive, current = y, None, window  # `current`: the survivors' ranking (made again after typical_p and XTC)
    dist = Distribution(x, None, window if raw_window is None else raw_window, entropy=capture)
    dists, applied = {"raw": dist}, {}
    for name in chain:
        if name in changed:
            if changed[name] is not None:
                if name in BANS:  # a ban leaves -inf logits: from its stage on, the survivors are the finite ones
                    alive = torch.isfinite(changed[name])
                dist = Distribution(changed[name], alive, window, entropy=capture)
        elif name == "temperature":
            divisor, applied["temperature"] = _temperature(z, params, dist)
            if divisor is not None:
                z = transforms.temperature(z, divisor)
                dist = Distribution(z, alive, current, entropy=capture)
        else:
            removed = _cut(name, z, params, current, y, widths, dist, order, chances, mus)
            if name == "xtc" and bool(params.xtc_probability.any()):
                applied["xtc"] = torch.where(params.xtc_probability > 0, chances, float("nan"))
            if name == "mirostat" and mus is not None:
                applied["mirostat"] = torch.where(params.mirostat > 0, mus, float("nan"))
            if removed is not None and bool(removed.any()):
                z = z.masked_fill(removed, float("-inf"))
                alive = ~removed if alive is None else alive & ~removed
                if name in RANKED_ELSEWHERE:
                    current = ranking.ranked_window(z, current.shape[-1])
                dist = Distribution(z, alive, current, entropy=capture)
        dists[name] = dist
    if bool(params.greedy.any()):
        # Greedy = argmax of the adjusted logits, all its mass on one token
        dist = _greedy_rows(dist, params.greedy, y, window, capture)
    dists["final"] = dist
    applied = {name: value for name, value in applied.items() if value is not None}
    return Stages(logits=y, window=window, names=("raw", *chain, "final"), dists=dists, raw=x, raw_window=raw_window,
                  applied=applied)


def _greedy_rows(last: Distribution, greedy: torch.Tensor, x: torch.Tensor, window, capture: bool) -> Distribution:
    """The final distribution: one-hot on the argmax for the greedy rows, the last stage's for the others."""
    hot = one_hot(x, window)
    if bool(greedy.all()):
        return hot
    g = greedy.unsqueeze(1)
    return Distribution(torch.where(g, hot.z, last.z), torch.where(g, hot.alive, last.kept), window, entropy=capture,
                        top=torch.where(g, hot.top, last.top))


def run_stages(
    logits: torch.Tensor, settings: Sequence[SamplingSettings], capture: bool = True, min_window: int = 0,
    contexts: Sequence[Context] | None = None,
) -> Stages:
    """All stages for a (B, V) batch. Rows are grouped by order (at most three groups); within a
    group every knob is a (B,) tensor, so there is no loop over rows. A row whose cut falls beyond
    the window is ranked wider for that cut alone (window.cut). With mixed orders the stage dict uses HF's names;
    each row's own chain is its settings.order. contexts: per row (prompt ids, generated ids), what the penalties
    count (None: an empty context)."""
    x = logits.float()
    vocab = x.shape[-1]
    # The window is where top-k / top-p find their cut and where the draw reads first. Greedy rows with
    # neither need only the top-N the summaries show: a top-20 costs a fraction of a top-256.
    ranked = any(not s.greedy or s.top_k > 0 or s.top_p < 1 for s in settings)
    widths = ranking.widths(vocab, min_window) if ranked else [min(vocab, max(min_window, 1)), vocab]
    keys = [(s.rule, s.stages[1:-1]) for s in settings]  # rows of one key run one vectorised chain
    if len(set(keys)) == 1:
        return _run_order(x, settings, contexts, keys[0], capture, widths)
    # the batch's ranking once, for the groups whose logits nothing adjusts (the others rank their own)
    plain = not any(s.logit_bias or s.penalised or s.dry or s.bans for s in settings)
    window = ranking.ranked_window(x, widths[0]) if plain else None
    groups = []
    for key in dict.fromkeys(keys):
        picked = [i for i, k in enumerate(keys) if k == key]
        rows = torch.tensor(picked, device=x.device)
        groups.append((rows, _run_order(x.index_select(0, rows), [settings[i] for i in picked],
                                        None if contexts is None else [contexts[i] for i in picked], key, capture,
                                        widths, None if window is None else window.index_select(0, rows))))
    return _merge(groups, x, ("raw", *dict.fromkeys(n for _, chain in dict.fromkeys(keys) for n in chain), "final"))


def _in_batch_order(parts: list[tuple[torch.Tensor, Stages]], read) -> torch.Tensor:
    """One tensor of every group's rows (read(stages)), put back in batch order."""
    first = read(parts[0][1])
    out = torch.empty((sum(len(rows) for rows, _ in parts), *first.shape[1:]), dtype=first.dtype, device=first.device)
    for rows, st in parts:
        out.index_copy_(0, rows, read(st))
    return out


def _merge(parts: list[tuple[torch.Tensor, Stages]], x: torch.Tensor, names) -> Stages:
    """Stages of groups of rows (their row indices, their Stages) put back in batch order, under `names`. A stage
    that shares the previous stage's Distribution in every group shares it here too; any other is read through its
    groups (distribution.Merged)."""
    window = _in_batch_order(parts, lambda st: st.window)
    adjusted = any(st.logits is not st.raw for _, st in parts)
    logits = _in_batch_order(parts, lambda st: st.logits) if adjusted else x
    raw_window = _in_batch_order(parts, lambda st: st.shown) if adjusted else None
    dists: dict[str, Distribution | Merged] = {}
    # a group whose chain lacks a stage lends it its stage before (none of its rows reads it)
    lent = [{n: st.dists[n] for n in names if n in st.dists} for _, st in parts]
    for own in lent:
        for i, n in enumerate(names):
            own.setdefault(n, own[names[i - 1]])
    for i, n in enumerate(names):
        before = names[i - 1] if i else None
        if before and all(own[n] is own[before] for own in lent):
            dists[n] = dists[before]
            continue
        dists[n] = Merged([(rows, own[n]) for (rows, _), own in zip(parts, lent, strict=True)], window)
    applied = {n: _in_batch_order(parts, lambda st, n=n: st.applied.get(n, torch.full(st.logits.shape[:1], float("nan"),
                                                                                          device=x.device)))
               for n in {n for _, st in parts for n in st.applied}}
    return Stages(logits=logits, window=window, names=tuple(names), dists=dists, raw=x, raw_window=raw_window,
                  applied=applied)


def _as_batch(logits: torch.Tensor, settings) -> tuple[torch.Tensor, list[SamplingSettings], bool]:
    single = logits.dim() == 1
    x = logits.unsqueeze(0) if single else logits
    if x.dim() != 2:
        raise ValueError(f"logits must have shape (V,) or (B, V), got {tuple(logits.shape)}")
    rows = [settings] * x.shape[0] if isinstance(settings, SamplingSettings) else list(settings)
    if len(rows) != x.shape[0]:
        raise ValueError(f"got {len(rows)} settings for {x.shape[0]} rows of logits")
    return x, rows, single


def pipeline(logits: torch.Tensor, settings, context=None) -> list[tuple[str, torch.Tensor]]:
    """Every stage of the sampling pipeline, in order: [("raw", p), ..., ("final", p)].

    logits: (V,) or (B, V); settings: one SamplingSettings or one per row; context: what the penalties, DRY and
    the bans read, one for (V,) logits, one per row for (B, V) (None: nothing yet): the token ids so far (read as
    generated), (prompt ids, generated ids) where the engine's rule tells them apart (vLLM's frequency and presence
    count generated tokens only), or a RowContext (penalties.py; min_tokens needs its stop_ids). Each probability
    tensor has the shape of `logits`, in vocabulary order. The input is never modified.
    """
    x, rows, single = _as_batch(logits, settings)
    stages = run_stages(x, rows, contexts=[context] if single and context is not None else context)
    return [(name, stages.probs[name][0] if single else stages.probs[name]) for name in stages.names]


def sample(logits: torch.Tensor, settings, generators=None, context=None):
    """Convenience: pipeline + draw for (V,) or (B, V) logits. Returns (token ids (B,), draws).
    Without generators each row gets one seeded from its settings (or fresh randomness). context: as pipeline's."""
    x, rows, single = _as_batch(logits, settings)
    if generators is None:
        generators = [make_generator(s.seed if s.seed is not None else fresh_seed()) for s in rows]
    stages = run_stages(x, rows, capture=False, contexts=[context] if single and context is not None else context)
    return draw(stages, [s.greedy for s in rows], generators)
