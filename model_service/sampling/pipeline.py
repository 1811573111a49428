"""The sampling pipeline: one row of logits in, every intermediate distribution out, one token drawn.

Pipeline order, per `SamplingSettings.order` (the only place it is written down):

    "hf"        raw -> logit_bias -> penalties -> temperature -> top_k -> top_p -> min_p -> final
                (Hugging Face generate(); the lesson's order)
    "vllm"      raw -> logit_bias -> penalties -> temperature -> min_p -> top_k -> top_p -> final   (vLLM v1)
    "llama.cpp" raw -> logit_bias -> penalties -> top_k -> top_p -> min_p -> temperature -> final
                (llama.cpp: cut at T=1, then reshape)

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

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..records.settings import ORDERS, SamplingSettings, fresh_seed, stage_names
from . import penalties, transforms
from . import window as ranking
from .distribution import Distribution, Merged, one_hot
from .draw import draw, make_generator
from .penalties import Context

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


def _adjusted(x: torch.Tensor, settings, contexts, order: str, capture: bool):
    """The bias and penalties stages of one order group: (adjusted logits, {stage: its logits or None when it
    changed nothing})."""
    z, changed = x, {}
    extra = penalties.bias(settings, x.shape[-1], x.device)
    if extra is not None:
        z = z + extra
    changed["logit_bias"] = z if extra is not None else None
    counted = penalties.counted(settings, contexts, order, x.shape[-1], x.device)
    if counted is not None:
        z = penalties.penalise(z, settings, *counted, order)
    changed["penalties"] = z if counted is not None else None
    return z, changed


def _run_order(x: torch.Tensor, settings, contexts, order: str, capture: bool, widths, window=None) -> Stages:
    """Apply one order's chain to rows that all use it. capture: measure each stage's entropy with its normaliser
    (a step whose records carry the stages). `widths`: the rankings a cut beyond the window may ask for; window:
    x's ranking to widths[0], if made already (the batch's, when no row adjusts its logits)."""
    params = BatchParams.from_settings(settings, x.device)
    y, changed = _adjusted(x, settings, contexts, order, capture)
    adjusted = y is not x
    window = ranking.ranked_window(y, widths[0]) if adjusted or window is None else window
    raw_window = ranking.ranked_window(x, widths[0]) if adjusted else None
    z, alive = y, None
    dist = Distribution(x, None, window if raw_window is None else raw_window, entropy=capture)
    dists = {"raw": dist}
    for name in ORDERS[order]:
        if name in changed:
            if changed[name] is not None:
                dist = Distribution(changed[name], None, window, entropy=capture)
        elif name == "temperature":
            if bool((params.temperature != 1).any()):
                z = transforms.temperature(z, params.temperature)
                dist = Distribution(z, alive, window, entropy=capture)
        else:
            knob = getattr(params, name)
            # a knob that is off in every row removes nothing: skip its pass over the vocabulary
            off = bool((knob == (1 if name == "top_p" else 0)).all())
            removed = None if off else ranking.cut(name, z, knob, window, y, widths, dist.lse)
            if removed is not None and bool(removed.any()):
                z = z.masked_fill(removed, float("-inf"))
                alive = ~removed if alive is None else alive & ~removed
                dist = Distribution(z, alive, window, entropy=capture)
        dists[name] = dist
    if bool(params.greedy.any()):
        # Greedy = argmax of the adjusted logits, all its mass on one token
        dist = _greedy_rows(dist, params.greedy, y, window, capture)
    dists["final"] = dist
    return Stages(logits=y, window=window, names=stage_names(order), dists=dists, raw=x, raw_window=raw_window)


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
    orders = [s.order for s in settings]
    if len(set(orders)) == 1:
        return _run_order(x, settings, contexts, orders[0], capture, widths)
    # the batch's ranking once, for the groups whose logits nothing adjusts (the others rank their own)
    plain = not any(s.logit_bias or s.penalised for s in settings)
    window = ranking.ranked_window(x, widths[0]) if plain else None
    groups = []
    for order in dict.fromkeys(orders):
        picked = [i for i, o in enumerate(orders) if o == order]
        rows = torch.tensor(picked, device=x.device)
        groups.append((rows, _run_order(x.index_select(0, rows), [settings[i] for i in picked],
                                        None if contexts is None else [contexts[i] for i in picked], order, capture,
                                        widths, None if window is None else window.index_select(0, rows))))
    return _merge(groups, x, stage_names("hf"))


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
    for i, n in enumerate(names):
        before = names[i - 1] if i else None
        if before and all(st.dists[n] is st.dists[before] for _, st in parts):
            dists[n] = dists[before]
            continue
        dists[n] = Merged([(rows, st.dists[n]) for rows, st in parts], window)
    return Stages(logits=logits, window=window, names=tuple(names), dists=dists, raw=x, raw_window=raw_window)


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

    logits: (V,) or (B, V); settings: one SamplingSettings or one per row; context: what the penalties count, one
    (prompt ids, generated ids) for (V,) logits, one per row for (B, V) (None: nothing yet). Each probability
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
