"""Prompt logprobs as records: every prompt token's log-probability given the tokens before it (teacher forcing),
read off one forward pass over the prompt (model_service/forward_pass/prompt_logprobs.py). Small, frozen,
JSON-able, free of torch, like the trace's records (trace.py), whose Candidate and from_dict they share.

The distribution is the model's raw one: the softmax of its logits at temperature 1, before any sampling knob
(vLLM's prompt_logprobs). Position 0 has nothing before it, so no logprob and no alternatives (OpenAI's echo
writes null there). A token the tokenizer put in front of the text (its begin-of-text marker: Llama 3, Gemma;
not SmolLM2) is part of what the model reads but writes none of the prompt: `added` marks it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .step import Token
from .trace import Candidate, _Record


@dataclass(frozen=True)
class PromptPosition(_Record):
    position: int  # 0-based, in the model's input
    token: Token  # the prompt's token here
    logprob: float | None  # log p(token | the tokens before it); None at position 0
    rank: int | None  # its 0-based rank among the whole vocabulary at this position; None at position 0
    top: tuple[Candidate, ...]  # the most probable tokens here, most probable first (prob: exp(logprob), 6 digits)
    top_logprobs: tuple[float, ...]  # their logprobs, aligned with top, as computed (float32)
    added: bool = False  # the tokenizer's own marker (a BOS): read by the model, not written in the prompt's text


@dataclass(frozen=True)
class PromptLogprobs(_Record):
    model: str
    chat: bool  # the tokens are the chat template's
    top_n: int  # alternatives asked for per position
    positions: tuple[PromptPosition, ...]  # one per prompt token, in order
    forward_ms: float  # the forward pass (0 for a one-token prompt: nothing to score)

    @property
    def tokens(self) -> tuple[Token, ...]:
        return tuple(p.token for p in self.positions)


__all__ = ["PromptLogprobs", "PromptPosition"]
