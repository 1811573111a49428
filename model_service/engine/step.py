"""One decode step, told once. Every request, alone or among strangers, goes through these stages
each step (the scheduler runs them for all live rows together: model_service/engine/scheduler.py:Scheduler._step):

1. logits    model_service/engine/runner.py:Decoder.step — one forward pass for every row in the batch; the
             LM head runs for each row's last position only, float32 logits (B, V). A newcomer's first
             logits come from its own prefill (Decoder.prefill / Decoder.extend, chunk by chunk).
2. stages    model_service/sampling/pipeline.py:run_stages — each row's own temperature, top-k, top-p, min-p in
             its own order, as (B,) tensors in one vectorised pass; each stage a Distribution measured on demand
             (model_service/sampling/distribution.py: on the ranking window where its survivors lie in it).
3. draw      model_service/sampling/draw.py:draw — one u ~ U[0, 1) per row from the row's own seeded
             generator, read on the final distribution's cumulative bar (argmax for greedy rows). (2 and 3: choose)
4. stop      RowState.advance — end-of-text, a stop string (found in the decoded text by
             model_service/engine/text_stream.py:TextStream), or max_new_tokens; the token is fed back at step 1.
5. summary   summarise — per stage only the top-N probabilities, kept count, kept mass, entropy and the chosen
             token's probability leave the tensors, in one packed copy to the host.
6. record    model_service/records/step.py:StepRecord, built in RowState.record_of and handed to the caller's
             stream. 5 and 6 run in the output worker while the next step's forward pass runs
             (model_service/engine/output.py; Scheduler._emit).

Because a row's draw uses only its own generator and its own logits, a seeded request gets the same
tokens whoever shares its batch (up to float round-off in the forward pass of a padded batch).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from typing import NamedTuple

import torch

from .. import limits
from ..records.settings import ADJUSTERS, BANS, LESSON_STAGES, SamplingSettings
from ..records.step import Stage, StepRecord, r6
from ..records.utf8 import incomplete_tail, piece_bytes
from ..sampling.draw import draw_at, side_chance, take_us
from ..sampling.penalties import RowContext
from ..sampling.pipeline import Stages, fresh_seed, make_generator, run_stages, stage_names
from .text_stream import TextStream

# stages that change logits and cut nothing: their kept mass is 1 (the bans cut: a banned token's mass goes)
RESHAPES = ("temperature", *(n for n in ADJUSTERS if n not in BANS))


class Summary(NamedTuple):
    """One row's step, summarised: what its StepRecord carries from the tensors."""

    ids: list[int]  # the top-N token ids, most probable first
    stages: tuple[Stage, ...]
    logits: tuple[float, ...]  # their raw logits
    adjusted: tuple[tuple[int, float | None], ...]  # (token id, logit moved by the bias, penalties, DRY; None:
    # banned), bans and the largest moves first
    capture_ms: float  # time spent summarising the batch (shared by its rows)


def summarise(stages: Stages, tokens: torch.Tensor, top_n: Sequence[int], orders: list):
    """Per row a Summary — only N + a few scalars per stage leave the device, in one packed copy.

    tokens: (B,) each row's chosen token; top_n: each row's N (computed for the largest, then cut);
    orders: each row's order, or its stage names (a custom chain), which set the sequence of its stages (a mixed
    batch computes them under shared names). Each distinct distribution is measured once (sampling/distribution.py: on the
    ranking window where its survivors lie in it). A stage's kept mass, the mass its survivors had under the
    stage before, is p_before(top) / p_after(top) for its most probable token: a cut leaves the survivors'
    logits as they were (so every survivor gives the same ratio), and greedy's one-hot keeps only that token.
    A record carries the lesson's stages always (LESSON_STAGES) and any other stage of its order only where it
    changed what the record shows (a bias, a penalty, a cut that removed a token, XTC's chance): a run with the
    lesson's knobs keeps the lesson's six stages."""
    started = time.perf_counter()
    b = tokens.shape[0]
    distinct = list({id(stages.dists[n]): stages.dists[n] for n in stages.names}.values())
    column = {n: next(i for i, d in enumerate(distinct) if d is stages.dists[n]) for n in stages.names}
    orders = [o if isinstance(o, tuple) else stage_names(o) for o in orders]  # each row's stage names
    cuts = sorted({(column[a], column[n]) for names in set(orders) for a, n in itertools.pairwise(names)
                   if n not in RESHAPES and column[a] != column[n]})
    ids = stages.shown[:, : max(top_n)]  # (B, N): the raw top-N
    picked = torch.cat([ids, tokens.view(-1, 1)], dim=1)  # the top-N, then the chosen token
    u, n_max = len(distinct), ids.shape[1]
    applied = list(stages.applied)
    moved_ids, moved = _moved(stages)
    packed = torch.cat(
        [torch.stack([d.at(picked) for d in distinct], dim=1).flatten(1),  # (B, U * (N + 1))
         torch.stack([d.count for d in distinct], dim=1).float(),  # (B, U)
         torch.stack([d.entropy_nats for d in distinct], dim=1) / math.log(2),  # (B, U) bits
         stages.raw.gather(1, ids)]  # (B, N)
        + [(distinct[i].at(distinct[j].top) / distinct[j].at(distinct[j].top)) for i, j in cuts]
        + [stages.applied[n].float().view(-1, 1) for n in applied] + [moved_ids, moved], dim=1)  # NaN: no value
    host = packed.double().cpu()  # the one copy to the host; then Python lists, a few calls for the whole step
    at = list(itertools.accumulate([0, u * (n_max + 1), u, u, n_max, len(cuts)]))
    probs = host[:, at[0]:at[1]].reshape(b, u, n_max + 1).tolist()
    counts, bits = host[:, at[1]:at[2]].tolist(), host[:, at[2]:at[3]].clamp(min=0.0).tolist()
    logits = host[:, at[3]:at[4]].tolist()
    mass = {pair: host[:, at[4] + k].clamp(max=1.0).tolist() for k, pair in enumerate(cuts)}
    values = {n: host[:, at[5] + k].tolist() for k, n in enumerate(applied)}
    width = moved.shape[1]
    moves = zip(host[:, at[5] + len(applied):][:, :width].long().tolist(), host[:, -width:].tolist()) if width else None
    ids_h = ids.tolist()
    rows = []
    for r in range(b):
        n, names = top_n[r], orders[r]
        row = []
        for i, name in enumerate(names):
            c = column[name]
            pair = (column[names[i - 1]], c) if i else None
            stage = Stage(
                name=name,
                probs=tuple(r6(p) for p in probs[r][c][:n]),
                kept_count=int(counts[r][c]),
                kept_mass=r6(mass[pair][r]) if pair in mass else 1.0,  # raw, a reshape, an unchanged stage
                entropy_bits=r6(bits[r][c]),
                chosen_prob=r6(probs[r][c][n_max]),
                applied=None if name not in values or math.isnan(values[name][r]) else r6(values[name][r]),
            )
            if name in LESSON_STAGES or stage.applied is not None or _moved_what_is_shown(stage, row[-1]):
                row.append(stage)  # a stage beyond the lesson's that left this row as it was is not recorded
        shifted = next(moves) if moves is not None else ((), ())
        rows.append((ids_h[r][:n], tuple(row), tuple(r6(v) for v in logits[r][:n]),
                     tuple((t, None if d == -math.inf else r6(d)) for t, d in zip(*shifted) if d != 0)))
    ms = (time.perf_counter() - started) * 1000
    return [Summary(*row, capture_ms=ms) for row in rows]


def _moved(stages: Stages) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's tokens whose logit the bias, penalties, DRY and bans moved, the bans (-inf) and then the largest
    moves first: (ids, adjusted - raw), (B, M) each (M = 0 where nothing adjusts the batch; a row that moved fewer
    has zeros after)."""
    b = stages.raw.shape[0]
    if stages.logits is stages.raw:
        empty = stages.raw.new_zeros((b, 0))
        return empty, empty
    delta = stages.logits - stages.raw
    delta = delta.masked_fill(delta.isnan() | (delta == math.inf), 0.0)  # -inf stays: a ban
    ids = delta.abs().topk(min(limits.MAX_ADJUSTED_SHOWN, delta.shape[-1]), dim=-1).indices
    return ids.to(delta.dtype), delta.gather(1, ids)


def _moved_what_is_shown(stage: Stage, before: Stage) -> bool:
    """Whether a stage changed what its record shows: its kept count, or a probability or its entropy by more than
    limits.STAGE_SHOWN_CHANGE of itself. Not equality of the rounded numbers: a bias on a token of p 1e-9 moves the
    others in their sixth digit or not as float32 round-off falls (another kernel, another thread count), and the
    record's stages would come and go with it."""
    if stage.kept_count != before.kept_count or len(stage.probs) != len(before.probs):
        return True
    now = (*stage.probs, stage.entropy_bits, stage.chosen_prob)
    then = (*before.probs, before.entropy_bits, before.chosen_prob)
    return any(abs(a - b) > limits.STAGE_SHOWN_CHANGE * max(abs(a), abs(b)) + 1e-12 for a, b in zip(now, then))


class RowState:
    """One request's running state across steps."""

    def __init__(self, loaded, settings: SamplingSettings, max_new_tokens: int, stop=(), prefix=(), ignore_eos=False,
                 seed: int | None = None, device=None):
        """seed: the seed an unseeded request already drew (a scheduler process rebuilding the row); else the
        settings' own, else a fresh one. device: its generator's (default the model's; a what-if, which is given
        its u, keeps it on the CPU)."""
        self.loaded = loaded  # engine/loaded.py: the model, its tokenizer, pieces and EOS ids
        self.settings = settings
        self.max_new_tokens = max_new_tokens
        self.ignore_eos = ignore_eos
        self.seed = seed if seed is not None else settings.seed if settings.seed is not None else fresh_seed()
        self.stop, self.prefix = tuple(stop), tuple(prefix)  # as given: a scheduler process rebuilds the row
        self.generator = make_generator(self.seed, loaded.model.device if device is None else device)
        if prefix:
            # one draw per step already taken: the generator resumes where a full run would be
            torch.rand(len(prefix), generator=self.generator, device=self.generator.device)
        self.prompt: tuple[int, ...] = ()  # its prompt's token ids (the Job that runs it sets them)
        self.breakers = loaded.breakers(settings.dry_sequence_breakers) if settings.dry else frozenset()
        # min_tokens holds back the tokens that would end the row (none when it ignores them, as vLLM has it)
        self.stop_ids = frozenset(loaded.eos_token_ids) if settings.min_tokens and not ignore_eos else frozenset()
        # mirostat's mu for the next step: a continued run's (its last record's), else 2 tau (llama.cpp's start)
        self.mirostat_mu = settings.start_mu
        self.generated: list[int] = list(prefix)  # every token it took: with the prompt, what penalties count
        self.text = TextStream(loaded.decode, stop)
        self.pending = b""  # generated bytes that do not make a whole character yet (a split one)
        for n, t in enumerate(prefix, 1):
            self.text.push(t, search=self._searches(n))
            self._advance(t)

    def context(self) -> RowContext:
        """What this row's sampler reads at its next step besides its logits (sampling/penalties.py)."""
        return RowContext(self.prompt, self.generated,
                          side_chance(self.seed, len(self.generated)) if self.settings.xtc else 0.0,
                          self.breakers, self.mirostat_mu if self.settings.mirostat else math.nan,
                          self.stop_ids)

    def _searches(self, n: int) -> bool:
        """Whether the n-th generated token's text is searched for stop strings: vLLM searches only once more than
        min_tokens are generated (transformers' min_new_tokens holds back the end token alone)."""
        return not (self.settings.order == "vllm" and n <= self.settings.min_tokens)

    def _advance(self, token_id: int) -> None:
        token = self.loaded.pieces(token_id)
        self.pending = incomplete_tail(self.pending + piece_bytes(token.piece, token.bytes_hex))

    def advance(self, step: int, token_id: int) -> Turn:
        """Take the token just drawn: the stop conditions, the text so far. Runs at once, in the scheduler's loop
        (whether the row goes on decides the next step's batch); its record can be built later (record_of)."""
        self.generated.append(token_id)
        is_eos = token_id in self.loaded.eos_token_ids and not self.ignore_eos
        if not is_eos:
            self.text.push(token_id, search=self._searches(len(self.generated)))
        stop_reason = (
            "eos" if is_eos
            else "stop_string" if self.text.stopped
            else "max_tokens" if step == self.max_new_tokens - 1
            else None
        )
        if stop_reason is not None:
            self.text.flush()
        pending = self.pending
        if not is_eos:
            self._advance(token_id)
        return Turn(step, token_id, self.text.visible, stop_reason, pending.hex(),
                    self.mirostat_mu if self.settings.mirostat else None)

    def record_of(self, turn: Turn, draw_info, summary, forward_ms, sampling_ms, batch_size=1) -> StepRecord:
        """The record a viewer may see of a step this row took (advance)."""
        token = self.loaded.pieces(turn.token_id)
        candidate_ids, stages, logits, adjusted, capture_ms = summary if summary is not None else ((), (), (), (), 0.0)
        return StepRecord(
            step=turn.step,
            token_id=turn.token_id,
            piece=token.piece,
            special=token.special,
            text=turn.text,
            candidates=tuple(self.loaded.pieces(i) for i in candidate_ids),
            stages=stages,
            chosen_rank=draw_info.rank,
            draw=draw_info,
            seed=self.seed,
            forward_ms=round(forward_ms, 3),
            sampling_ms=round(sampling_ms, 3),
            stop_reason=turn.stop_reason,
            order=self.settings.order,
            batch_size=batch_size,
            bytes_hex=token.bytes_hex,
            pending_hex=turn.pending_hex,
            logits=logits,
            capture_ms=round(capture_ms, 3),
            mirostat_mu=turn.mirostat_mu,
            adjusted=adjusted,
        )

    def record(self, step, token_id, draw_info, summary, forward_ms, sampling_ms, batch_size=1) -> StepRecord:
        """advance, then record_of: a step taken and recorded at once."""
        return self.record_of(self.advance(step, token_id), draw_info, summary, forward_ms, sampling_ms, batch_size)


class Turn(NamedTuple):
    """What a row's step decided at once: its token, its text so far, its stop (None: it goes on)."""

    step: int
    token_id: int
    text: str
    stop_reason: str | None
    pending_hex: str  # generated bytes before this token that did not make a whole character
    mirostat_mu: float | None = None  # mirostat's mu after this step (what the next step's cut reads)


class Chosen(NamedTuple):
    """A step's tokens, drawn; its summaries are made from `stages` after (summarise_chosen)."""

    stages: Stages
    token_ids: torch.Tensor  # (B,)
    tokens: list[int]
    draws: list
    top_n: list[int]
    capture: list[bool]
    orders: list[str]
    ms: float  # the time the stages and the draw took
    us: list[float]  # each row's u for this step, greedy rows' too (a kept step: model_service/engine/kept.py)


@torch.inference_mode()
def choose(logits: torch.Tensor, rows: list[RowState], top_n, capture=True, us=None) -> Chosen:
    """The stages and the draw of one step for (B, V) logits, row i with rows[i]'s settings and generator: what the
    next forward pass needs. top_n, capture: one for all rows or one per row. us: each row's u, given (a what-if
    reads the run's own: engine/what_if.py); None takes them from the rows' generators."""
    started = time.perf_counter()
    b = len(rows)
    top_n = [top_n] * b if isinstance(top_n, int) else list(top_n)
    capture = [capture] * b if isinstance(capture, bool) else list(capture)
    settings = [r.settings for r in rows]
    contexts = ([r.context() for r in rows] if any(s.penalised or s.xtc or s.dry or s.mirostat or s.bans for s in settings)
                else None)
    # the draw needs each stage's normaliser, not its entropy: the summaries measure that (summarise_chosen, which a
    # scheduler runs in its output thread while the next forward pass runs), off the step's critical path
    stages = run_stages(logits, settings, capture=False, min_window=max(top_n), contexts=contexts)
    us = take_us([r.generator for r in rows]) if us is None else list(us)
    token_ids, draws = draw_at(stages, [None if s.greedy else u for s, u in zip(settings, us)])
    for row, d in zip(rows, draws):
        if row.settings.mirostat:
            row.mirostat_mu = row.settings.next_mu(row.mirostat_mu, d.high - d.low)  # d: the final bar's interval
    return Chosen(stages, token_ids, token_ids.tolist(), draws, top_n, capture, [s.stages for s in settings],
                  (time.perf_counter() - started) * 1000, us)



@torch.inference_mode()
def summarise_chosen(chosen: Chosen) -> tuple[list, float]:
    """Per row its Summary (None where capture is off), and the time they took. May run in another thread than
    choose(): the stages' tensors are never written after, and their entropies are measured here (choose() does not
    need them), which only this thread reads."""
    started = time.perf_counter()
    if not any(chosen.capture):
        return [None] * len(chosen.tokens), 0.0
    summaries = summarise(chosen.stages, chosen.token_ids, chosen.top_n, chosen.orders)
    return [s if c else None for s, c in zip(summaries, chosen.capture)], (time.perf_counter() - started) * 1000


def sample_rows(logits: torch.Tensor, rows: list[RowState], top_n, capture=True):
    """One sampling step, at once: choose, then summarise_chosen. Returns (token ids, draws, summaries or Nones,
    sampling ms)."""
    chosen = choose(logits, rows, top_n, capture)
    summaries, ms = summarise_chosen(chosen)
    return chosen.tokens, chosen.draws, summaries, chosen.ms + ms
