"""Lesson 13, step 1, measured on the loaded model: the LM head turns one vector into one score per token.

The last position's hidden state h (after the final RMSNorm) is multiplied by the head, a V × d
matrix with one row per vocabulary token. Each logit is a dot product, h · w = ‖h‖ · ‖w‖ · cos(h, w):
‖h‖ is the same for every token, so a token wins by having a long row that points the way h points.
This module runs the real forward pass, takes h from it, recomputes the chosen tokens' logits both
ways in float32 and keeps the model's own logit beside them, so the view can show that they agree.

transformers returns hidden_states[-1] with the final norm already applied; that is checked on the
model (head(hidden_states[-1]) must reproduce the logits), with a fallback that applies the final
norm here for a model that does not. Torch is imported inside the function, so LmHeadView (the
record) can be imported and rebuilt without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

from .. import limits
from ..records import validation

DEFAULT_TOP_K = limits.DEFAULT_LM_HEAD_TOP_K


@dataclass(frozen=True)
class HeadCandidate:
    """One vocabulary row's score for the last position. logit is before any soft-capping."""

    id: int
    logit: float  # h · w (+ bias), float32
    recomputed: float  # ‖h‖ · ‖w‖ · cos(h, w) (+ bias): equal to logit
    model_logit: float  # the model's own output for this id (after soft-capping, if the model caps)
    norm_h: float
    norm_w: float
    cos: float
    bias: float  # 0.0 when the head has no bias
    rank: int  # 0-based, among the whole vocabulary by logit
    prob: float  # softmax of the model's logits (T = 1)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LmHeadView:
    vocab_size: int  # V
    hidden_size: int  # d
    head_parameters: int  # V * d
    bytes_bf16: int  # V * d * 2
    dtype: str  # the head's dtype
    bytes_model_dtype: int  # V * d * bytes per element of that dtype
    model_parameters: int  # every parameter of the model (a tied head is counted once)
    tied: bool  # the head shares its matrix with the input embedding
    has_bias: bool
    softcap: float | None  # final_logit_softcapping: the model outputs cap · tanh(logit / cap)
    position: int  # index of the position whose next token is scored (the last one)
    hidden_norm: float  # ‖h‖
    final_norm_in_last_hidden_state: bool  # hidden_states[-1] already had the final norm
    matches_model: bool  # head(h) reproduced the model's logits (whole vocabulary)
    max_abs_diff: float  # largest |head(h) - model logits| over the vocabulary
    candidates: tuple[HeadCandidate, ...]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LmHeadView:
        d = {f.name: d[f.name] for f in fields(cls)}
        d["candidates"] = tuple(HeadCandidate(**c) for c in d["candidates"])
        return cls(**d)


def lm_head_breakdown(
    model, input_ids: Sequence[int], candidate_ids: Sequence[int] | None = None, top_k: int = DEFAULT_TOP_K
) -> LmHeadView:
    """The LM head at the last position of `input_ids`, for `candidate_ids` (default: the top_k by logit).

    Raises ValueError for an empty prompt or an id outside the vocabulary."""
    import torch

    head = model.get_output_embeddings()
    weight = head.weight  # (V, d)
    vocab, d = weight.shape
    ids = _ids("input_ids", input_ids, vocab)
    if not ids:
        raise ValueError("input_ids is empty: the head needs at least one position")
    bias = getattr(head, "bias", None)
    config = model.config.get_text_config()
    softcap = getattr(config, "final_logit_softcapping", None) or None

    with torch.inference_mode():
        out = _forward(model, torch.tensor([ids], device=weight.device))
        model_logits = out.logits[0, -1].float()  # (V,)
        h, in_last, diff = _final_hidden(model, head, out.hidden_states[-1][:, -1:], model_logits, softcap)
        h = h.float()  # (d,)

        if candidate_ids is None:  # capping is monotonic: the model's top-k is the head's top-k
            cand = model_logits.topk(min(int(top_k), vocab)).indices.tolist()
        else:
            cand = _ids("candidate_ids", candidate_ids, vocab)
        rows = weight[cand].float()  # (K, d): only the candidates' rows leave the head's dtype
        b = bias[cand].float() if bias is not None else torch.zeros(len(cand), device=rows.device)
        dots = rows @ h + b  # (K,) float32
        norm_h = h.norm()
        norm_w = rows.norm(dim=-1)
        cos = (rows @ h) / (norm_w * norm_h).clamp_min(1e-30)
        recomputed = norm_h * norm_w * cos + b
        # rank among the whole vocabulary, by the model's own ordering (capping keeps the order)
        rank = (model_logits.unsqueeze(0) > model_logits[cand].unsqueeze(1)).sum(dim=1)
        prob = torch.softmax(model_logits, dim=-1)[cand]

    candidates = tuple(
        HeadCandidate(
            id=i, logit=float(l), recomputed=float(r), model_logit=float(m), norm_h=float(norm_h),
            norm_w=float(w), cos=float(c), bias=float(bb), rank=int(k), prob=float(p),
        )
        for i, l, r, m, w, c, bb, k, p in zip(
            cand, dots.tolist(), recomputed.tolist(), model_logits[cand].tolist(), norm_w.tolist(),
            cos.tolist(), b.tolist(), rank.tolist(), prob.tolist(),
        )
    )
    scale = max(1.0, float(model_logits.abs().max()))
    tolerance = (1e-3 if weight.dtype == torch.float32 else 3e-2) * scale
    return LmHeadView(
        vocab_size=vocab,
        hidden_size=d,
        head_parameters=vocab * d,
        bytes_bf16=vocab * d * 2,
        dtype=str(weight.dtype).replace("torch.", ""),
        bytes_model_dtype=vocab * d * weight.element_size(),
        model_parameters=sum(p.numel() for p in model.parameters()),
        tied=_tied(model, weight),
        has_bias=bias is not None,
        softcap=float(softcap) if softcap else None,
        position=len(ids) - 1,
        hidden_norm=float(norm_h),
        final_norm_in_last_hidden_state=in_last,
        matches_model=diff <= tolerance,
        max_abs_diff=diff,
        candidates=candidates,
    )


def _forward(model, input_ids):
    """One forward pass with every hidden state; the head only for the last position where supported."""
    try:
        return model(input_ids=input_ids, output_hidden_states=True, use_cache=False, logits_to_keep=1)
    except TypeError:  # an older architecture without logits_to_keep
        return model(input_ids=input_ids, output_hidden_states=True, use_cache=False)


def _ids(name: str, values, vocab: int) -> list[int]:
    """Token ids, each a whole number in the vocabulary: validation.number, the one validator of numbers."""
    return [validation.number(name, v, integer=True, low=0, high=vocab - 1) for v in values]


def apply_softcap(logits, softcap):
    import torch

    return logits if not softcap else torch.tanh(logits / softcap) * softcap


def _final_hidden(model, head, last, model_logits, softcap):
    """(h, final norm already in hidden_states[-1]?, max |head(h) - logits|) for the last position.

    Tries hidden_states[-1] as is (what transformers returns); if the head does not reproduce the
    logits from it, applies the model's final norm and tries again; keeps whichever matches best."""
    def diff(h):
        return float((apply_softcap(head(h).float()[0, -1], softcap) - model_logits).abs().max())

    best = (last[0, -1], True, diff(last))
    if best[2] > 1e-3 * max(1.0, float(model_logits.abs().max())):
        norm = final_norm(model)
        if norm is not None:
            normed = norm(last)
            d = diff(normed)
            if d < best[2] or math.isnan(best[2]):
                best = (normed[0, -1], False, d)
    return best


def final_norm(model):
    base = getattr(model, "model", None) or getattr(model, "base_model", None)
    for name in ("norm", "final_layernorm", "ln_f", "final_norm"):
        module = getattr(base, name, None) or getattr(getattr(base, "language_model", None), name, None)
        if module is not None:
            return module
    return None


def _tied(model, weight) -> bool:
    emb = model.get_input_embeddings()
    w = getattr(emb, "weight", None)
    return w is not None and (w is weight or (w.shape == weight.shape and w.data_ptr() == weight.data_ptr()))


__all__ = ["HeadCandidate", "LmHeadView", "lm_head_breakdown"]
