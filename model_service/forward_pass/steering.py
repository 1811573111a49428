"""Steering: add a direction to the residual stream during generation, beside the same run without it.

    "I love this"  ─┐ the stream after block b, at the last position
    "I hate this"  ─┴─► direction = love − hate (one vector of d numbers)
    the prompt ──► generate twice, with the same settings and seed, one token at a time (a KV cache each):
                   plain: the model as it is;  steered: after block b, stream += scale · direction at every position

Both runs are drawn by the engine's own sampler (RowState, choose: the stages, the draw, the records of a room's run)
from the same seed, so they read the same u at every step: where their texts part, the direction did it, not new
randomness. The loop runs here, under the model's lock, not in the room's scheduler (whose steps are shared by
every row): a steered run is a short demonstration, at most limits.MAX_STEER_TOKENS tokens. The hook changes only
this thread's passes and is removed when the run ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import torch

from .. import limits
from ..engine.runner import sync
from ..engine.step import RowState, choose, summarise_chosen
from ..records import validation
from ..records.intervention import SteerResult
from .patching import block_outputs
from .tracing import _blocks, _check_block, _check_ids


def stream_after(model, ids: Sequence[int], block: int) -> torch.Tensor:
    """The stream after block `block` at the last position of `ids` (float32, (d,)), where the hook adds to it."""
    return block_outputs(model, ids)[0][block - 1, -1].float()


@torch.inference_mode()
def _run(loaded, ids, checked, seed: int, block: int, vector: torch.Tensor | None) -> list:
    """One run of up to checked.max_new_tokens, the vector added after `block` (None: the model as it is)."""
    model = loaded.model
    device = model.get_input_embeddings().weight.device
    row = RowState(loaded, checked.settings, checked.max_new_tokens, checked.stop, (), seed=seed)
    row.prompt = tuple(ids)
    thread = threading.get_ident()

    def add(_module, _args, out):
        if threading.get_ident() != thread:
            return None
        hidden = out[0] if isinstance(out, tuple) else out
        hidden += vector.to(hidden.dtype)
        return out

    handle = _blocks(model)[block - 1].register_forward_hook(add) if vector is not None else None
    records, past, feed = [], None, list(ids)
    try:
        for step in range(checked.max_new_tokens):
            started = time.perf_counter()
            out = model(input_ids=torch.tensor([feed], device=device), past_key_values=past, use_cache=True,
                        logits_to_keep=1)
            sync(device)
            forward_ms = (time.perf_counter() - started) * 1000
            past = out.past_key_values
            chosen = choose(out.logits[:, -1].float(), [row], checked.top_n)
            summaries, summary_ms = summarise_chosen(chosen)
            record = row.record(step, chosen.tokens[0], chosen.draws[0], summaries[0], forward_ms, chosen.ms + summary_ms)
            records.append(record)
            if record.stop_reason is not None:
                break
            feed = [chosen.tokens[0]]
    finally:
        if handle is not None:
            handle.remove()
    return records


def steer(loaded, ids, checked, seed: int, towards: Sequence[int], away: Sequence[int], block: int,
          scale: float) -> SteerResult:
    """The prompt's run with scale · (stream(towards) − stream(away)) after `block`, beside its plain run."""
    started = time.perf_counter()
    model = loaded.model
    vocab = model.get_input_embeddings().weight.shape[0]
    towards, away = _check_ids(towards, vocab), _check_ids(away, vocab)
    block = _check_block(model, block)
    scale = validation.number("scale", scale, low=-limits.MAX_STEER_SCALE, high=limits.MAX_STEER_SCALE)
    direction = stream_after(model, towards, block) - stream_after(model, away, block)
    own = stream_after(model, ids, block)
    plain = _run(loaded, ids, checked, seed, block, None)
    steered = _run(loaded, ids, checked, seed, block, float(scale) * direction)
    parted = next((i for i, (a, b) in enumerate(zip(plain, steered)) if a.token_id != b.token_id), None)
    return SteerResult(block=block, scale=float(scale), direction_norm=float(direction.norm()),
                       stream_norm=float(own.norm()), plain=tuple(plain), steered=tuple(steered), parted_at=parted,
                       seed=seed, ms=round((time.perf_counter() - started) * 1000, 1))


__all__ = ["steer", "stream_after"]
