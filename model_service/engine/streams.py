"""What a caller holds while the scheduler works for it: a Job per request, a sink that collects the
job's records, and the iterator the service returns (Stream for generate, BatchStream for
generate_batch). Closing the iterator, or dropping it, cancels its jobs: Gradio closes a streaming
handler when the tab closes or Stop is pressed, and the row then leaves the batch at the next step.
"""

from __future__ import annotations

import enum
import queue
from dataclasses import dataclass

from .. import limits
from ..records.step import BatchStep, RoomRow, StepRecord, Waiting
from ..sampling.pipeline import BatchParams

# How often a waiting caller checks that the scheduler thread is still alive (seconds).
_POLL = 1.0


class JobStatus(enum.Enum):
    """Where a request is, as transformers' continuous batching names a request's status. `Job.status` reads it."""

    WAITING = "waiting"  # queued: no row yet
    PREFILLING = "prefilling"  # holds a row, reading its prompt in chunks
    READY = "ready"  # its prompt is read: it joins the running batch at the next step boundary
    DECODING = "decoding"  # a row of the running batch, a token each step
    FINISHED = "finished"  # stopped (end-of-text, max_new_tokens, a stop string) or failed
    CANCELLED = "cancelled"  # its caller left (Stop, a closed tab, a dropped client)


class Job:
    """One request inside the scheduler. Only the scheduler thread touches its state, except
    `cancelled`, which any thread may set."""

    def __init__(self, ids: list[int], row, first_step: int, top_n: int, capture: bool, sink, index: int = 0):
        self.ids = ids  # prompt + tokens already generated (continue_from): what prefill reads
        self.row = row  # engine/step.py:RowState: settings, generator, text, stop conditions
        row.prompt = tuple(ids[: len(ids) - len(row.prefix)])  # what its penalties count, with what it generates
        self.step = first_step  # the step number of its next record
        self.top_n, self.capture = top_n, capture
        self.sink, self.index = sink, index  # index: its place among its caller's requests
        self.long = row.max_new_tokens - first_step > limits.LONG_REQUEST_TOKENS
        self.decoder = None  # its own B = 1 cache while it reads its prompt
        self.read = 0  # prompt tokens read so far
        self.prefill_ms = 0.0
        self.logits = None  # (1, V) once the prompt is read, until it joins the batch
        self.next_token: int | None = None
        self.forwards = 0  # forward passes computed for this row (prefill chunks and steps)
        self.cancelled = False
        self.done = False  # stopped, or failed
        self.reported: int | None = None  # requests ahead of it when it last heard (waiting)
        # hand each step's raw logits (1, V) and u back with its record: sample_many, a kept lab run (engine/kept.py)
        self.keep_logits = False
        self.kept: dict[int, tuple] = {}  # step -> (logits (1, V), u), until its reader takes it
        self.phase = JobStatus.WAITING  # the scheduler moves it on: PREFILLING, READY, DECODING

    @property
    def status(self) -> JobStatus:
        """The request's status: cancelled and done (set from any thread, or by a stop) win over the phase."""
        if self.cancelled:
            return JobStatus.CANCELLED
        return JobStatus.FINISHED if self.done else self.phase

    @property
    def live(self) -> bool:
        return not (self.done or self.cancelled)

    def room_row(self) -> RoomRow:
        """What the room shows of this request: its settings, progress and prompt length, never its prompt."""
        settings = self.row.settings.to_dict()
        seeded = settings.pop("seed") is not None
        return RoomRow(settings=settings, seeded=seeded, step=self.step, max_new_tokens=self.row.max_new_tokens,
                       prompt_tokens=len(self.ids), prefilling=self.next_token is None)


class StreamSink:
    """Records of one request, in order, for one reader."""

    def __init__(self, report_waiting: bool = False):
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.report_waiting = report_waiting

    def put(self, job: Job, record: StepRecord) -> None:
        self.queue.put(record)

    def fail(self, job: Job, error: BaseException) -> None:
        self.queue.put(error)

    def waiting(self, w: Waiting) -> None:
        if self.report_waiting:
            self.queue.put(w)

    def end_step(self, vocab: int, forward_ms: float, sampling_ms: float) -> None:
        pass


@dataclass(frozen=True)
class _GroupStep:
    records: tuple  # (request index, StepRecord) in batch-row order
    vocab: int
    forward_ms: float
    sampling_ms: float


class GroupSink(StreamSink):
    """Records of several requests of one caller (generate_batch), collected per scheduler step."""

    def __init__(self, report_waiting: bool = False):
        super().__init__(report_waiting)
        self._pending: list = []

    def put(self, job: Job, record: StepRecord) -> None:
        self._pending.append((job.index, record))

    def end_step(self, vocab: int, forward_ms: float, sampling_ms: float) -> None:
        if self._pending:
            self.queue.put(_GroupStep(tuple(self._pending), vocab, forward_ms, sampling_ms))
            self._pending = []


class Stream:
    """The records of one request (generate): an iterator that cancels its request when closed or
    garbage-collected. With report_waiting, Waiting records come before the first StepRecord."""

    def __init__(self, scheduler, jobs: list[Job], sink: StreamSink, keep=None):
        """keep: called with each StepRecord and its step's (logits, u) before the record is handed on (the
        jobs keep their logits: Job.keep_logits)."""
        self._scheduler, self._jobs, self._sink, self._keep = scheduler, jobs, sink, keep
        self._finished = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        item = self._take()
        if isinstance(item, BaseException):
            self.close()
            raise item
        return self._accept(item)

    def _take(self):
        while True:
            try:
                return self._sink.queue.get(timeout=_POLL)
            except queue.Empty:
                if not self._scheduler.alive:
                    self.close()
                    raise RuntimeError("the model's scheduler has stopped; restart the app") from None

    def _accept(self, item):
        if isinstance(item, StepRecord):
            if self._keep is not None and self._jobs:
                self._keep(item, self._jobs[0].kept.pop(item.step, None))
            if item.stop_reason is not None:
                self._finished = True
        return item

    def close(self) -> None:
        """Stop the request: it leaves the batch at the next step boundary (or the queue at once)."""
        self._finished = True
        if self._jobs:
            self._scheduler.cancel(self._jobs)
            self._jobs = []

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to cancel
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class BatchStream(Stream):
    """The BatchSteps of a generate_batch call: one per scheduler step in which any of its requests
    produced a record (its requests are admitted together, so they share their steps)."""

    def __init__(self, scheduler, jobs: list[Job], sink: GroupSink):
        super().__init__(scheduler, jobs, sink)
        self._n = len(jobs)
        self._settings = [job.row.settings for job in jobs]
        self._stopped = 0
        self._step = 0

    def _accept(self, item):
        if not isinstance(item, _GroupStep):
            return item  # Waiting
        rows: list = [None] * self._n
        for index, record in item.records:
            rows[index] = record
            self._stopped += record.stop_reason is not None
        active = tuple(index for index, _ in item.records)
        params = BatchParams.from_settings([self._settings[i] for i in active], "cpu").to_dict()
        step = BatchStep(
            step=self._step, rows=tuple(rows), active=active, logits_shape=(len(active), item.vocab), params=params,
            forward_ms=round(item.forward_ms, 3), sampling_ms=round(item.sampling_ms, 3),
        )
        self._step += 1
        if self._stopped == self._n:
            self._finished = True
        return step
