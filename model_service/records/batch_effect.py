"""Why the same seed can give another token in a busy room, as records (forward_pass/batch_effect.py measures it).

One step of a run is computed twice in each arithmetic: alone (a room of one) and as one row of a room of
strangers decoding together. The two logit vectors are compared (how far apart, and where), and the run's own u is
read on each one's cumulative bar: the token drawn alone, the token drawn in the room, and how far u sat from the
edge of its token's interval. Small, frozen, JSON-able and free of torch, like every record.
"""

from __future__ import annotations

from dataclasses import dataclass

from .step import DrawInfo, Token
from .trace import _Record


@dataclass(frozen=True)
class ArithmeticCheck(_Record):
    """One arithmetic (the default, or batch-invariant): the step alone and in the room."""

    batch_invariant: bool
    max_delta: float  # max over the vocabulary of |logit in the room - logit alone|
    changed: int  # how many of the vocabulary's logits differ at all (0: bit-identical)
    bar_delta: float  # the same maximum over the tokens on the bar alone (those the filters kept: what u can land on)
    delta_token: Token  # where bar_delta lands (the most probable such token when several tie; the top one when 0)
    delta_rank: int  # that token's 0-based rank under the raw logits alone
    delta_low: float  # its interval [low, high) on the final distribution's cumulative bar, alone
    delta_high: float
    alone: Token  # the token u draws from the step computed alone ...
    alone_draw: DrawInfo
    room: Token  # ... and from the same step computed in the room
    room_draw: DrawInfo
    edge_shift: float  # how far the room moved the edges of the alone token's interval on the bar (the larger edge)
    deltas: tuple[float, ...]  # logit in the room - logit alone, for each of BatchEffect.candidates

    @property
    def flips(self) -> bool:
        """The room drew another token than the same step alone."""
        return self.alone.id != self.room.id


@dataclass(frozen=True)
class BatchEffect(_Record):
    """The step after prompt + continue_from, alone and in a room of `rows` rows, in both arithmetics."""

    step: int  # 0-based: the tokens generated before it
    seed: int  # the run's seed, whose generator gives u
    u: float | None  # where the draw reads the cumulative bar (None: greedy, the argmax)
    rows: int  # the room's rows, this one included
    joined_after: int  # decode steps the strangers had taken when this row joined them (mid-flight)
    candidates: tuple[Token, ...]  # the step's most probable tokens alone (raw logits), most probable first
    probs: tuple[float, ...]  # their final probabilities alone (the draw's distribution)
    default: ArithmeticCheck  # the arithmetic a room runs unless asked otherwise
    invariant: ArithmeticCheck | None  # the batch-invariant mode; None when it cannot serve this model
    invariant_unavailable: str = ""  # why not, when invariant is None
    room_invariant: bool = False  # which of the two the live room runs now
    # the live room decodes with the native CPU step (models/native_step.py): a row's numbers its own alone, bit for
    # bit, whoever shares the step (a newcomer's prompt is read alone too)
    room_native: bool = False
    forward_ms: float = 0.0  # the four forward passes' wall time


__all__ = ["ArithmeticCheck", "BatchEffect"]
