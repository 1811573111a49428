"""One decode step, told once. Every request, alone or among strangers, goes through these stages
each step (the scheduler runs them for all live rows together: model_service/engine/scheduler.py:Scheduler._step):

1. logits    model_service/engine/runner.py:Decoder.step — one forward pass for every row in the batch; the
             LM head runs for each row's last position only, float32 logits (B, V). A newcomer's first
             logits come from its own prefill (Decoder.prefill / Decoder.extend, chunk by chunk).
2. stages    model_service/sampling/pipeline.py:run_stages — each row's own temperature, top-k, top-p, min-p in
             its own order, as (B,) tensors in one vectorised pass; every stage renormalised.
3. draw      model_service/sampling/pipeline.py:draw — one u ~ U[0, 1) per row from the row's own seeded
             generator, read on the final distribution's cumulative bar (argmax for greedy rows).
4. summary   model_service/engine/step.py:summarise — per stage only the top-N probabilities, kept count,
             kept mass, entropy and the chosen token's probability leave the tensors.
5. stop      model_service/engine/step.py:RowState.record — end-of-text, a stop string (found in the decoded
             text by model_service/engine/text_stream.py:TextStream), or max_new_tokens.
6. record    model_service/records/step.py:StepRecord, built in RowState.record and handed to the caller's
             stream by model_service/engine/scheduler.py:Scheduler._deliver; the token is fed back at step 1.

Because a row's draw uses only its own generator and its own logits, a seeded request gets the same
tokens whoever shares its batch (up to float round-off in the forward pass of a padded batch).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..records.settings import SamplingSettings
from ..records.step import Stage, StepRecord, r6
from ..records.utf8 import incomplete_tail, piece_bytes
from ..sampling.pipeline import Stages, draw, fresh_seed, make_generator, run_stages, stage_names
from .text_stream import TextStream


def _entropy_bits(probs: torch.Tensor) -> torch.Tensor:
    """-sum p log2 p per row, 0 log 0 = 0. (xlogy is the textbook form; on CPU it is ~20x slower than a
    log over the vocabulary, and this runs for every distinct stage of every row at every step.)"""
    return -(probs * probs.clamp_min(torch.finfo(probs.dtype).tiny).log2()).sum(dim=-1)


def _kept_mass(before: torch.Tensor, kept: torch.Tensor, kept_before: torch.Tensor) -> torch.Tensor:
    """The mass of `kept` under the distribution `before` (B,). A stage that cut nothing keeps it all."""
    if kept is kept_before:
        return before.sum(dim=-1)
    return torch.bmm(before.unsqueeze(1), kept.to(before.dtype).unsqueeze(2)).view(-1)


class Summary(NamedTuple):
    """One row's step, summarised: what its StepRecord carries from the tensors."""

    ids: list[int]  # the top-N token ids, most probable first
    stages: tuple[Stage, ...]
    logits: tuple[float, ...]  # their raw logits
    capture_ms: float  # time spent summarising the batch (shared by its rows)


def summarise(stages: Stages, tokens: torch.Tensor, top_n: Sequence[int], orders: list[str]):
    """Per row a Summary — only N + a few scalars per stage leave the device.

    tokens: (B,) each row's chosen token; top_n: each row's N (computed for the largest, then cut);
    orders: each row's order, which sets the sequence of its stages (a mixed batch computes them
    under shared names)."""
    started = time.perf_counter()
    # Stages a transform left unchanged share tensors: summarise each distinct one once, each on its
    # own (B, V) tensor (stacking them into one (B, S, V) block outgrows the cache at large B).
    unique: dict[int, int] = {}  # id(probs tensor) -> index among the distinct ones
    names = []  # first stage name of each distinct distribution
    for n in stages.names:
        if id(stages.probs[n]) not in unique:
            unique[id(stages.probs[n])] = len(names)
            names.append(n)
    column = [unique[id(stages.probs[n])] for n in stages.names]  # stage -> distinct index
    ids = stages.window[:, : max(top_n)]  # (B, N)
    raw_logits = stages.logits.gather(1, ids)  # (B, N)
    chosen_col = tokens.view(-1, 1)
    per = [
        (
            torch.count_nonzero(stages.kept[n], dim=-1),  # kept count (B,)
            _entropy_bits(stages.probs[n]),
            stages.probs[n].gather(1, chosen_col).squeeze(1),  # the chosen token's probability (B,)
            stages.probs[n].gather(1, ids),  # the top-N's probabilities (B, N)
        )
        for n in names
    ]
    kept_count = torch.stack([p[0] for p in per], dim=1)  # (B, U)
    entropy = torch.stack([p[1] for p in per], dim=1)
    chosen = torch.stack([p[2] for p in per], dim=1)
    top = torch.stack([p[3] for p in per], dim=1)  # (B, U, N)
    # kept mass: each stage's survivors measured under the stage before it (raw's is itself); a pair
    # of stages that share their distribution is computed once
    masses: dict[tuple[int, int], torch.Tensor] = {}
    for i in range(len(column)):
        pair = (column[max(i - 1, 0)], column[i])
        if pair not in masses:
            before, after = names[pair[0]], names[pair[1]]
            masses[pair] = _kept_mass(stages.probs[before], stages.kept[after], stages.kept[before])
    kept_mass = torch.stack([masses[(column[max(i - 1, 0)], column[i])] for i in range(len(column))], dim=1)  # (B, S)

    rows = []
    for b, (row_ids, row_top, counts, masses, ents, ch, row_logits) in enumerate(zip(
        ids.tolist(), top.tolist(), kept_count.tolist(), kept_mass.tolist(), entropy.tolist(), chosen.tolist(),
        raw_logits.tolist(),
    )):
        n = top_n[b]
        by_name = {
            name: Stage(
                name=name,
                probs=tuple(r6(p) for p in row_top[column[s]][:n]),
                kept_count=int(counts[column[s]]),
                kept_mass=r6(min(masses[s], 1.0)),
                entropy_bits=r6(max(ents[column[s]], 0.0)),
                chosen_prob=r6(ch[column[s]]),
            )
            for s, name in enumerate(stages.names)
        }
        rows.append((row_ids[:n], tuple(by_name[name] for name in stage_names(orders[b])),
                     tuple(r6(v) for v in row_logits[:n])))
    ms = (time.perf_counter() - started) * 1000
    return [Summary(*row, capture_ms=ms) for row in rows]


class RowState:
    """One request's running state across steps."""

    def __init__(self, loaded, settings: SamplingSettings, max_new_tokens: int, stop=(), prefix=(), ignore_eos=False,
                 seed: int | None = None):
        """seed: the seed an unseeded request already drew (a scheduler process rebuilding the row); else the
        settings' own, else a fresh one."""
        self.loaded = loaded  # engine/loaded.py: the model, its tokenizer, pieces and EOS ids
        self.settings = settings
        self.max_new_tokens = max_new_tokens
        self.ignore_eos = ignore_eos
        self.seed = seed if seed is not None else settings.seed if settings.seed is not None else fresh_seed()
        self.stop, self.prefix = tuple(stop), tuple(prefix)  # as given: a scheduler process rebuilds the row
        self.generator = make_generator(self.seed, loaded.model.device)
        if prefix:
            # one draw per step already taken: the generator resumes where a full run would be
            torch.rand(len(prefix), generator=self.generator, device=self.generator.device)
        self.text = TextStream(loaded.decode, stop)
        self.pending = b""  # generated bytes that do not make a whole character yet (a split one)
        for t in prefix:
            self.text.push(t)
            self._advance(t)

    def _advance(self, token_id: int) -> None:
        token = self.loaded.pieces(token_id)
        self.pending = incomplete_tail(self.pending + piece_bytes(token.piece, token.bytes_hex))

    def record(self, step, token_id, draw_info, summary, forward_ms, sampling_ms, batch_size=1) -> StepRecord:
        """Check the stop conditions for the token just drawn; the record a viewer may see."""
        is_eos = token_id in self.loaded.eos_token_ids and not self.ignore_eos
        if not is_eos:
            self.text.push(token_id)
        stop_reason = (
            "eos" if is_eos
            else "stop_string" if self.text.stopped
            else "max_tokens" if step == self.max_new_tokens - 1
            else None
        )
        if stop_reason is not None:
            self.text.flush()
        token = self.loaded.pieces(token_id)
        pending = self.pending
        if not is_eos:
            self._advance(token_id)
        candidate_ids, stages, logits, capture_ms = summary if summary is not None else ((), (), (), 0.0)
        return StepRecord(
            step=step,
            token_id=token_id,
            piece=token.piece,
            special=token.special,
            text=self.text.visible,
            candidates=tuple(self.loaded.pieces(i) for i in candidate_ids),
            stages=stages,
            chosen_rank=draw_info.rank,
            draw=draw_info,
            seed=self.seed,
            forward_ms=round(forward_ms, 3),
            sampling_ms=round(sampling_ms, 3),
            stop_reason=stop_reason,
            order=self.settings.order,
            batch_size=batch_size,
            bytes_hex=token.bytes_hex,
            pending_hex=pending.hex(),
            logits=logits,
            capture_ms=round(capture_ms, 3),
        )


@torch.inference_mode()  # no autograd bookkeeping on the ~60 small ops of a step
def sample_rows(logits: torch.Tensor, rows: list[RowState], top_n, capture=True):
    """One sampling step for (B, V) logits, row i with rows[i]'s settings and generator.
    top_n, capture: one for all rows or one per row (the stages are computed once, with summaries
    if any row wants them). Returns (token ids, draws, summaries or Nones, sampling ms)."""
    started = time.perf_counter()
    b = len(rows)
    top_n = [top_n] * b if isinstance(top_n, int) else list(top_n)
    capture = [capture] * b if isinstance(capture, bool) else list(capture)
    settings = [r.settings for r in rows]
    stages = run_stages(logits, settings, capture=any(capture), min_window=max(top_n))
    token_ids, draws = draw(stages, [s.greedy for s in settings], [r.generator for r in rows])
    if any(capture):
        summaries = summarise(stages, token_ids, top_n, [s.order for s in settings])
        summaries = [s if c else None for s, c in zip(summaries, capture)]
    else:
        summaries = [None] * b
    tokens = token_ids.tolist()
    return tokens, draws, summaries, (time.perf_counter() - started) * 1000
