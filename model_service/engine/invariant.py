"""The batch-invariant mode: a row's logits are bit-identical whatever else shares its forward pass.

Why a seed may draw another token in a busy room (docs/sampling.md): float32 sums are not associative, and the
kernels a forward pass calls choose their reduction order by the shapes they are given. On a CPU, torch's GEMM
takes one kernel for one row and others for two or more (and for 16 or more); a batch's padding and the
mask / no-mask attention paths change the sums too. A row's logits then move by up to ~1e-4 between alone and
batched, and a draw whose u lies that close to an edge of its token's interval (DrawInfo.margin) turns.

The mode removes both causes, as vLLM's VLLM_BATCH_INVARIANT does with kernels of its own:
- every nn.Linear (the LM head included) multiplies in fixed tiles of TILE rows, padded with zero rows: every
  row goes through one GEMM of one shape, so the same kernel with the same reduction order, wherever the row
  sits and whoever its neighbours are (a GEMM's rows never mix: a row's output reads only that row's input);
- attention runs one row at a time over that row's own keys (its pads cut away), always with an explicit mask:
  one call of one row, alone or batched, joined at step 0 or mid-flight (rows of one length in one call would
  not do: sdpa's numbers for a row change with the rows beside it).
Everything else in a decoder layer (norms, RoPE, activations, residual sums) works row by row already.

Its cost: a row alone pays for a tile of TILE rows (measured on 2 CPU cores: bench/bench_invariance.py).
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
import torch.nn.functional as F
from torch import nn

TILE = 16  # rows of one GEMM: the room's rows per step on a CPU (limits.MAX_ROWS_CPU), so a full room pays nothing
ATTENTION = "ntp_batch_invariant"  # the name this attention is registered under (transformers' AttentionInterface)


def tiled_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, tile: int = TILE) -> torch.Tensor:
    """F.linear in fixed tiles of `tile` rows (the last one padded with zeros): each row's result depends only
    on the row, never on the batch's size or make-up."""
    flat = x.reshape(-1, x.shape[-1])
    rows = flat.shape[0]
    padded = -rows % tile
    if padded:
        flat = torch.cat([flat, flat.new_zeros(padded, flat.shape[1])])
    if flat.shape[0] == tile:  # one tile: the room's usual step
        out = F.linear(flat, weight, bias)
    else:
        out = torch.cat([F.linear(flat[i: i + tile], weight, bias) for i in range(0, flat.shape[0], tile)])
    return out[:rows].reshape(*x.shape[:-1], weight.shape[0])


_ASKED: contextvars.ContextVar[bool | None] = contextvars.ContextVar("ntp_batch_invariant", default=None)


@contextlib.contextmanager
def mode(on: bool):
    """Run this thread's forward passes in the mode asked (the lesson compares both on one model); outside
    it, a model runs in its own mode (make_batch_invariant's `on`)."""
    token = _ASKED.set(bool(on))
    try:
        yield
    finally:
        _ASKED.reset(token)


def active(model) -> bool:
    """Whether this thread's forward passes of `model` run batch-invariant now."""
    asked = _ASKED.get()
    return bool(getattr(model, "ntp_batch_invariant", False)) if asked is None else asked


def _switched_linear(model, module: nn.Linear):
    own = type(module).forward  # nn.Linear's, or a one-row kernel's (models/row_products.py)

    def forward(x):
        if active(model):
            return tiled_linear(x, module.weight, module.bias)
        return own(module, x)

    forward.ntp_switched = True
    return forward


def _causal(q_len: int, k_len: int, device) -> torch.Tensor:
    """(q, k) bool: query i (the last q of k positions) sees keys up to its own position."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len)


def _row_masks(attention_mask, batch: int, q_len: int, k_len: int, device) -> torch.Tensor:
    """(B, q, k) bool, True = attend."""
    if attention_mask is None:  # no pads anywhere: every query and key is real, causal within the chunk
        return _causal(q_len, k_len, device).expand(batch, q_len, k_len)
    masks = attention_mask[:, 0]
    return masks if masks.dtype == torch.bool else masks == 0  # a float mask: 0 = attend, -inf = masked


def _suffixes(masks: torch.Tensor) -> tuple[list[int], list[int]] | None:
    """Each row's real queries and keys as counts, when they are its last ones (left padding, as the decoder
    lays rows out); None when some row's are not."""
    real_q, real_k = masks.any(dim=2), masks.any(dim=1)  # (B, q), (B, k)
    n_q, n_k = real_q.sum(dim=1), real_k.sum(dim=1)
    q_len, k_len = masks.shape[1], masks.shape[2]
    first_q, first_k = real_q.int().argmax(dim=1), real_k.int().argmax(dim=1)
    if bool((((first_q == q_len - n_q) | (n_q == 0)) & ((first_k == k_len - n_k) | (n_k == 0))).all()):
        return n_q.tolist(), n_k.tolist()
    return None


def _sdpa(module, q, k, v, mask, scaling):
    repeat = getattr(module, "num_key_value_groups", 1)
    if repeat > 1:
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    return F.scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), attn_mask=mask.unsqueeze(1),
                                          dropout_p=0.0, scale=scaling)


def switched_attention(module, query, key, value, attention_mask, **kwargs):
    """The attention registered for a model made switchable: this module's when the mode is on, transformers'
    sdpa (the model's own) when it is off."""
    if active(_model_of(module)):
        return invariant_attention(module, query, key, value, attention_mask, **kwargs)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def _model_of(module):
    return getattr(module, "ntp_model", None)


def invariant_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Attention over each row's own queries and keys (its pads cut away) with an explicit boolean mask
    (transformers' attention interface: query (B, H, q, D), key/value (B, Hkv, k, D), attention_mask
    (B, 1, q, k) or None; returns ((B, q, H, D), None)). One sdpa call per row, even for rows of one size: sdpa on
    a CPU gives a row other numbers in a call of several rows than alone (~6e-8; seen on SmolLM2 when two rows of a
    room had the same length); a pad query's output is 0."""
    batch, _, q_len, _ = query.shape
    k_len = key.shape[2]
    masks = _row_masks(attention_mask, batch, q_len, k_len, query.device)
    out = query.new_zeros(query.shape)
    suffixes = _suffixes(masks)
    if suffixes is None:  # not left-padded: each row on its own, by index
        for r in range(batch):
            queries, keys = masks[r].any(dim=1).nonzero().view(-1), masks[r].any(dim=0).nonzero().view(-1)
            if len(queries):
                mask = masks[r][queries][:, keys]
                out[r, :, queries] = _sdpa(module, query[r:r + 1, :, queries], key[r:r + 1, :, keys],
                                           value[r:r + 1, :, keys], mask[None], scaling)[0]
        return out.transpose(1, 2).contiguous(), None
    for r, (n_q, n_k) in enumerate(zip(*suffixes)):
        if n_q:
            q, k, v = query[r:r + 1, :, q_len - n_q:], key[r:r + 1, :, k_len - n_k:], value[r:r + 1, :, k_len - n_k:]
            out[r, :, q_len - n_q:] = _sdpa(module, q, k, v, masks[r:r + 1, q_len - n_q:, k_len - n_k:], scaling)[0]
    return out.transpose(1, 2).contiguous(), None


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION, switched_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)  # the boolean (B, 1, q, k) mask sdpa gets


def unsupported(model) -> str | None:
    """Why the mode cannot serve this model (None: it can): attention other than sdpa, or that sdpa cannot compute
    as the model does (logit soft-capping, attention sinks)."""
    config = model.config.get_text_config()
    if getattr(model, "ntp_batch_invariant", None) is not None:
        return None  # already made switchable
    if model.config._attn_implementation != "sdpa":
        return f"it runs {model.config._attn_implementation} attention, not sdpa"
    if getattr(config, "attn_logit_softcapping", None):
        return "its attention soft-caps its logits"
    if any("sinks" in name for name, _ in model.named_parameters()):
        return "its attention has sinks"
    return None


def make_batch_invariant(model, on: bool = True, switchable: bool = False) -> None:
    """Set a loaded model's own mode, in place (the `mode` context overrides it per thread). A model turned on,
    or asked to be `switchable` (a lesson compares both modes on it), gets the switching forwards; a model left
    in the default mode and not switchable is left exactly as it was (its attention stays transformers' own).
    Idempotent; a model the mode cannot serve raises ValueError when `on`, and is left as it is when not."""
    if getattr(model, "ntp_batch_invariant", None) is None:
        if not on and not switchable:
            return
        reason = unsupported(model)
        if reason:
            if on:
                raise ValueError(f"the batch-invariant mode cannot serve {type(model).__name__}: {reason}")
            return
        _switch(model)
    model.ntp_batch_invariant = bool(on)


def _switch(model) -> None:
    _register_attention()
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.forward = _switched_linear(model, module)
        if hasattr(module, "num_key_value_groups"):  # an attention module
            object.__setattr__(module, "ntp_model", model)  # not a submodule: no cycle in modules()
    model.set_attn_implementation(ATTENTION)


@contextlib.contextmanager
def switchable(model):
    """The model made switchable for a while (the lesson's invariant half, under the model's lock), then put back
    exactly as it was: its own forwards and attention. A model already switchable stays so. A model the mode
    cannot serve raises ValueError."""
    if getattr(model, "ntp_batch_invariant", None) is not None:
        yield model
        return
    reason = unsupported(model)
    if reason:
        raise ValueError(f"the batch-invariant mode cannot serve {type(model).__name__}: {reason}")
    attention = model.config._attn_implementation
    _switch(model)
    model.ntp_batch_invariant = False
    try:
        yield model
    finally:
        for module in model.modules():
            if getattr(module.__dict__.get("forward"), "ntp_switched", False):  # ours only (not accelerate's hooks)
                del module.__dict__["forward"]
            module.__dict__.pop("ntp_model", None)
        model.set_attn_implementation(attention)
        del model.ntp_batch_invariant


def is_batch_invariant(model) -> bool:
    """The model's own mode (what its room runs)."""
    return bool(getattr(model, "ntp_batch_invariant", False))


def available(model) -> bool:
    """Whether the mode can be switched on for this model."""
    return getattr(model, "ntp_batch_invariant", None) is not None or unsupported(model) is None


__all__ = ["ATTENTION", "TILE", "active", "available", "invariant_attention", "is_batch_invariant",
           "make_batch_invariant", "mode", "switchable", "tiled_linear", "unsupported"]
