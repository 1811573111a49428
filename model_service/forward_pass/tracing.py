"""Lesson 10 on the loaded model: one forward pass traced from token ids to logits at every position.

`trace` calls the model directly with output_hidden_states=True (no generate loop) and reduces what
comes back to a Trace record: shapes, embedding rows, residual-stream norms and updates, one block's
attention, the top-N at every position with teacher forcing, the cost of keeping all those logits,
and a logit lens. `attention` re-reads one block's attention for the UI's block picker.

Attention weights without slowing the normal path or touching shared state: SDPA never materialises
them, and switching the model's config to eager for one call would race with a generation running in
another thread (the mask is built for one implementation and consumed by another). Instead a
thread-filtered hook captures the chosen block's attention inputs, and a private shallow copy of that
one attention module, holding its own config set to eager, is re-run on them with an explicit causal
mask. Its output is compared with the model's own attention output, so the weights shown are the
ones the model used (max_abs_diff in the record).
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Sequence

import torch

from .. import limits
from ..engine.runner import sync
from ..records import validation
from ..records.trace import (
    AttentionMap,
    Candidate,
    Embedding,
    EmbeddingRow,
    LensLayer,
    LogitLens,
    LogitsCost,
    PositionPrediction,
    Residual,
    Shapes,
    TeacherForcing,
    Trace,
)
from .lm_head import apply_softcap, final_norm

MAX_TRACE_TOKENS = limits.MAX_PROMPT_TOKENS  # every path shares the prompt cap
FIRST_NUMBERS = 8  # "the first few numbers" of a vector
MAP_POSITIONS = 256  # heatmap columns (norms, updates) kept: the last positions
DETAIL_POSITIONS = 16  # per-position tables (embedding rows, top-N logits) kept: the last positions
ATTENTION_WINDOW = 64  # at most this many positions of attention per head ...
ATTENTION_BUDGET = 40_000  # ... and at most about this many weights per map, whatever the head count
COST_LENGTHS = tuple(2**k for k in range(13))  # 1 … 4096 tokens
CHUNK = 64  # logits rows reduced at a time (64 × 262k × 4 B = 67 MB for Gemma)


def r4(x: float) -> float:
    """4 significant digits: plenty for a chart, and short in JSON."""
    return float(f"{x:.4g}")


class _Stop(Exception):
    """Raised from a hook to end a forward pass once what it needed has been captured."""


class _Hooks:
    """Forward hooks that record only calls made from the thread that set them: the service may be
    running a generation on the same modules in another thread."""

    def __init__(self):
        self.thread = threading.get_ident()
        self.handles = []
        self.seen: dict[str, object] = {}

    def before(self, module, key: str, pick=None) -> None:  # keep (args, kwargs), or pick(the first input)
        def hook(_module, args, kwargs):
            if threading.get_ident() == self.thread:
                self.seen[key] = (args, kwargs) if pick is None else pick(_first_tensor(args, kwargs))

        self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    def after(self, module, key: str, stop: bool = False, pick=None) -> None:
        """Keep the module's output (its first tensor), or pick(it) when given; stop: end the pass there."""
        def hook(_module, _args, output):
            if threading.get_ident() == self.thread:
                output = output[0] if isinstance(output, tuple) else output
                self.seen[key] = output if pick is None else pick(output)
                if stop:
                    raise _Stop

        self.handles.append(module.register_forward_hook(hook))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        return exc[0] is _Stop  # a deliberate stop is not an error


# ---- finding the parts of an arbitrary causal LM ---------------------------------------------------


def _blocks(model) -> torch.nn.ModuleList:
    """The decoder blocks: the ModuleList with one entry per hidden layer (model.model.layers, …)."""
    n = model.config.get_text_config().num_hidden_layers
    for _name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    raise ValueError(f"{type(model).__name__}: no list of {n} decoder blocks found")


def _attention_module(block):
    for name in ("self_attn", "attn", "self_attention", "attention"):
        module = getattr(block, name, None)
        if isinstance(module, torch.nn.Module):
            return module
    return None


def _check_block(model, block, field: str = "block") -> int:
    n = model.config.get_text_config().num_hidden_layers
    return int(validation.number(field, block, integer=True, low=1, high=n))


def _check_ids(ids: Sequence[int], vocab: int) -> list[int]:
    if not ids:
        raise ValueError("the prompt is empty: type some text to trace")
    if len(ids) > MAX_TRACE_TOKENS:
        raise ValueError(f"the prompt is {len(ids)} tokens; the tracer takes at most {MAX_TRACE_TOKENS}")
    bad = [i for i in ids if not 0 <= int(i) < vocab]
    if bad:
        raise ValueError(f"token ids must be between 0 and {vocab - 1}, got {bad[0]!r}")
    return [int(i) for i in ids]


# ---- attention ---------------------------------------------------------------------------------------


def _causal_mask(t: int, sliding_window: int | None, dtype, device) -> torch.Tensor:
    """Additive (1, 1, T, T) mask, as eager attention takes it: 0 where a query may look, min elsewhere."""
    q = torch.arange(t, device=device).unsqueeze(1)
    k = torch.arange(t, device=device).unsqueeze(0)
    allowed = k <= q
    if sliding_window:
        allowed &= q - k < sliding_window
    mask = torch.zeros(t, t, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def _first_tensor(args, kwargs):
    return kwargs.get("hidden_states", args[0] if args else None)


def _eager_weights(module, args, kwargs, t: int):
    """Re-run one attention module in eager mode on its captured inputs: (output, weights (1, H, T, T))."""
    clone = copy.copy(module)  # shares the weights; only the config attribute differs
    config = copy.copy(module.config)
    config._attn_implementation_internal = "eager"  # the internal field: the setter would recurse into shared sub-configs
    clone.config = config
    hidden = _first_tensor(args, kwargs)
    kwargs = {**kwargs, "attention_mask": _causal_mask(t, getattr(module, "sliding_window", None), hidden.dtype, hidden.device)}
    out = clone.forward(*args, **kwargs)  # .forward: skip the module's hooks (shared with the original)
    return out[0], out[1]


def _attention_record(model, pieces, ids, block, captured, own_output, started) -> AttentionMap:
    module = _attention_module(_blocks(model)[block - 1])
    args, kwargs = captured
    t = len(ids)
    out, weights = _eager_weights(module, args, kwargs, t)
    if weights is None or weights.dim() != 4:
        raise ValueError("the eager attention returned no weights")
    diff = float((out.float() - own_output.float()).abs().max())
    heads = weights.shape[1]  # weights: (1, H, T, T)
    size = min(t, ATTENTION_WINDOW, max(8, int(math.sqrt(ATTENTION_BUDGET / heads))))
    start = t - size
    window = weights[0, :, start:, start:].float()
    earlier = weights[0, :, start:, :start].float().sum(-1) if start else torch.zeros(heads, size)
    config = model.config.get_text_config()
    return AttentionMap(
        block=block,
        num_blocks=config.num_hidden_layers,
        num_heads=heads,
        num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
        tokens=t,
        positions=tuple(range(start, t)),
        pieces=tuple(pieces(i) for i in ids[start:]),
        weights=tuple(tuple(tuple(round(x, 4) for x in row) for row in head) for head in window.tolist()),
        earlier=tuple(tuple(round(x, 4) for x in head) for head in earlier.tolist()),
        sliding_window=getattr(module, "sliding_window", None),
        max_abs_diff=diff,
        ms=round((time.perf_counter() - started) * 1000, 1),
    )


def attention(model, pieces, ids: Sequence[int], block: int) -> AttentionMap:
    """Block `block`'s attention (1-based) for the prompt `ids`. The forward pass stops right after
    that block's attention, so an early block costs a fraction of a full pass."""
    started = time.perf_counter()
    block = _check_block(model, block)
    ids = _check_ids(ids, model.get_input_embeddings().weight.shape[0])
    module = _attention_module(_blocks(model)[block - 1])
    if module is None:
        raise ValueError(f"{type(model).__name__}: block {block} has no attention module this tracer knows")
    device = model.get_input_embeddings().weight.device
    with torch.inference_mode():
        with _Hooks() as hooks:
            hooks.before(module, "attn_in")
            hooks.after(module, "attn_out", stop=True)
            input_ids = torch.tensor([ids], device=device)
            try:
                model(input_ids=input_ids, use_cache=False, logits_to_keep=1)
            except TypeError:  # an older architecture without logits_to_keep
                model(input_ids=input_ids, use_cache=False)
        return _attention_record(model, pieces, ids, block, hooks.seen["attn_in"], hooks.seen["attn_out"], started)


# ---- the whole trace ----------------------------------------------------------------------------------


def _rows(x: torch.Tensor) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(r4(v) for v in row) for row in x.tolist())


def _residual(hidden, pre_norm, norm_module, positions) -> Residual:
    last = len(hidden) - 1
    stream = list(hidden[:last]) + [pre_norm if pre_norm is not None else hidden[last]]
    cols = slice(positions[0], positions[-1] + 1)
    s = torch.stack([h[0, cols].float() for h in stream])  # (L + 1, P, d)
    normed = pre_norm is not None and torch.allclose(norm_module(pre_norm), hidden[last], rtol=1e-4, atol=1e-4)
    return Residual(
        positions=tuple(positions),
        norms=_rows(s.norm(dim=-1)),
        updates=_rows((s[1:] - s[:-1]).norm(dim=-1)),
        final_norms=tuple(r4(v) for v in hidden[last][0, cols].float().norm(dim=-1).tolist()),
        first_numbers_start=tuple(r4(v) for v in hidden[0][0, -1, :FIRST_NUMBERS].float().tolist()),
        first_numbers_end=tuple(r4(v) for v in hidden[last][0, -1, :FIRST_NUMBERS].float().tolist()),
        last_is_normed=bool(normed),
        final_norm=type(norm_module).__name__ if norm_module is not None else "",
    )


def _embedding(model, ids, first_hidden, first) -> Embedding:
    weight = model.get_input_embeddings().weight
    rows = weight[torch.tensor(ids[first:], device=weight.device)].float()  # (P, d)
    stream = first_hidden[0, first:].float()
    scale = float(stream[0].norm() / rows[0].norm().clamp_min(1e-30))
    return Embedding(
        matrix=(int(weight.shape[0]), int(weight.shape[1])),
        scale=r4(scale),
        rows=tuple(
            EmbeddingRow(position=first + i, token_id=ids[first + i], values=tuple(r4(v) for v in row[:FIRST_NUMBERS]), norm=r4(n))
            for i, (row, n) in enumerate(zip(rows.tolist(), rows.norm(dim=-1).tolist()))
        ),
        first_position=first,
    )


def _candidates(pieces, ids, probs) -> tuple[Candidate, ...]:
    out = []
    for i, p in zip(ids, probs):
        token = pieces(int(i))
        out.append(Candidate(id=token.id, piece=token.piece, prob=r4(p), special=token.special, bytes_hex=token.bytes_hex))
    return tuple(out)


def _predictions(logits, ids, pieces, top_n, first):
    """Per position: top-N (from `first` on) and the actual next token's probability and rank (all)."""
    t = len(ids)
    nxt = torch.tensor(ids[1:] + [0], device=logits.device)
    probs, ranks, detail = [], [], []
    for lo in range(0, t, CHUNK):
        rows = logits[0, lo : lo + CHUNK].float()  # (C, V)
        lse = rows.logsumexp(-1, keepdim=True)
        target = rows.gather(1, nxt[lo : lo + CHUNK, None])  # (C, 1)
        p_next = (target - lse).exp().squeeze(1).tolist()
        r_next = (rows > target).sum(-1).tolist()
        top = rows.topk(top_n, dim=-1)
        top_p = (top.values - lse).exp().tolist()
        for j, pos in enumerate(range(lo, min(lo + CHUNK, t))):
            last = pos == t - 1
            if not last:
                probs.append(r4(p_next[j]))
                ranks.append(int(r_next[j]))
            if pos >= first:
                detail.append(PositionPrediction(
                    position=pos, token=pieces(ids[pos]),
                    top=_candidates(pieces, top.indices[j].tolist(), top_p[j]),
                    next=None if last else pieces(ids[pos + 1]),
                    next_rank=None if last else int(r_next[j]),
                    next_prob=None if last else r4(p_next[j]),
                ))
    nll = -sum(math.log(max(p, 1e-45)) for p in probs) / len(probs) if probs else 0.0
    teacher = TeacherForcing(probs=tuple(probs), ranks=tuple(ranks), mean_nll=r4(nll), perplexity=r4(math.exp(nll)))
    return tuple(detail), teacher


def _lens(model, hidden, logits, norm_module, softcap, pieces, top_n) -> LogitLens:
    """Final norm + head on each snapshot's last position. hidden_states[L] already carries the final
    norm, so only indices 0..L−1 get it: normalising twice would change the numbers (RMSNorm with a
    learned scale is not idempotent)."""
    head = model.get_output_embeddings()
    last = len(hidden) - 1
    raw = torch.stack([h[0, -1] for h in hidden])  # (L + 1, d)
    vectors = torch.cat([norm_module(raw[:last]) if norm_module is not None else raw[:last], raw[last:]])
    lens = apply_softcap(head(vectors).float(), softcap)  # (L + 1, V)
    own = logits[0, -1].float()
    target = int(own.argmax())
    logp = lens.log_softmax(-1)
    top = logp.topk(top_n, dim=-1)
    t_logit = lens[:, target : target + 1]
    ranks = (lens > t_logit).sum(-1).tolist()
    layers = tuple(
        LensLayer(index=k, top=_candidates(pieces, top.indices[k].tolist(), top.values[k].exp().tolist()),
                  target_prob=r4(float(logp[k, target].exp())), target_rank=int(ranks[k]))
        for k in range(last + 1)
    )
    return LogitLens(
        position=logits.shape[1] - 1, target=pieces(target), layers=layers,
        max_abs_diff=float((lens[last] - own).abs().max()), softcap=float(softcap) if softcap else None,
    )


def _cost(t: int, vocab: int, logits) -> LogitsCost:
    lengths = tuple(sorted(set(COST_LENGTHS) | {t}))
    return LogitsCost(
        tokens=t, vocab_size=vocab, actual_bytes=logits.numel() * logits.element_size(), lengths=lengths,
        bytes_fp32=tuple(n * vocab * 4 for n in lengths), bytes_bf16=tuple(n * vocab * 2 for n in lengths),
        keep_one_fp32=vocab * 4, keep_one_bf16=vocab * 2,
    )


def trace(
    model, tokenizer, pieces, ids: Sequence[int], *, prompt: str = "", chat: bool = False, model_name: str = "",
    tokenize_ms: float = 0.0, block: int | None = None, top_n: int = limits.DEFAULT_TRACE_TOP_N,
) -> Trace:
    """Trace one forward pass over `ids` (batch of one). block: whose attention to keep (1-based;
    default the middle block). pieces: token id -> Token (the service's PieceTable)."""
    started = time.perf_counter()
    config = model.config.get_text_config()
    n_layers = config.num_hidden_layers
    block = _check_block(model, block if block is not None else (n_layers + 1) // 2)
    top_n = validation.number("top_n", top_n, integer=True, low=1, high=limits.MAX_TRACE_TOP_N)
    emb = model.get_input_embeddings().weight
    ids = _check_ids(ids, emb.shape[0])
    t = len(ids)
    norm_module = final_norm(model)
    softcap = getattr(config, "final_logit_softcapping", None) or None
    attn_module = _attention_module(_blocks(model)[block - 1])

    with torch.inference_mode():
        input_ids = torch.tensor([ids], device=emb.device)
        with _Hooks() as hooks:
            if norm_module is not None:
                hooks.before(norm_module, "pre_norm")
            if attn_module is not None:
                hooks.before(attn_module, "attn_in")
                hooks.after(attn_module, "attn_out")
            t0 = time.perf_counter()
            out = model(input_ids=input_ids, output_hidden_states=True, use_cache=False)
            sync(emb.device)
            forward_ms = (time.perf_counter() - t0) * 1000
        hidden, logits = out.hidden_states, out.logits
        pre_norm = _first_tensor(*hooks.seen["pre_norm"]) if "pre_norm" in hooks.seen else None

        attention_map, note = None, ""
        if "attn_in" in hooks.seen and "attn_out" in hooks.seen:
            try:
                attention_map = _attention_record(model, pieces, ids, block, hooks.seen["attn_in"], hooks.seen["attn_out"], time.perf_counter())
            except (TypeError, ValueError, RuntimeError, AttributeError, IndexError, KeyError) as e:
                note = f"attention could not be re-run for {type(model).__name__}: {e}"
        else:
            note = f"no attention module found in block {block} of {type(model).__name__}"

        detail_first = max(0, t - DETAIL_POSITIONS)
        predictions, teacher = _predictions(logits, ids, pieces, min(top_n, logits.shape[-1]), detail_first)
        record = dict(
            shapes=Shapes(
                input_ids=tuple(input_ids.shape), embeddings=tuple(hidden[0].shape), num_hidden_states=len(hidden),
                hidden_state=tuple(hidden[-1].shape),
                hidden_states_same_shape=all(h.shape == hidden[0].shape for h in hidden),
                logits=tuple(logits.shape), logits_dtype=str(logits.dtype).replace("torch.", ""),
                num_layers=n_layers, hidden_size=int(hidden[0].shape[-1]), vocab_size=int(logits.shape[-1]),
            ),
            embedding=_embedding(model, ids, hidden[0], detail_first),
            residual=_residual(hidden, pre_norm, norm_module, range(max(0, t - MAP_POSITIONS), t)),
            lens=_lens(model, hidden, logits, norm_module, softcap, pieces, min(top_n, logits.shape[-1])),
            cost=_cost(t, int(logits.shape[-1]), logits),
        )
    return Trace(
        prompt=prompt, chat=bool(chat), model=model_name or type(model).__name__, device=str(emb.device),
        tokens=tuple(pieces(i) for i in ids),
        starts_with_bos=getattr(tokenizer, "bos_token_id", None) is not None and ids[0] == tokenizer.bos_token_id,
        tokenize_ms=round(tokenize_ms, 3), forward_ms=round(forward_ms, 1),
        trace_ms=round((time.perf_counter() - started) * 1000, 1), attention=attention_map, attention_note=note,
        predictions=predictions, teacher=teacher, **record,
    )
