"""Prompt logprobs on the loaded model: one forward pass over the prompt (teacher forcing), no generation.

The logits at position j - 1 are the model's distribution of the token at j given the tokens before it, so a
single pass scores every prompt token but the first: its log-probability, its rank among the vocabulary and the
top-n alternatives there. The distribution is the raw one, log_softmax of the model's own logits (soft-capped
as the model caps them) at temperature 1: vLLM's prompt_logprobs, and what OpenAI's legacy completions give with
echo and logprobs. Rows are reduced to float32 CHUNK at a time, so a long prompt never holds a (T, V) float32
copy of its logits. The record (model_service/records/prompt.py) keeps no tensor.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch

from ..engine.runner import sync
from ..records.prompt import PromptLogprobs, PromptPosition
from ..records.step import r6
from ..records.trace import Candidate

CHUNK = 64  # logits rows reduced at a time (as the tracer's)


def prompt_logprobs(model, pieces, ids: Sequence[int], top_n: int, *, added: int = 0, chat: bool = False,
                    model_name: str = "") -> PromptLogprobs:
    """Score every token of `ids` (already checked: the service's prompt_ids) given the ones before it.
    pieces: token id -> Token (the service's PieceTable); added: how many leading ids the tokenizer put in
    front of the text (its BOS)."""
    ids = [int(i) for i in ids]
    first = pieces(ids[0])
    positions = [PromptPosition(0, first, None, None, (), (), added > 0)]
    forward_ms = 0.0
    if len(ids) > 1:  # a one-token prompt has nothing to score: no forward pass
        device = model.get_input_embeddings().weight.device
        with torch.inference_mode():
            started = time.perf_counter()
            logits = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0, :-1]  # (T-1, V)
            sync(device)
            forward_ms = (time.perf_counter() - started) * 1000
            targets = torch.tensor(ids[1:], device=logits.device)  # row j scores the token at j + 1
            for lo in range(0, len(ids) - 1, CHUNK):
                rows = torch.log_softmax(logits[lo : lo + CHUNK].float(), dim=-1)
                positions += _scored(rows, targets[lo : lo + CHUNK], lo + 1, pieces, top_n, added)
    return PromptLogprobs(model=model_name or type(model).__name__, chat=bool(chat), top_n=int(top_n),
                          positions=tuple(positions), forward_ms=round(forward_ms, 1))


def _scored(rows, targets, start: int, pieces, top_n: int, added: int) -> list[PromptPosition]:
    """Positions start, start + 1, ...: each target's logprob and rank in its row, and the row's top_n."""
    wanted = rows.gather(1, targets.unsqueeze(1))  # (n, 1)
    ranks = (rows > wanted).sum(dim=1).tolist()
    k = min(int(top_n), rows.shape[-1])
    top_ids, top_lps = ([[]] * len(ranks), [[]] * len(ranks))
    if k:
        top = rows.topk(k, dim=-1)
        top_ids, top_lps = top.indices.tolist(), top.values.tolist()
    out = []
    for i, (target, lp, rank) in enumerate(zip(targets.tolist(), wanted[:, 0].tolist(), ranks)):
        candidates = tuple(_candidate(pieces(int(c)), v) for c, v in zip(top_ids[i], top_lps[i]))
        out.append(PromptPosition(start + i, pieces(int(target)), float(lp), int(rank), candidates,
                                  tuple(float(v) for v in top_lps[i]), start + i < added))
    return out


def _candidate(token, lp: float) -> Candidate:
    return Candidate(id=token.id, piece=token.piece, prob=r6(math.exp(lp)), special=token.special,
                     bytes_hex=token.bytes_hex)


__all__ = ["CHUNK", "prompt_logprobs"]
