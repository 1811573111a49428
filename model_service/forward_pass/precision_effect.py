"""What a precision does to the next token (models/precision.py): the last position's logits of the model at one
precision and of the same weights in float32, compared. The passes are the caller's (precision_check.py says which
copies it makes and which lock each pass holds); here, one pass and the comparison."""

from __future__ import annotations

import torch

from .. import limits
from ..models.precision import describe
from ..records.precision import PrecisionEffect, PrecisionRow


def last_logits(model, ids: list[int]) -> torch.Tensor:
    """(V,) float32 logits at the prompt's last position, on the CPU."""
    device = model.get_input_embeddings().weight.device
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False, logits_to_keep=1)
    return out.logits[0, -1].float().cpu()


def compare(here: torch.Tensor, fp32: torch.Tensor, pieces, tokens: int, precision: str, running: str = "fp32",
            seconds: float = 0.0, top_n: int = limits.PRECISION_TOP_N) -> PrecisionEffect:
    """Logits at `precision` (here) against the same weights' in float32, for a prompt of `tokens` tokens."""
    delta = (here - fp32).abs()
    p, q = here.softmax(-1), fp32.softmax(-1)
    rank = lambda logits, i: int((logits > logits[i]).sum()) + 1  # noqa: E731 - as the knock-out counts ranks
    ids_top = dict.fromkeys(q.topk(top_n).indices.tolist() + p.topk(top_n).indices.tolist())
    rows = tuple(PrecisionRow(pieces(i), float(p[i]), float(q[i]), rank(here, i), rank(fp32, i))
                 for i in sorted(ids_top, key=lambda i: -float(q[i])))
    return PrecisionEffect(precision, running, describe(precision), float(delta.max()), float(delta.mean()), rows,
                           pieces(int(here.argmax())), pieces(int(fp32.argmax())), tokens, round(seconds * 1000, 1))


__all__ = ["compare", "last_logits"]
