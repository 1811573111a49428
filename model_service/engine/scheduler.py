"""The scheduler that owns the model: one thread runs every forward pass, for every caller (on a CPU the app
runs it in a process of its own, away from the web server's GIL: model_service/engine/scheduler_process.py).

Continuous (iteration-level) batching, as vLLM and TGI do it. Requests from any caller (generate,
Step, generate_batch, the API) wait in one FIFO queue; at every step boundary

  1. cancelled rows leave the batch: a closed stream costs no compute after this point;
  2. waiting requests take free rows, first come first served, at most `max_rows` rows in all. A caller's
     requests (generate_batch) start together. A long request (more than limits.LONG_REQUEST_TOKENS new
     tokens) may hold at most half the rows; shorter requests behind one that would exceed that share go
     first, so a room of short requests is never starved;
  3. newcomers read their prompt in chunks within a token budget per step (first chunks of several newcomers
     in padded passes, prompts of similar length together; later chunks of a long prompt alone,
     round-robin), so a 1,024-token prompt never stalls everyone for the whole of its prefill;
  4. one forward pass for every decoding row, then one sampling pass over those rows plus the
     newcomers whose prompt is read (the decode step of model_service/engine/step.py);
  5. each row's record goes to its own caller; finished rows leave; newcomers' caches join the batch.

Each row keeps its own settings, seeded generator and stop conditions, so a seeded request gets the same
tokens alone, or joining strangers mid-flight. An error in one row (its prefill, its record) fails that row's
caller only; an error in the shared forward or sampling pass fails the rows of that step, and the loop goes on.
The model lock is held for each forward pass: a trace or an LM-head view waits at most one step. At idle
moments after its first step the loop moves a CPU model's weights into huge pages (models/huge_pages.py).
"""

from __future__ import annotations

import atexit
import sys
import threading
import traceback
import weakref
from collections import deque

import torch

from .. import limits
from ..records import validation
from ..records.step import Room, Waiting
from .invariant import is_batch_invariant
from .loaded import LoadedModel
from .output import OutputWorker
from .runner import Decoder
from .static_decode import StaticDecoder, uses_graphs
from .step import Chosen, choose, summarise_chosen
from .streams import Job, JobStatus


class Scheduler:
    def __init__(self, loaded: LoadedModel, max_rows: int, queue_size: int):
        if max_rows < 1 or queue_size < 0:
            raise ValueError(f"max_rows must be >= 1 and queue_size >= 0, got {max_rows} and {queue_size}")
        self.loaded, self.lock, self._pad = loaded, loaded.lock, loaded.pad_id
        self.max_rows, self.queue_size = max_rows, queue_size
        self._cond = threading.Condition()
        self._queue: deque[list[Job]] = deque()  # one entry per caller: its jobs that wait for rows
        self._prefilling: list[Job] = []  # hold a row, reading their prompt
        self._running: list[Job] = []  # in the batch, in batch-row order
        self.graphs = uses_graphs(loaded.model)
        self._decoder = self._batch_decoder()
        self.steps = 0  # sampling steps run since start
        self._output = OutputWorker()  # engine/output.py: step N's records are built while step N+1's forward runs
        self._stopping = False
        self._reason: Exception = RuntimeError("the model service is shutting down")
        self._thread = threading.Thread(target=self._loop, name="model-scheduler", daemon=True)
        self._thread.start()
        # a daemon thread killed inside a torch op at interpreter exit aborts the process: the loop ends first
        atexit.register(_stop, weakref.ref(self))

    def stop(self, timeout: float = 10.0, reason: Exception | str = "the model service is shutting down") -> None:
        """End the loop after the step under way; requests still in flight get `reason` as an error."""
        with self._cond:
            self._stopping = True
            self._reason = reason if isinstance(reason, Exception) else RuntimeError(reason)
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- called from the callers' threads --------------------------------------------------------------

    def submit(self, jobs: list[Job]) -> None:
        """Queue one caller's jobs, or refuse them at once when the room's queue is full."""
        with self._cond:
            if self._stopping:
                raise validation.again(self._reason)
            waiting = sum(len(entry) for entry in self._queue)
            if waiting + len(jobs) > self.queue_size:
                raise validation.Unavailable("room_full", waiting=f"{waiting:,}", limit=f"{self.queue_size:,}")
            self._queue.append(list(jobs))
            self._cond.notify()

    def cancel(self, jobs: list[Job]) -> None:
        with self._cond:
            for job in jobs:
                job.cancelled = True
            for entry in list(self._queue):  # a waiting request leaves the queue at once
                entry[:] = [job for job in entry if not job.cancelled]
                if not entry:
                    self._queue.remove(entry)
            self._cond.notify()

    def room(self) -> Room:
        with self._cond:
            waiting = sum(len(entry) for entry in self._queue)
            rows = list(self._running) + list(self._prefilling)
        return Room(rows=tuple(job.room_row() for job in rows if job.live), waiting=waiting, step=self.steps,
                    max_rows=self.max_rows, queue_size=self.queue_size,
                    batch_invariant=self.loaded.model is not None and is_batch_invariant(self.loaded.model))

    # ---- the loop ------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        if isinstance(self._decoder, StaticDecoder):  # capture the graphs before anyone waits on them
            try:
                self._decoder.warm(self.max_rows)
            except Exception as error:
                self._eager_from_now(error)
        pages = getattr(self.loaded.model, "ntp_huge_pages", None)  # weights into huge pages when idle (huge_pages.py)
        while True:
            with self._cond:
                while not (self._queue or self._prefilling or self._running or self._stopping):
                    if pages is not None and pages.due(self.steps > 0):
                        break
                    self._cond.wait(None if pages is None else pages.poll_s())
                stopping = self._stopping
                if not stopping:
                    self._drop_cancelled()
                    self._admit()
                    self._report_waiting()
            if stopping:  # outside the lock (_shut says why)
                return self._shut()
            if not (self._prefilling or self._running):
                if pages is not None and pages.due(self.steps > 0):
                    pages.work(self.lock)
                continue
            try:
                self._step()
            except Exception as error:  # the shared pass failed: this step's rows get the error, the loop goes on
                self._output.wait()  # the step before's records first
                for job in self._running + self._prefilling:
                    self._fail(job, error)
                self._running, self._prefilling = [], []
                if self.graphs:
                    self._eager_from_now(error)  # a fresh eager decoder, and the log says why
                else:
                    self._decoder = self._batch_decoder()

    def _eager_from_now(self, error: Exception) -> None:
        """The static step failed (its capture, or a step on it): the room goes on eagerly, and the log says why."""
        self.graphs = False
        self._decoder = self._batch_decoder()
        print("the room's CUDA graphs are off, its decode step runs eagerly:", *traceback.format_exception(error),
              file=sys.stderr, flush=True)  # the traceback says where: a message alone may be empty

    def _batch_decoder(self) -> Decoder | StaticDecoder:
        """The running batch's forward passes: static shapes and CUDA graphs on a GPU (engine/static_decode.py),
        eager elsewhere. A newcomer's prompt is always read eagerly, in a runner.Decoder of its own."""
        if self.graphs:
            return StaticDecoder(self.loaded.model, self._pad, backend="cudagraphs")
        return Decoder(self.loaded.model, self._pad)

    def _shut(self) -> None:
        """The loop's end, outside the lock: the last records and these failures reach callers that may cancel (which
        takes it); under it, a stopped scheduler process waited on its own output worker for ever (an orphan)."""
        self._output.close()  # the last step's records first
        with self._cond:
            jobs = self._running + self._prefilling + [job for entry in self._queue for job in entry]
            self._queue.clear()
            self._running, self._prefilling = [], []
        for job in jobs:
            self._fail(job, self._reason)
            job.decoder = job.logits = None
        self._decoder = None  # its cache and its hold on the model go with it (a switch frees the model)

    def _drop_cancelled(self) -> None:
        keep = [i for i, job in enumerate(self._running) if job.live]
        if len(keep) < len(self._running):
            self._decoder.keep(keep)
            self._running = [self._running[i] for i in keep]
        self._prefilling = [job for job in self._prefilling if job.live]

    def _admit(self) -> None:
        """Waiting requests take free rows, FIFO; see the module docstring for the long-request share."""
        taken = self._running + self._prefilling
        free = self.max_rows - len(taken)
        longs = sum(job.long for job in taken)
        long_share = max(1, self.max_rows // 2)
        admitted: list[Job] = []
        for entry in list(self._queue):
            if free <= 0:
                break
            entry_longs = sum(job.long for job in entry)
            if entry_longs and longs and longs + entry_longs > long_share:
                continue  # it keeps its place; shorter requests behind it may pass
            if free < len(entry) <= self.max_rows:
                break  # a caller's requests start together, and nobody overtakes them
            take = entry[:free]
            del entry[:free]
            if not entry:
                self._queue.remove(entry)
            free -= len(take)
            longs += sum(job.long for job in take)
            admitted += take
        for job in admitted:
            job.phase = JobStatus.PREFILLING
        self._prefilling = self._prefilling + admitted

    def _report_waiting(self) -> None:
        total = sum(len(entry) for entry in self._queue)
        ahead = 0
        for entry in self._queue:
            first = entry[0]
            if getattr(first, "reported", None) != ahead:
                first.reported = ahead
                first.sink.waiting(Waiting(position=ahead + 1, ahead=ahead, queue_length=total))
            ahead += len(entry)

    def _step(self) -> None:
        with self.lock:
            prefill_ms = self._prefill_some()
            decoding = self._running
            logits = self._decoder.step([job.next_token for job in decoding]) if decoding else None
        forward_ms = self._decoder.forward_ms if decoding else 0.0
        self._output.wait()  # the step before's records are out: its callers have them, in order
        newcomers = self._ready()
        rows = decoding + newcomers
        if not rows:
            return  # only prompt chunks were read this step
        parts = ([logits] if logits is not None else []) + [job.logits for job in newcomers]
        all_logits = torch.cat(parts) if len(parts) > 1 else parts[0]
        chosen = choose(all_logits, [job.row for job in rows], [job.top_n for job in rows],
                        [job.capture for job in rows])
        self.steps += 1
        turns = [self._advance(job, token) for job, token in zip(rows, chosen.tokens)]
        batch = [1 if b >= len(decoding) else len(decoding) for b in range(len(rows))]
        timings = [job.prefill_ms if b >= len(decoding) else forward_ms for b, job in enumerate(rows)]
        for b, job in enumerate(rows):
            job.forwards += b < len(decoding)  # a newcomer's forward passes were counted chunk by chunk
        self._output.submit(lambda: self._emit(chosen, rows, turns, all_logits, timings, batch, forward_ms + prefill_ms))
        # the batch of the next step: finished rows leave, newcomers join after the others
        keep = [i for i, job in enumerate(decoding) if job.live]
        self._decoder.keep(keep)
        running = [decoding[i] for i in keep]
        for job in newcomers:
            if job.live:
                self._decoder.join(job.decoder)
                running.append(job)
                job.phase = JobStatus.DECODING
            job.decoder = job.logits = None
        joined = {id(job) for job in newcomers}
        self._running = running
        self._prefilling = [job for job in self._prefilling if id(job) not in joined]

    def _advance(self, job: Job, token: int):
        """The row takes its token now (the next forward pass feeds it; a stop takes the row out of the batch)."""
        if not job.live:
            return None
        try:
            turn = job.row.advance(job.step, token)
        except Exception as error:  # this row's failure is its caller's alone; the others go on
            self._fail(job, error)
            return None
        job.step += 1
        job.next_token = token
        if turn.stop_reason is not None:
            job.done = True
        return turn

    def _emit(self, chosen: Chosen, rows: list[Job], turns, all_logits, timings, batch, step_ms) -> None:
        """In the output worker: the step's summaries, each row's record to its caller, then the step's end."""
        try:
            summaries, summary_ms = summarise_chosen(chosen)
        except Exception as error:  # the shared summary failed: this step's rows get the error
            for job, turn in zip(rows, turns):
                if turn is not None and not job.cancelled:
                    self._fail(job, error, took_turn=True)
            return
        sampling_ms = chosen.ms + summary_ms
        for b, job in enumerate(rows):
            if turns[b] is None or job.cancelled:
                continue  # failed, or closed during this step: nobody reads it
            if job.keep_logits:  # set before the record is delivered: the caller reads it once the record arrives
                job.kept[turns[b].step] = (all_logits[b: b + 1].clone(), chosen.us[b])
            try:
                record = job.row.record_of(turns[b], chosen.draws[b], summaries[b], timings[b], sampling_ms, batch[b])
            except Exception as error:  # this row's failure is its caller's alone
                self._fail(job, error, took_turn=True)
                continue
            job.sink.put(job, record)
        for sink in {id(job.sink): job.sink for job in rows}.values():
            sink.end_step(all_logits.shape[-1], step_ms, sampling_ms)

    def _prefill_some(self) -> float:
        """Read prompt chunks within this step's token budget (pads included). Newcomers' first chunks
        are read together, left-padded, in as few passes as pays (`_buckets`: prompts of similar length
        share a pass; most prompts are one chunk, and a pass of many costs about what one of them costs
        alone); later chunks of long prompts one per newcomer in turn. Chunks start at fixed offsets
        (multiples of the chunk size), whoever else is waiting."""
        budget, chunk = limits.PREFILL_TOKENS_PER_STEP, limits.PREFILL_CHUNK_TOKENS
        reading = [job for job in self._prefilling if job.logits is None and job.live]
        together, width = [], 0
        for job in reading:
            if job.read == 0:
                w = max(width, min(len(job.ids), chunk))
                if not together or (len(together) + 1) * w <= budget:
                    together.append(job)
                    width = w
        spent_ms = 0.0
        if len(together) > 1:
            for bucket in _buckets(together, chunk):
                spent_ms += self._read_together(bucket) if len(bucket) > 1 else self._read_alone(bucket[0])
                budget -= len(bucket) * min(chunk, max(len(job.ids) for job in bucket))
        rest = [job for job in reading if job.live and (len(together) < 2 or job not in together)]
        while budget > 0 and rest:
            for job in list(rest):
                if budget <= 0:
                    break
                size = min(chunk, len(job.ids) - job.read)
                spent_ms += self._read_alone(job)
                budget -= size
                if not job.live or job.logits is not None:
                    rest.remove(job)
        self._prefilling = [job for job in self._prefilling if job.live]
        return spent_ms

    def _read_alone(self, job: Job) -> float:
        """The next chunk of one prompt, in the job's own cache. Its failure is its caller's alone."""
        part = job.ids[job.read: job.read + limits.PREFILL_CHUNK_TOKENS]
        try:
            if job.decoder is None:
                job.decoder = Decoder(self.loaded.model, self._pad)
            logits = job.decoder.extend(part)
        except Exception as error:
            self._fail(job, error)
            return 0.0
        job.read += len(part)
        job.forwards += 1
        job.prefill_ms += job.decoder.forward_ms
        if job.read == len(job.ids):
            job.logits, job.phase = logits, JobStatus.READY
        return job.decoder.forward_ms

    def _read_together(self, jobs: list[Job]) -> float:
        """First chunks of several prompts in one padded forward pass, then one cache per job."""
        parts = [job.ids[: limits.PREFILL_CHUNK_TOKENS] for job in jobs]
        decoder = Decoder(self.loaded.model, self._pad)
        try:
            logits = decoder.prefill(parts)
        except Exception:  # whose prompt failed? Read each alone: only that caller gets the error
            return sum(self._read_alone(job) for job in jobs)
        for i, (job, own) in enumerate(zip(jobs, decoder.split())):
            job.decoder, job.read = own, len(parts[i])
            job.forwards += 1
            job.prefill_ms += decoder.forward_ms
            if job.read == len(job.ids):
                job.logits, job.phase = logits[i: i + 1], JobStatus.READY
        return decoder.forward_ms

    def _ready(self) -> list[Job]:
        """Newcomers whose prompt is read; a caller's requests join together, when all are read."""
        still_reading = {id(job.sink) for job in self._prefilling if job.logits is None}
        return [job for job in self._prefilling if job.logits is not None and id(job.sink) not in still_reading]

    def _fail(self, job: Job, error: BaseException, took_turn: bool = False) -> None:
        """The job's caller gets `error` and the job ends. took_turn: it ended at this step's turn already (a stop),
        and its record failed after: its caller still waits for it."""
        if job.live or (took_turn and not job.cancelled):
            job.done = True
            job.sink.fail(job, error)


def _buckets(jobs: list[Job], chunk: int) -> list[list[Job]]:
    """Newcomers' first chunks grouped into padded passes at the least cost: a pass costs its rows x its
    widest chunk in token slots, plus limits.PREFILL_PASS_COST_TOKENS for reading the weights once. Groups
    are runs of the chunks sorted by length (an exact minimum over those runs, n <= max_rows)."""
    ordered = sorted(jobs, key=lambda job: min(len(job.ids), chunk))
    sizes = [min(len(job.ids), chunk) for job in ordered]
    fixed = limits.PREFILL_PASS_COST_TOKENS
    best = [0.0] + [float("inf")] * len(ordered)  # best[i]: least cost of reading the i shortest
    cut = [0] * (len(ordered) + 1)
    for i in range(1, len(ordered) + 1):
        for j in range(i):
            cost = best[j] + fixed + (i - j) * sizes[i - 1]
            if cost < best[i]:
                best[i], cut[i] = cost, j
    groups, i = [], len(ordered)
    while i > 0:
        groups.append(ordered[cut[i]: i])
        i = cut[i]
    return groups[::-1]


def _stop(ref) -> None:
    scheduler = ref()
    if scheduler is not None:
        scheduler.stop()
