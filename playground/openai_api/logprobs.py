"""Logprobs from the step records: which stage they come from, and OpenAI's two shapes of them.

Every StepRecord (model_service/records/step.py) carries each stage of the sampler's pipeline: for the top-N
candidates of the raw ranking, each stage's probabilities (aligned with the candidates; 0 where the stage removed
the token) and the chosen token's probability. A mode picks the stage:

- "raw" (the default, as vLLM's default logprobs_mode raw_logprobs): the model's own distribution, softmax of the
  logits before temperature or any filter. What the model thinks, whatever the request's knobs.
- "final": the distribution the token was drawn from, after temperature, top-k, top-p and min-p in the request's
  order (vLLM's processed_logprobs). A filtered-out token has probability 0: its logprob is FLOOR, as vLLM writes
  -inf in JSON. A greedy step's final distribution is all on the argmax.

The transforms never reorder the raw ranking (temperature is monotone; the filters cut its tail), so a stage's
k most probable tokens are its first k candidates with a probability above 0, then the removed ones.
Probabilities are the records' (6 significant digits), so a logprob is exact to about 1e-6 relative.

An echoed prompt's logprobs (completions with echo and logprobs, OpenAI's legacy shape) come from the service's
prompt_logprobs (model_service/records/prompt.py): the raw distribution whatever the mode, since nothing was
sampled there; the first token has none (null), as OpenAI writes it.
"""

from __future__ import annotations

import codecs
import math

from model_service.records.prompt import PromptLogprobs
from model_service.records.step import StepRecord

FLOOR = -9999.0  # the logprob of a probability of 0 (JSON has no -inf), as vLLM's OpenAI server writes it
STAGES = {"raw": "raw", "final": "final"}  # a logprobs_mode -> the stage it reads


def logprob(p: float) -> float:
    return math.log(p) if p > 0 else FLOOR


def token_bytes(piece: str, bytes_hex: str) -> list[int]:
    """A token's bytes: its own when it holds part of a character (the piece then reads \\xNN), else its text's."""
    return list(bytes.fromhex(bytes_hex)) if bytes_hex else list(piece.encode("utf-8", "surrogatepass"))


def counted(record: StepRecord) -> bool:
    """Whether a step is a token of the answer's logprobs: the end-of-text that stops a run is not (its text is
    no part of the answer), though usage counts it as generated."""
    return not (record.special and record.stop_reason == "eos")


def chosen(record: StepRecord, mode: str) -> float:
    """The chosen token's logprob under the mode's stage."""
    return logprob(record.stage(STAGES[mode]).chosen_prob)


def top(record: StepRecord, mode: str, k: int) -> list[tuple[str, str, float]]:
    """The stage's k most probable candidates, most probable first: (piece, bytes_hex, logprob)."""
    if k <= 0:
        return []
    probs = record.stage(STAGES[mode]).probs
    order = sorted(range(len(probs)), key=lambda i: (probs[i] <= 0, i))  # kept ones in raw order, then removed
    return [(record.candidates[i].piece, record.candidates[i].bytes_hex, logprob(probs[i])) for i in order[:k]]


def chat_entry(record: StepRecord, mode: str, k: int) -> dict:
    """One token of a chat answer's logprobs.content."""
    return {
        "token": record.piece, "logprob": chosen(record, mode), "bytes": token_bytes(record.piece, record.bytes_hex),
        "top_logprobs": [{"token": piece, "logprob": lp, "bytes": token_bytes(piece, hexed)}
                         for piece, hexed, lp in top(record, mode, k)],
    }


def chat_logprobs(records: list[StepRecord], mode: str, k: int) -> dict:
    return {"content": [chat_entry(r, mode, k) for r in records if counted(r)], "refusal": None}


def _finite(lp: float) -> float:
    return lp if math.isfinite(lp) else FLOOR


def prompt_logprobs(prompt: PromptLogprobs, k: int) -> dict:
    """An echoed prompt's part of a completion's logprobs, in the same parallel lists as the generated part: each
    token, its logprob given the tokens before it (None for the first), its k most probable alternatives there
    (None for the first), and text_offset, the characters of the prompt written before it. A marker the
    tokenizer added (a BOS) is listed with no text: it writes none of the prompt, so the tokens' bytes put
    together are the prompt's."""
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [] if k else None, "text_offset": []}
    chars, decoder = 0, codecs.getincrementaldecoder("utf-8")("replace")
    for p in prompt.positions:
        out["tokens"].append("" if p.added else p.token.piece)
        out["token_logprobs"].append(None if p.logprob is None else _finite(p.logprob))
        if k:
            best: dict[str, float] | None = None
            if p.logprob is not None:
                best = {}
                for candidate, lp in zip(p.top[:k], p.top_logprobs):
                    best.setdefault(candidate.piece, _finite(lp))
            out["top_logprobs"].append(best)
        out["text_offset"].append(chars)
        if not p.added:
            chars += len(decoder.decode(bytes(token_bytes(p.token.piece, p.token.bytes_hex))))
    return out


def joined(first: dict, then: dict) -> dict:
    """Two parts of a completion's logprobs (the echoed prompt's, the generated text's) as one."""
    top = None if first["top_logprobs"] is None else first["top_logprobs"] + then["top_logprobs"]
    return {"tokens": first["tokens"] + then["tokens"], "token_logprobs": first["token_logprobs"] + then["token_logprobs"],
            "top_logprobs": top, "text_offset": first["text_offset"] + then["text_offset"]}


def completion_logprobs(records: list[StepRecord], mode: str, k: int, start: int = 0, base: int = 0) -> dict:
    """A completion's logprobs: parallel lists. text_offset: where each token's text starts in the answer's text,
    read from the records' texts (`start`: the text's length before the first of these records; `base`: the
    characters before the generated text, an echoed prompt's)."""
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [] if k else None, "text_offset": []}
    for record in records:
        if counted(record):
            out["tokens"].append(record.piece)
            out["token_logprobs"].append(chosen(record, mode))
            if k:
                best: dict[str, float] = {}
                for piece, _, lp in top(record, mode, k):
                    best.setdefault(piece, lp)  # two candidates may read the same (bytes of a character)
                out["top_logprobs"].append(best)
            out["text_offset"].append(base + start)
        start = len(record.text)
    return out


__all__ = ["FLOOR", "chat_entry", "chat_logprobs", "chosen", "completion_logprobs", "counted", "joined", "logprob",
           "prompt_logprobs", "top", "token_bytes"]
