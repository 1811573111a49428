"""Activation patching: copy the residual stream at one (position, block) from a second prompt's pass into the first
prompt's, and read the next token there.

    "The capital of Italy is"   ──► one pass: the stream after every block, at every position (hidden_states)
    "The capital of France is"  ──► one pass per cell, each row of a batch with its own cell patched:
                                    after block b, row i's stream at position p := Italy's at (p, b)
                                ──► p(" Paris") and p(" Rome") at the last position, per cell

Where the copy turns " Paris" into " Rome" is where (and by when) the model carries what the two prompts differ in.
The prompts must have as many tokens (a position means the same slot in both). A cell's position may be None:
every position at once (after the last block that gives the second prompt's own next-token distribution).
Rows of one batch share the model's weights and nothing else: each row's hook writes only its own row.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import torch

from .. import limits
from ..records import validation
from ..records.intervention import PatchCell, PatchResult
from .tracing import _blocks, _check_block, _check_ids

BATCH = 32  # cells per forward pass


def check_cells(model, cells, tokens: int) -> list[tuple[int | None, int]]:
    """(position, block) pairs: position from 0 (None: every position), block from 1; ValueErrors name the field."""
    if isinstance(cells, (str, bytes)) or not isinstance(cells, Sequence) or not cells:
        raise ValueError("cells must be a list of [position, block] pairs")
    if len(cells) > limits.MAX_PATCH_CELLS:
        raise ValueError(f"cells: at most {limits.MAX_PATCH_CELLS} at once, got {len(cells)}")
    out = []
    for cell in cells:
        if isinstance(cell, (str, bytes)) or not isinstance(cell, Sequence) or len(cell) != 2:
            raise ValueError(f"cells: each is a [position, block] pair, got {cell!r}")
        position, block = cell
        if position is not None:  # (None: every position)
            position = int(validation.number("position", position, integer=True, low=0, high=tokens - 1))
        out.append((position, _check_block(model, block)))
    return out


@torch.inference_mode()
def block_outputs(model, ids) -> tuple[torch.Tensor, torch.Tensor]:
    """The stream after each block ((L, T, d); the last one before the final norm, which transformers'
    hidden_states[L] already has) and the last logits of one prompt, read by hooks that hear only this thread (a
    generation may run on the same blocks in another)."""
    blocks, thread = _blocks(model), threading.get_ident()
    kept: dict[int, torch.Tensor] = {}

    def keep(i, out):
        if threading.get_ident() == thread:
            kept[i] = _tensor(out)[0].clone()

    handles = [b.register_forward_hook(lambda _m, _a, out, i=i: keep(i, out)) for i, b in enumerate(blocks)]
    try:
        out = model(input_ids=torch.tensor([ids], device=model.get_input_embeddings().weight.device), use_cache=False,
                    logits_to_keep=1)
    finally:
        for h in handles:
            h.remove()
    return torch.stack([kept[i] for i in range(len(blocks))]), out.logits[0, -1].float()


def _tensor(out):
    return out[0] if isinstance(out, tuple) else out


@torch.inference_mode()
def patched_logits(model, ids: Sequence[int], source_ids: Sequence[int], cells) -> tuple[torch.Tensor, torch.Tensor,
                                                                                        torch.Tensor, list]:
    """(the prompt's own last logits, the source's, each cell's (N, V), the checked cells), float32."""
    vocab = model.get_input_embeddings().weight.shape[0]
    ids, source_ids = _check_ids(ids, vocab), _check_ids(source_ids, vocab)
    if len(ids) != len(source_ids):
        raise ValueError(f"source must have as many tokens as the prompt ({len(source_ids)} vs {len(ids)}): "
                         "a position is the same slot in both")
    cells = check_cells(model, cells, len(ids))
    streams, source_logits = block_outputs(model, source_ids)
    device = streams.device
    blocks, thread = _blocks(model), threading.get_ident()
    own = model(input_ids=torch.tensor([ids], device=device), use_cache=False, logits_to_keep=1).logits[0, -1].float()
    rows = []
    for start in range(0, len(cells), BATCH):
        chunk = cells[start:start + BATCH]
        by_block: dict[int, list[tuple[int, int | None]]] = {}
        for row, (position, block) in enumerate(chunk):
            by_block.setdefault(block, []).append((row, position))

        def hook(_module, _args, out, block, by_block=by_block):
            if threading.get_ident() != thread:
                return None
            hidden = _tensor(out)
            for row, position in by_block[block]:
                where = slice(None) if position is None else slice(position, position + 1)
                hidden[row, where] = streams[block - 1, where].to(hidden.dtype)
            return out

        handles = [blocks[b - 1].register_forward_hook(lambda m, a, o, b=b: hook(m, a, o, b)) for b in by_block]
        try:
            batch = torch.tensor([ids] * len(chunk), device=device)
            rows.append(model(input_ids=batch, use_cache=False, logits_to_keep=1).logits[:, -1].float())
        finally:
            for h in handles:
                h.remove()
    return own, source_logits, torch.cat(rows), cells


def patch(model, pieces, ids, source_ids, cells, candidate: int | None = None) -> PatchResult:
    """The cells' next-token odds after the patch: for the prompt's own top token (or `candidate`) and the source's."""
    started = time.perf_counter()
    own, source, rows, cells = patched_logits(model, ids, source_ids, cells)
    answer = int(own.argmax()) if candidate is None else candidate
    other = int(source.argmax())
    if other == answer:  # the two prompts agree: the source's runner-up is the rival worth watching
        other = int(source.topk(2).indices[1])
    probs = rows.softmax(-1)
    top = probs.max(-1)
    clean, moved = own.softmax(-1), source.softmax(-1)
    return PatchResult(
        candidate=pieces(answer), source_answer=pieces(other), tokens=tuple(pieces(i) for i in ids),
        clean=(float(clean[answer]), float(clean[other])), source=(float(moved[answer]), float(moved[other])),
        cells=tuple(PatchCell(position=p, block=b, candidate=float(probs[i, answer]), source_answer=float(probs[i, other]),
                              top=pieces(int(top.indices[i])), top_prob=float(top.values[i]))
                    for i, (p, b) in enumerate(cells)),
        ms=round((time.perf_counter() - started) * 1000, 1))


__all__ = ["block_outputs", "check_cells", "patch", "patched_logits"]
