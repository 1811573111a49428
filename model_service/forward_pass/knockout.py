"""Knock a part out and rerun: the next token's logits with one block's attention, its MLP or one head taken away.

"zero" sets the part's output to zero (the block adds nothing through it); "mean" sets it, at every position, to
its mean over the prompt's positions (what it adds on average, without what it computed for this position).
A head's output is its slice of the output projection's input; attention's and the MLP's, the module's output,
before any norm the block applies to it (a norm of zero is zero: Gemma 3's post-norms keep a zeroed part zero).

The hooks change the pass only in the thread that set them (tracing._Hooks' rule: a generation running on the
same modules in another thread is left alone), and are removed when the pass ends, whatever happens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import torch

from ..engine.runner import sync
from ..records import validation
from ..records.intervention import KINDS, MODES, Knockout
from .attribution import parts
from .tracing import _check_block, _check_ids


def check_knockout(model, target: Knockout) -> Knockout:
    """The target as given, checked against the model; a ValueError names the field."""
    kind, mode = validation.choice("kind", target.kind, KINDS), validation.choice("mode", target.mode, MODES)
    block = _check_block(model, target.block)
    head = None
    if kind == "head":
        head = int(validation.number("head", target.head, integer=True, low=1, high=parts(model, block).heads))
    return Knockout(kind, block, head, mode)


def _replaced(x: torch.Tensor, mode: str) -> torch.Tensor:
    return torch.zeros_like(x) if mode == "zero" else x.mean(dim=1, keepdim=True).expand_as(x).clone()


def _hook(model, target: Knockout, thread: int):
    """The handle of the target's hook: a forward hook on attention or the MLP, a pre-hook on the projection."""
    p = parts(model, target.block)
    if target.kind == "head":
        size = p.out_proj.in_features // p.heads
        cols = slice((target.head - 1) * size, target.head * size)

        def pre(_module, args):
            if threading.get_ident() != thread:
                return None
            x = args[0].clone()
            x[..., cols] = _replaced(x[..., cols], target.mode)
            return (x, *args[1:])

        return p.out_proj.register_forward_pre_hook(pre)
    module = p.attention if target.kind == "attention" else p.mlp

    def after(_module, _args, output):
        if threading.get_ident() != thread:
            return None
        if isinstance(output, tuple):
            return (_replaced(output[0], target.mode), *output[1:])
        return _replaced(output, target.mode)

    return module.register_forward_hook(after)


@torch.inference_mode()
def last_logits(model, ids: Sequence[int], target: Knockout | None = None) -> tuple[torch.Tensor, float]:
    """The logits ((V,), float32, after any soft cap: what the sampler reads) at the last position of `ids`, with
    `target` knocked out (None: the model as it is), and the pass's time in ms."""
    ids = _check_ids(ids, model.get_input_embeddings().weight.shape[0])
    device = model.get_input_embeddings().weight.device
    handle = _hook(model, check_knockout(model, target), threading.get_ident()) if target is not None else None
    try:
        started = time.perf_counter()
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False, logits_to_keep=1)
        sync(device)
        return out.logits[0, -1].float(), (time.perf_counter() - started) * 1000
    finally:
        if handle is not None:
            handle.remove()


__all__ = ["check_knockout", "last_logits"]
