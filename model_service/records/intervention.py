"""Interventions in the forward pass as records: who pushed the next token up, and what happens when a part is
knocked out. Small, frozen, JSON-able, free of torch (forward_pass/attribution.py and knockout.py make them).

Conventions as the trace's (records/trace.py): `block` counts from 1, a head from 1 (as the page shows them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from .step import StepRecord, Token
from .trace import _Record

KINDS = ("attention", "mlp", "head")  # what a knock-out takes away: a block's attention, its MLP, or one head
MODES = ("zero", "mean")  # the part's output set to zero, or to its mean over the prompt's positions


@dataclass(frozen=True)
class Attribution(_Record):
    """Direct logit attribution at the prompt's last position: how much each part added to
    logit(candidate) - logit(rival), read from one forward pass.

    The stream after the last block is the embedding plus every block's attention and MLP output (what each adds
    to the residual stream). The final RMSNorm divides that sum by one number, its root mean square (`scale`, as
    measured on this pass), and multiplies by its weight; holding that one number as measured makes the head's
    logit difference a sum of one term per part: embedding + sum(attention) + sum(mlp) (+ the head's bias) ==
    logit_diff, up to float32 round-off (`residual_error` says how far)."""

    candidate: Token
    rival: Token
    logit_diff: float  # the model's own logit(candidate) - logit(rival), before any soft-capping
    scale: float  # the final norm's root mean square of the last stream, as measured: every term is divided by it
    embedding: float  # the token's own embedding (the stream before block 1)
    attention: tuple[float, ...]  # per block, from 1: what its attention added
    mlp: tuple[float, ...]  # per block: what its MLP added
    lens: tuple[float, ...]  # the logit lens's difference after each block (the final norm applied afresh)
    bias: float  # the LM head's bias difference (0.0 without a bias)
    residual_error: float  # |sum of the terms - logit_diff|
    head_block: int  # the block whose attention is split by head
    heads: tuple[float, ...]  # that block's attention, per head (empty when the split does not add up: head_note)
    head_note: str
    softcap: float | None  # the model caps its logits (cap * tanh(logit / cap)): the attribution is before it
    tokens: int  # the prompt's length
    ms: float


@dataclass(frozen=True)
class Knockout(_Record):
    """What is taken away: a block's attention, its MLP, or one head of its attention (`head`, from 1)."""

    kind: str
    block: int
    head: int | None = None
    mode: str = "zero"


@dataclass(frozen=True)
class KnockoutResult(_Record):
    """The next token before and after a knock-out, each through the sampler with the same settings and the same u:
    the lesson's stages on both (what top-k / top-p / min-p keep), and the candidate's odds both ways."""

    target: Knockout
    before: StepRecord
    after: StepRecord
    candidate: Token  # the token followed (default: the top one before)
    prob_before: float  # its probability under the raw logits (T = 1), before and after
    prob_after: float
    rank_before: int  # its rank among the whole vocabulary by logit, from 1
    rank_after: int
    max_abs_dlogit: float  # the largest change of any logit
    forward_ms: float  # the knocked-out pass
    ms: float

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["before"], d["after"] = self.before.to_dict(), self.after.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict) -> KnockoutResult:
        return cls(**{**data, "target": Knockout.from_dict(data["target"]), "candidate": Token(**data["candidate"]),
                      "before": StepRecord.from_dict(data["before"]), "after": StepRecord.from_dict(data["after"])})


@dataclass(frozen=True)
class PatchCell(_Record):
    """One cell of a patching grid: the stream after `block` at `position` (None: every position) copied from the
    source prompt; the next token's odds at the prompt's last position then."""

    position: int | None
    block: int
    candidate: float  # p(the prompt's own answer)
    source_answer: float  # p(the source prompt's answer)
    top: Token  # the most probable token now
    top_prob: float


@dataclass(frozen=True)
class PatchResult(_Record):
    """Activation patching from a source prompt into the prompt (forward_pass/patching.py): per cell, where the
    prompt's answer (" Paris") gives way to the source's (" Rome"). clean and source: (p(candidate), p(source_answer))
    for the prompt unpatched and for the source prompt itself, the two ends of every cell's scale."""

    candidate: Token
    source_answer: Token
    tokens: tuple[Token, ...]  # the prompt's, as the grid's rows read them
    clean: tuple[float, float]
    source: tuple[float, float]
    cells: tuple[PatchCell, ...]
    ms: float


@dataclass(frozen=True)
class SteerResult:
    """A run steered by a direction beside the same run without it (forward_pass/steering.py): the same settings and
    seed, so both read the same u at every step. direction_norm beside stream_norm (the prompt's own stream there,
    at its last position) says how big a push `scale` gives. parted_at: the first step whose tokens differ."""

    block: int
    scale: float
    direction_norm: float
    stream_norm: float
    plain: tuple[StepRecord, ...]
    steered: tuple[StepRecord, ...]
    parted_at: int | None
    seed: int
    ms: float

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["plain"], d["steered"] = [r.to_dict() for r in self.plain], [r.to_dict() for r in self.steered]
        return d

    @classmethod
    def from_dict(cls, data: dict) -> SteerResult:
        return cls(**{**data, "plain": tuple(StepRecord.from_dict(r) for r in data["plain"]),
                      "steered": tuple(StepRecord.from_dict(r) for r in data["steered"])})


def knockout_from(value) -> Knockout:
    """A Knockout, or a mapping of its fields (JSON, a form): unknown or missing fields named. The values are
    checked against the model where it runs (forward_pass/knockout.py:check_knockout)."""
    if isinstance(value, Knockout):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"target must be an object with kind, block, head and mode, got {type(value).__name__}")
    names = {f.name for f in fields(Knockout)}
    unknown = sorted(set(map(str, value)) - names)
    if unknown:
        raise ValueError(f"target has no field {unknown[0]!r} (it takes kind, block, head, mode)")
    if "kind" not in value or "block" not in value:
        raise ValueError("target needs a kind (attention, mlp or head) and a block")
    return Knockout(**value)


__all__ = ["KINDS", "MODES", "Attribution", "Knockout", "KnockoutResult", "PatchCell", "PatchResult", "SteerResult",
           "knockout_from"]
