"""Why the same seed can give another token in a busy room, measured on the loaded model (a BatchEffect record).

A seeded row draws with its own generator, so its u at a step never depends on the room. Its logits can: float32
sums are not associative, and a forward pass's kernels pick their reduction order by the shapes they get (one row
or sixteen, padded or not, engine/invariant.py). This module computes one step of a run four times:

    alone      the run's context, then this step's token, as the only row (a room of one)
    in a room  the same, joined mid-flight into a room of strangers that have already decoded a few steps, so
               this step is one row of a padded batch of `rows`, exactly as the room's scheduler runs it

each in the default arithmetic and in the batch-invariant mode, and reads the run's own u on each result's
cumulative bar. Where the default arithmetic moved an edge of the chosen token's interval past u, the room draws
the neighbour; in the batch-invariant mode the two logit vectors are bit-identical and it never can.

The context's cache comes from one prefill (as a prompt's does); the step compared is a decode step, alone and
batched. The model is left exactly as it was: made switchable for the invariant half only, under the caller's lock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence

import torch

from .. import limits
from ..engine import invariant
from ..engine.runner import Decoder
from ..models import native_step
from ..records.batch_effect import ArithmeticCheck, BatchEffect
from ..records.settings import SamplingSettings
from ..records.step import Token, r6
from ..sampling.draw import draw_at, side_chance, u_at
from ..sampling.penalties import RowContext
from ..sampling.pipeline import run_stages

# What the strangers were writing when this row joined them: texts of different lengths, so the room is padded.
STRANGERS = (
    "Once upon a time",
    "The best way to learn is",
    "def fibonacci(n):",
    "Dear diary, today I",
    "The three primary colours are",
    "In 1969, astronauts",
    "Xin chào các bạn",
    "Pancakes need flour, eggs,",
    "The mitochondria is",
    "Roses are red,",
    "To make tea, first",
    "The quick brown fox",
    "My favourite book is",
    "Breaking news:",
    "1, 2, 3,",
)
JOINED_AFTER = 1  # the strangers' decode steps before this row joins them


def _alone(model, pad_id: int, ids: list[int]) -> torch.Tensor:
    """The step's logits (V,) with this row alone: its context prefilled, then the step's token decoded."""
    decoder = Decoder(model, pad_id)
    if len(ids) == 1:  # nothing before the step's token: the prefill is the step
        return decoder.prefill([ids])[0]
    decoder.prefill([ids[:-1]])
    return decoder.step([ids[-1]])[0]


def _in_room(model, pad_id: int, ids: list[int], strangers: list[list[int]]) -> torch.Tensor:
    """The step's logits (V,) as the last row of a room: the strangers prefill together (left-padded), decode
    JOINED_AFTER steps, this row joins with its context, and the step runs as one decode step of them all."""
    room = Decoder(model, pad_id)
    if len(ids) == 1:
        return room.prefill([*strangers, ids])[-1]
    logits = room.prefill(strangers)
    for _ in range(JOINED_AFTER):
        logits = room.step(logits.argmax(dim=-1).tolist())
    joiner = Decoder(model, pad_id)
    joiner.prefill([ids[:-1]])
    room.join(joiner)
    return room.step([*logits.argmax(dim=-1).tolist(), ids[-1]])[-1]


def _check(alone: torch.Tensor, room: torch.Tensor, settings: SamplingSettings, u: float | None,
           candidates: torch.Tensor, pieces: Callable[[int], Token], on: bool, context) -> ArithmeticCheck:
    """Compare the two logit vectors and read u on each one's bar. context: (prompt ids, generated ids)."""
    stages = run_stages(torch.stack([alone, room]), [settings, settings], capture=False, contexts=[context, context])
    tokens, draws = draw_at(stages, [u, u])
    delta = (room - alone).abs()
    max_delta = float(delta.max())
    # what can move u's token: the change on the bar's tokens (those the filters kept, alone); where the largest
    # such change lands, the most probable token among those that share it (the top one when there is none)
    on_bar = delta.masked_fill(stages.probs["final"][0] <= 0, -1.0)
    bar_delta = float(on_bar.max())
    tied = on_bar == bar_delta
    where = int(candidates[0]) if bar_delta <= 0 else int(tied.nonzero()[:, 0][alone[tied].argmax()])
    low, high = _interval(stages, where)
    shift = max(abs(a - b) for a, b in zip(_interval(stages, int(tokens[0])), _interval(stages, int(tokens[0]), row=1)))
    return ArithmeticCheck(
        batch_invariant=on, max_delta=float(f"{max_delta:.6g}"), changed=int((delta > 0).sum()),
        bar_delta=float(f"{max(bar_delta, 0.0):.6g}"),
        delta_token=pieces(where), delta_rank=int((alone > alone[where]).sum()), delta_low=r6(low), delta_high=r6(high),
        alone=pieces(int(tokens[0])), alone_draw=draws[0], room=pieces(int(tokens[1])), room_draw=draws[1],
        edge_shift=float(f"{shift:.6g}"), deltas=tuple(float(f"{d:.6g}") for d in (room - alone)[candidates].tolist()),
    )


def _interval(stages, token: int, row: int = 0) -> tuple[float, float]:
    """A token's interval [low, high) on a row's cumulative bar (the bar's tokens first, most probable first, then
    the rest in id order: sampling/draw.py), in float64 as the draw reads it."""
    final = stages.probs["final"][row].double()
    order = stages.bar[row]
    if not bool((order == token).any()):  # beyond the bar: the rest follows in id order
        rest = torch.ones_like(final, dtype=torch.bool)
        rest[order] = False
        order = torch.cat([order, rest.nonzero().view(-1)])
    place = int((order == token).nonzero()[0, 0])
    before = float(final[order[:place]].sum())
    total = float(final.sum())
    return before / total, (before + float(final[token])) / total


def batch_effect(model, pad_id: int, pieces: Callable[[int], Token], ids: Sequence[int], settings: SamplingSettings,
                 step: int, seed: int, strangers: Sequence[Sequence[int]], room_invariant: bool,
                 top_n: int = limits.DEFAULT_TOP_N, breakers: frozenset = frozenset(),
                 stop_ids: frozenset = frozenset(), *, room_native: bool = False) -> BatchEffect:
    """The step whose context is `ids` (prompt + the tokens generated before it), drawn with the u that a run
    seeded `seed` reads at `step`, alone and in a room of len(strangers) + 1 rows, in both arithmetics.
    The caller holds the model's lock (no other forward pass may see it made switchable). breakers: DRY's breaker
    token ids (LoadedModel.breakers); stop_ids: the end tokens min_tokens holds back; mirostat's mu at `step` is
    the settings' (the run's record before it)."""
    ids, strangers = list(ids), [list(s) for s in strangers]
    # what the penalties count (prompt, generated) and the chance XTC drew at this step
    context = RowContext(ids[: len(ids) - step], ids[len(ids) - step:], side_chance(seed, step), breakers,
                         stop_ids=stop_ids)
    u = None if settings.greedy else u_at(seed, step, model.device)
    started = time.perf_counter()
    with torch.inference_mode():
        checks, candidates = {}, None
        reason = invariant.unsupported(model)  # None for a model already made switchable
        for on in (False, True):
            if on and reason:
                continue
            # the default half runs transformers' kernels, the arithmetic engines run (a plain model stays plain);
            # a room on the native CPU step is batch-invariant by construction (room_native says so)
            with invariant.switchable(model) if on else contextlib.nullcontext(), invariant.mode(on), native_step.off():
                alone, room = _alone(model, pad_id, ids), _in_room(model, pad_id, ids, strangers)
            if candidates is None:
                candidates = alone.topk(min(top_n, alone.shape[-1])).indices
                final = run_stages(alone[None], [settings], capture=False, contexts=[context]).probs["final"][0]
                probs = tuple(r6(p) for p in final[candidates].tolist())
            checks[on] = _check(alone, room, settings, u, candidates, pieces, on, context)
    return BatchEffect(
        step=step, seed=seed, u=u, rows=len(strangers) + 1, joined_after=JOINED_AFTER,
        candidates=tuple(pieces(int(i)) for i in candidates), probs=probs, default=checks[False],
        invariant=checks.get(True), invariant_unavailable=reason or "", room_invariant=room_invariant,
        room_native=room_native and not room_invariant,
        forward_ms=round((time.perf_counter() - started) * 1000, 1),
    )


__all__ = ["JOINED_AFTER", "STRANGERS", "batch_effect"]
