"""What the weights' precision does to the next token (models/precision.py): one forward pass of the model as it
runs, one of a float32 copy of the same weights, on the same prompt; their last positions compared.

The copies it compares are ModelService's (precision_check.py says which it makes and keeps).
"""

from __future__ import annotations

import time

import torch

from .. import limits
from ..models.precision import describe
from ..records.precision import PrecisionEffect, PrecisionRow


def last_logits(model, ids: list[int]) -> torch.Tensor:
    """(V,) float32 logits at the prompt's last position."""
    device = model.get_input_embeddings().weight.device
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False, logits_to_keep=1)
    return out.logits[0, -1].float().cpu()


def compare(model, reference, pieces, ids: list[int], precision: str, running: str = "fp32",
            top_n: int = limits.PRECISION_TOP_N) -> PrecisionEffect:
    """`model` (at `precision`) against `reference` (float32, the same weights; None: the model itself), on `ids`."""
    started = time.perf_counter()
    here = last_logits(model, ids)
    fp32 = here if reference is None else last_logits(reference, ids)
    delta = (here - fp32).abs()
    p, q = here.softmax(-1), fp32.softmax(-1)
    rank = lambda logits, i: int((logits > logits[i]).sum()) + 1  # noqa: E731 - as the knock-out counts ranks
    ids_top = dict.fromkeys(q.topk(top_n).indices.tolist() + p.topk(top_n).indices.tolist())
    rows = tuple(PrecisionRow(pieces(i), float(p[i]), float(q[i]), rank(here, i), rank(fp32, i))
                 for i in sorted(ids_top, key=lambda i: -float(q[i])))
    return PrecisionEffect(precision, running, describe(precision), float(delta.max()), float(delta.mean()), rows,
                           pieces(int(here.argmax())), pieces(int(fp32.argmax())), len(ids),
                           round((time.perf_counter() - started) * 1000, 1))


__all__ = ["compare", "last_logits"]
