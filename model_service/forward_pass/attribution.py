"""Who pushed the next token up: each block's attention and MLP share of logit(candidate) - logit(rival).

The residual stream at the last position after the last block is a sum, one term per part:

    stream = embedding + attention_1 + mlp_1 + ... + attention_L + mlp_L

(each block reads the stream, computes an adjustment and adds it back: lesson 10). The head reads that stream
through the final RMSNorm, which divides it by its root mean square r (one number for the whole vector) and
multiplies it by a learned gain g. With r held at its measured value the rest is linear, so

    logit(c) - logit(r) = sum over parts of  part . (g * (W[c] - W[r])) / r   (+ the head's bias difference)

One traced pass (thread-filtered hooks, as tracing.py's) gives every term: a block's input is the stream before
it, the input of the norm in front of its MLP is the stream after its attention, and the final norm's input the
stream after the last block. One block's attention splits further by head: the input of its output projection
holds each head's result side by side, and W_O's columns for head h map that head's part onto the stream (a model
that normalises attention's output before adding it, as Gemma 3 does, divides by that norm's own measured r too).

knockout.py takes parts away and reruns; `parts` finds them in a block of either offline model's family.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..records import validation
from ..records.intervention import Attribution
from .lm_head import final_norm
from .tracing import _attention_module, _blocks, _check_block, _check_ids, _Hooks

HEAD_SUM_TOLERANCE = 1e-3  # relative: the heads' split of a block's attention must add up to it, or is not shown


@dataclass(frozen=True)
class Parts:
    """One decoder block's pieces an intervention reads or changes."""

    attention: torch.nn.Module
    mlp: torch.nn.Module
    before_mlp: torch.nn.Module  # the norm in front of the MLP: its input is the stream after attention
    after_attention: torch.nn.Module | None  # a norm on attention's output before it is added (Gemma 3), or None
    out_proj: torch.nn.Linear  # attention's output projection: its input holds the heads side by side
    heads: int


def parts(model, block: int) -> Parts:
    """The parts of block `block` (from 1); a ValueError names what this architecture lacks."""
    layer = _blocks(model)[block - 1]
    attention, mlp = _attention_module(layer), getattr(layer, "mlp", None)
    # Gemma 3: input norm, attention, post-attention norm, add; pre-feedforward norm, MLP, post-feedforward norm,
    # add. Llama: input norm, attention, add; post-attention norm, MLP, add.
    before_mlp = getattr(layer, "pre_feedforward_layernorm", None) or getattr(layer, "post_attention_layernorm", None)
    after_attention = getattr(layer, "post_attention_layernorm", None) if hasattr(layer, "pre_feedforward_layernorm") else None
    out_proj = getattr(attention, "o_proj", None)
    if attention is None or mlp is None or before_mlp is None or not isinstance(out_proj, torch.nn.Linear):
        raise ValueError(f"{type(model).__name__}: block {block} has no attention, MLP and norms this tool knows")
    config = model.config.get_text_config()
    return Parts(attention, mlp, before_mlp, after_attention, out_proj, int(config.num_attention_heads))


def gain(norm: torch.nn.Module, size: int, device) -> torch.Tensor:
    """An RMSNorm's gain g (float32, (d,)), whichever way it stores it (Llama: weight; Gemma: 1 + weight): the
    norm of a vector of ones is g / sqrt(1 + eps)."""
    ones = torch.ones(1, size, device=device, dtype=next(norm.parameters()).dtype)
    return norm(ones)[0].float() * math.sqrt(1.0 + eps(norm))


def eps(norm: torch.nn.Module) -> float:
    return float(getattr(norm, "variance_epsilon", None) or getattr(norm, "eps", 1e-6))


def rms(x: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
    """The root mean square the norm divides x ((..., d), float32) by."""
    return (x.pow(2).mean(-1, keepdim=True) + eps(norm)).sqrt()


def _last(x: torch.Tensor) -> torch.Tensor:
    return x[0, -1].detach().float().clone()


def check_token(field: str, token, vocab: int) -> int:
    """A token id of the vocabulary; the error names `field`."""
    return int(validation.number(field, token, integer=True, low=0, high=vocab - 1))


@torch.inference_mode()
def attribute(model, pieces, ids: Sequence[int], candidate: int | None = None, rival: int | None = None,
              head_block: int | None = None) -> Attribution:
    """The attribution of logit(candidate) - logit(rival) at the last position of `ids` (default: the top two
    tokens), with `head_block`'s attention split by head (default: the block whose attention added the most, up
    or down). pieces: token id -> Token."""
    started = time.perf_counter()
    head = model.get_output_embeddings()
    vocab = head.weight.shape[0]
    ids = _check_ids(ids, model.get_input_embeddings().weight.shape[0])
    n = model.config.get_text_config().num_hidden_layers
    if head_block is not None:
        head_block = _check_block(model, head_block, "head_block")
    blocks = [parts(model, b) for b in range(1, n + 1)]
    norm = final_norm(model)
    if norm is None:
        raise ValueError(f"{type(model).__name__}: no final norm found")
    device = head.weight.device
    with _Hooks() as hooks:
        hooks.before(norm, "final", pick=_last)
        for b, p in enumerate(blocks):
            hooks.before(p.before_mlp, f"mid{b}", pick=_last)
            hooks.before(p.out_proj, f"heads{b}", pick=_last)
            hooks.after(p.attention, f"attn{b}", pick=_last)
        out = model(input_ids=torch.tensor([ids], device=device), output_hidden_states=True, use_cache=False,
                    logits_to_keep=1)
    seen = hooks.seen
    inputs = [_last(h) for h in out.hidden_states[:n]]  # the stream before each block
    outputs = inputs[1:] + [seen["final"]]
    mids = [seen[f"mid{b}"] for b in range(n)]
    final = outputs[-1]
    logits = head(norm(final[None].to(head.weight.dtype)))[0].float()  # before any soft-capping
    order = logits.topk(2).indices.tolist()  # (a soft cap keeps the order)
    candidate = order[0] if candidate is None else check_token("candidate", candidate, vocab)
    rival = (order[1] if order[0] == candidate else order[0]) if rival is None else check_token("rival", rival, vocab)
    if rival == candidate:
        raise ValueError("rival must be another token than the candidate")
    d = final.shape[-1]
    scale = rms(final, norm)
    w = head.weight[candidate].float() - head.weight[rival].float()
    direction = gain(norm, d, device) * w / scale
    bias = 0.0 if head.bias is None else float(head.bias[candidate] - head.bias[rival])
    dot = lambda x: float(x @ direction)
    attention = [dot(m - i) for m, i in zip(mids, inputs)]
    mlp = [dot(o - m) for o, m in zip(outputs, mids)]
    embedding = dot(inputs[0])
    logit_diff = float(logits[candidate] - logits[rival])
    lens = (norm(torch.stack(outputs).to(head.weight.dtype)).float() @ w + bias).tolist()
    if head_block is None:
        head_block = 1 + max(range(n), key=lambda b: abs(attention[b]))
    heads, note = _heads(blocks[head_block - 1], seen[f"heads{head_block - 1}"], seen[f"attn{head_block - 1}"],
                         direction, attention[head_block - 1])
    softcap = getattr(model.config.get_text_config(), "final_logit_softcapping", None) or None
    return Attribution(
        candidate=pieces(candidate), rival=pieces(rival), logit_diff=logit_diff, scale=float(scale),
        embedding=embedding, attention=tuple(attention), mlp=tuple(mlp), lens=tuple(lens), bias=bias,
        residual_error=abs(embedding + sum(attention) + sum(mlp) + bias - logit_diff), head_block=head_block,
        heads=heads, head_note=note, softcap=float(softcap) if softcap else None, tokens=len(ids),
        ms=round((time.perf_counter() - started) * 1000, 1))


def _heads(p: Parts, z: torch.Tensor, raw: torch.Tensor, direction: torch.Tensor, whole: float):
    """One block's attention term split by head: (per-head terms, "") or ((), why not)."""
    w_o = p.out_proj.weight.float()  # (d, heads * head_dim)
    size = w_o.shape[1] // p.heads
    if p.out_proj.bias is not None or size * p.heads != w_o.shape[1]:
        return (), "its output projection has a bias or an odd shape: the split by head is not shown"
    each = torch.stack([w_o[:, h * size:(h + 1) * size] @ z[h * size:(h + 1) * size] for h in range(p.heads)])
    if p.after_attention is not None:  # normalised before it is added: that norm's gain and measured scale
        each = each * gain(p.after_attention, each.shape[-1], each.device) / rms(raw, p.after_attention)
    terms = (each @ direction).tolist()
    if abs(sum(terms) - whole) > HEAD_SUM_TOLERANCE * max(1.0, abs(whole)):
        return (), f"the heads add up to {sum(terms):.4g}, not the block's {whole:.4g}: the split is not shown"
    return tuple(terms), ""


__all__ = ["Parts", "attribute", "check_token", "gain", "parts", "rms"]
