"""What the weights' precision does to the next token: the model as loaded beside a float32 copy of itself, on one
prompt (forward_pass/precision_effect.py makes it). Small, frozen, JSON-able, free of torch."""

from __future__ import annotations

from dataclasses import dataclass

from .step import Token
from .trace import _Record


@dataclass(frozen=True)
class PrecisionRow(_Record):
    """One of the top tokens: its probability at the model's precision and in float32, and its ranks."""

    token: Token
    prob: float  # at the precision the model runs in
    prob_fp32: float
    rank: int  # from 1, at the model's precision
    rank_fp32: int


@dataclass(frozen=True)
class PrecisionEffect(_Record):
    """The next token's distribution at the prompt's last position, at `precision` and in float32 (the same weights
    as loaded, before any rounding to bf16 or packing into int8 / int4). `running` is the precision the model serves
    in: when `precision` is another, its side is a copy of the model packed for the check."""

    precision: str  # fp32, bf16, int8 or int4: the side compared with float32
    running: str  # the precision the model serves in (the host's --precision)
    described: str  # as the model card says it ("int4 weights (groups of 32), bfloat16 activations")
    max_abs_dlogit: float  # max over the vocabulary of |logit - logit in fp32|
    mean_abs_dlogit: float
    top: tuple[PrecisionRow, ...]  # the union of both top-N lists, by fp32 probability
    greedy: Token  # the top token at the model's precision
    greedy_fp32: Token
    tokens: int  # the prompt's length
    ms: float  # both passes

    @property
    def same_greedy(self) -> bool:
        return self.greedy.id == self.greedy_fp32.id


__all__ = ["PrecisionEffect", "PrecisionRow"]
