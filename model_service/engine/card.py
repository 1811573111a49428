"""How many rows a GPU card can hold in one forward pass: plain arithmetic on the card's memory, the
model's weights and the KV cache a full request grows.

A decode step reads every weight once whatever the batch, so rows are almost free until memory runs
out: the weights, then each row's KV cache for MAX_PROMPT_TOKENS + MAX_NEW_TOKENS tokens and the
sampler's (rows, vocab) float32 tensors must fit in CARD_MEMORY_SHARE of the card. The result is capped
at MAX_ROWS_GPU and never below 1. `rows_for_card` is pure so a test can hand it any card.
"""

from __future__ import annotations

from .. import env, limits
from ..records import validation


def kv_bytes_per_token(config, dtype_bytes: int) -> int:
    """Keys and values of every layer for one token: 2 × layers × kv heads × head size × bytes."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * dtype_bytes


def rows_for_card(total_bytes: int, weights_bytes: int, kv_per_token: int, vocab_size: int,
                  tokens_per_row: int = limits.MAX_PROMPT_TOKENS + limits.MAX_NEW_TOKENS,
                  cap: int = limits.MAX_ROWS_GPU) -> int:
    per_row = kv_per_token * tokens_per_row + limits.SAMPLER_TENSORS_PER_ROW * vocab_size * 4
    free = total_bytes * limits.CARD_MEMORY_SHARE - weights_bytes
    return max(1, min(cap, int(free // per_row)))


def card_rows(model) -> int:
    """rows_for_card for a model already on its GPU."""
    import torch

    device = model.device
    total = torch.cuda.get_device_properties(device).total_memory
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    vocab = model.get_output_embeddings().weight.shape[0]
    return rows_for_card(total, weights, kv_bytes_per_token(model.config, model.dtype.itemsize), vocab)


def room_limits(model, max_rows: int | None = None, queue_size: int | None = None) -> tuple[int, int]:
    """The room's (rows per step, requests that may wait): as given, else NTP_MAX_ROWS / NTP_QUEUE_SIZE, else
    a few rows on a CPU and as many as the card holds on a GPU (card_rows), and limits.QUEUE_SIZE. The service
    and a scheduler process both size their room here."""
    if max_rows is None:
        max_rows = env.max_rows()
    if max_rows is None:
        kind = model.device.type
        max_rows = card_rows(model) if kind == "cuda" else limits.MAX_ROWS_CPU if kind == "cpu" else limits.MAX_ROWS_GPU
    rows = validation.number("max_rows", max_rows, integer=True, low=1, high=limits.MAX_ROWS_CEILING)
    waiting = validation.number("queue_size", env.queue_size() if queue_size is None else queue_size,
                                integer=True, low=0, high=limits.QUEUE_SIZE_CEILING)
    return rows, waiting


def room_mode(model, batch_invariant: bool | None = None) -> bool:
    """Set the room's arithmetic on a loaded model and say which it is: batch-invariant when asked, else
    NTP_BATCH_INVARIANT, else the device's default (limits.BATCH_INVARIANT_DEFAULT; a model the mode cannot
    serve keeps the default arithmetic unless the mode was asked for, which raises). The service and a scheduler
    process both set their copy here."""
    from .invariant import available, make_batch_invariant

    asked = env.batch_invariant() if batch_invariant is None else validation.boolean("batch_invariant", batch_invariant)
    on = limits.BATCH_INVARIANT_DEFAULT.get(model.device.type, False) if asked is None else asked
    if asked is None and not available(model):
        on = False
    make_batch_invariant(model, on)
    return on


__all__ = ["card_rows", "kv_bytes_per_token", "room_limits", "room_mode", "rows_for_card"]
