"""The scheduler in a process of its own: the room's forward passes away from the web server's GIL.

A forward pass is ~2,000 torch ops dispatched from Python, and the thread that runs it takes the GIL back
after each one. In the app's process the web server's event loop holds the GIL for every record it streams
(Gradio's postprocessing, diff, JSON, SSE: ~5 ms of Python per record, 16 records a step at N = 16), so the
16-row pass waits at op after op: 1.7-1.8x as long as alone, against 1.0x beside the same work in another
process (bench/bench_gil.py). vLLM runs its engine core in its own process for the same reason.

    web process                                      scheduler process (spawned, one thread that matters)
    ModelService.generate -> Job, RowState           LoadedModel (its own copy of the model) + Scheduler
    SchedulerProcess.submit  --- Submit(RowRequest...) -> the same Job rebuilt (settings, seed, prefix, stops)
    Stream reads its sink    <-- StepDone(records) ---- one message per step, sent by the scheduler thread
    Stream.close -> cancel   --- Cancel(ids) ---------> the row leaves at the next step boundary
    (engine/pipe_messages.py: every message, one frozen dataclass each)

SchedulerProcess stands in for Scheduler (submit, cancel, room, stop, alive, steps), so generate,
generate_batch, Step and sample_many are unchanged; traces and LM-head views keep using the web
process's own copy of the model. Records, waits and errors arrive in the order the scheduler made them.
Used on a CPU (app.py --scheduler, NTP_SCHEDULER): on a GPU the model would be loaded twice.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import threading

from .. import heap, limits
from ..records import validation, wire
from . import pipe_messages as msg

_GONE = "the model's scheduler process has stopped; restart the app"
_NO_REPLY = object()


class _Pipe:
    """One end of the pipe; sends are whole pickled messages, from any thread."""

    def __init__(self, conn):
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, message) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self.conn.send_bytes(data)

    def recv(self):
        return pickle.loads(self.conn.recv_bytes())


# ---- the web process's side ------------------------------------------------------------------------------


class SchedulerProcess:
    """Scheduler's stand-in in the web process: the room's loop runs in a spawned process."""

    def __init__(self, source: tuple, max_rows: int, queue_size: int, batch_invariant: bool | None = None):
        """source: loading.load's (model, device, progress, precision); the process loads its own copy."""
        context = multiprocessing.get_context("spawn")  # fork would copy the web server's threads and locks
        mine, theirs = context.Pipe()
        self.max_rows, self.queue_size = max_rows, queue_size
        self.steps = 0
        self._pipe = _Pipe(mine)
        # Every send goes through one sender thread: cancel() may run inside a garbage-collected Stream's __del__,
        # in any thread, even one that is itself sending; SimpleQueue.put is safe there, a lock would deadlock.
        self._outgoing: queue.SimpleQueue = queue.SimpleQueue()
        self._process = context.Process(target=serve, args=(theirs, source, max_rows, queue_size, batch_invariant),
                                        daemon=True,
                                        name="model-scheduler")
        self._process.start()
        theirs.close()
        self._jobs: dict[int, object] = {}  # request id -> Job, until its last record or its error
        self._ids = itertools.count()
        self._replies: dict[int, list] = {}  # call id -> [Event, reply]
        self._ready = threading.Event()
        self._error: Exception | None = None  # why it stopped (or failed to start)
        self._ended = False  # set once every caller still waiting has been told
        self._reader = threading.Thread(target=self._read, daemon=True, name="model-scheduler-reader")
        self._reader.start()
        threading.Thread(target=self._write, daemon=True, name="model-scheduler-writer").start()

    def wait_ready(self, timeout: float = limits.SCHEDULER_PROCESS_START_S) -> None:
        """Block until the process has loaded its model; its load error, or a timeout, raises RuntimeError."""
        if not self._ready.wait(timeout):
            self.stop(reason="the model's scheduler process did not start in time")
            raise RuntimeError(f"the model's scheduler process did not start within {timeout:.0f} s")
        if self._error is not None:
            raise validation.again(self._error)

    @property
    def alive(self) -> bool:
        """False once the process is gone and every caller in flight has had its error (or its reason)."""
        return not self._ended

    def submit(self, jobs: list) -> None:
        self.wait_ready()
        for job in jobs:
            job.rid = next(self._ids)
            self._jobs[job.rid] = job
        requests = [_request(job) for job in jobs]
        try:
            refused = self._call(msg.Submit, requests)
        except BaseException:
            self._forget(jobs)
            raise
        if refused is not None:
            self._forget(jobs)
            raise wire.decode_error(refused)

    def cancel(self, jobs: list) -> None:
        for job in jobs:
            job.cancelled = True
        ids = [job.rid for job in jobs if self._jobs.pop(getattr(job, "rid", None), None) is not None]
        if ids and self.alive:
            self._outgoing.put(msg.Cancel(ids))

    def room(self):
        return self._call(msg.RoomQuery)

    def stop(self, timeout: float = 10.0, reason: Exception | str = "the model service is shutting down") -> None:
        error = reason if isinstance(reason, Exception) else RuntimeError(reason)
        if self._error is None:
            self._error = error  # what later calls, and requests in flight, are told
        if self._process.is_alive():
            self._outgoing.put(msg.Stop(wire.encode_error(error)))
            self._process.join(timeout)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(timeout)
        self._end(error)

    # ---- inside ----------------------------------------------------------------------------------------

    def _call(self, message: type, *args):
        """Send message(call id, *args) and wait for its Reply."""
        if self._error is not None:
            raise validation.again(self._error)
        call = next(self._ids)
        waiter = self._replies[call] = [threading.Event(), _NO_REPLY]
        self._outgoing.put(message(call, *args))
        while not waiter[0].wait(1.0) and self.alive:
            pass
        self._replies.pop(call, None)
        if waiter[1] is _NO_REPLY:  # the process ended first
            raise validation.again(self._error) if self._error else RuntimeError(_GONE)
        return waiter[1]

    def _forget(self, jobs) -> None:
        for job in jobs:
            self._jobs.pop(job.rid, None)

    def _write(self) -> None:
        """The sender thread: the only writer of this end of the pipe."""
        while True:
            message = self._outgoing.get()
            try:
                self._pipe.send(message)
            except (OSError, ValueError):
                return  # the process is gone; the reader tells the callers

    def _read(self) -> None:
        """The reader thread: hand each message to whoever waits for it, in the order it was sent. Whatever ends
        it (the pipe closing, a message it cannot read), every caller still waiting is told."""
        try:
            while True:
                message = self._pipe.recv()
                if isinstance(message, msg.StepDone):
                    self._deliver(message)
                elif isinstance(message, msg.Reply):
                    waiter = self._replies.pop(message.call, None)
                    if waiter is not None:
                        waiter[1] = message.value
                        waiter[0].set()
                elif isinstance(message, msg.RowFailed):
                    job = self._jobs.pop(message.rid, None)
                    if job is not None:
                        job.done = True
                        job.sink.fail(job, wire.decode_error(message.error))
                elif isinstance(message, msg.QueuePlace):
                    job = self._jobs.get(message.rid)
                    if job is not None:
                        job.sink.waiting(message.waiting)
                elif isinstance(message, msg.Ready):
                    self._ready.set()
                elif isinstance(message, msg.LoadFailed):
                    self._error = wire.decode_error(message.error)
                    self._ready.set()
        except (EOFError, OSError):
            pass
        finally:
            self._end(RuntimeError(_GONE))

    def _deliver(self, step: msg.StepDone) -> None:
        """One scheduler step's records, as Scheduler._step hands them to the sinks."""
        self.steps = step.steps
        sinks = {}
        for rid, record, kept in step.records:
            job = self._jobs.get(rid)
            if job is None or job.cancelled:
                continue
            if kept is not None:
                job.kept[record.step] = kept
            job.sink.put(job, record)
            sinks[id(job.sink)] = job.sink
            if record.stop_reason is not None:
                job.done = True
                self._jobs.pop(rid, None)
        for sink in sinks.values():
            sink.end_step(step.vocab, step.forward_ms, step.sampling_ms)

    def _end(self, error: Exception) -> None:
        """Stopped: callers still waiting get `error`, and nothing waits for a reply any more."""
        if self._error is None:
            self._error = error
        self._ready.set()
        jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            if not job.done:
                job.done = True
                job.sink.fail(job, validation.again(self._error))
        self._ended = True
        for waiter in list(self._replies.values()):
            waiter[0].set()


def _request(job) -> msg.RowRequest:
    row = job.row
    return msg.RowRequest(
        rid=job.rid, caller=id(job.sink), ids=job.ids, first_step=job.step, top_n=job.top_n, capture=job.capture,
        index=job.index, keep_logits=job.keep_logits, settings=row.settings, seed=row.seed,
        max_new_tokens=row.max_new_tokens, stop=row.stop, prefix=row.prefix, ignore_eos=row.ignore_eos,
        report_waiting=job.sink.report_waiting,
    )


# ---- the scheduler process -------------------------------------------------------------------------------


class _Outbox:
    """The sinks of every request in the scheduler process: a step's records leave in one message, sent by the
    output worker when the step ends (engine/output.py), while the scheduler thread runs the next forward pass."""

    def __init__(self, pipe: _Pipe, scheduler):
        self.pipe, self.scheduler = pipe, scheduler
        self.records: list = []
        self.live: dict[int, object] = {}  # request id -> Job


class _CallerSink:
    """One caller's sink (a caller's requests share it, as in the web process)."""

    def __init__(self, outbox: _Outbox, first_rid: int, report_waiting: bool):
        self.outbox, self.first_rid, self.report_waiting = outbox, first_rid, report_waiting

    def put(self, job, record) -> None:
        self.outbox.records.append((job.rid, record, job.kept.pop(record.step, None) if job.keep_logits else None))
        if record.stop_reason is not None:
            self.outbox.live.pop(job.rid, None)

    def fail(self, job, error) -> None:
        self.outbox.live.pop(job.rid, None)
        self.outbox.pipe.send(msg.RowFailed(job.rid, wire.encode_error(error)))

    def waiting(self, waiting) -> None:
        if self.report_waiting:
            self.outbox.pipe.send(msg.QueuePlace(self.first_rid, waiting))

    def end_step(self, vocab: int, forward_ms: float, sampling_ms: float) -> None:
        outbox = self.outbox
        if outbox.records:  # the first of the step's sinks sends every caller's records
            records, outbox.records = outbox.records, []
            outbox.pipe.send(msg.StepDone(records, vocab, forward_ms, sampling_ms, outbox.scheduler.steps))


def _behind_the_web_server() -> None:
    """From here on the room's passes run at a lower priority than the web process (limits.SCHEDULER_NICE says what
    that buys); the model loads at the same. Where the platform has no nice (Windows), as they are."""
    try:
        os.nice(limits.SCHEDULER_NICE)
    except (AttributeError, OSError):
        pass


def serve(conn, source: tuple, max_rows: int, queue_size: int, batch_invariant: bool | None = None) -> None:
    """The scheduler process: load the model, then take submissions, cancels and room queries until told to
    stop or the web process goes away."""
    from ..models.loading import load, serve_beside_web_server
    from .card import room_limits, room_mode
    from .loaded import LoadedModel
    from .scheduler import Scheduler
    pipe = _Pipe(conn)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the web process's to handle; it stops this one
    try:
        serve_beside_web_server()
        model, tokenizer, info = load(*source)
        room_mode(model, batch_invariant)  # the same arithmetic as the web process's copy
        loaded = LoadedModel.of(model, tokenizer, info.eos_token_ids)
        scheduler = Scheduler(loaded, *room_limits(model, max_rows, queue_size))
    except Exception as error:  # noqa: BLE001 - whatever it is, the web process must hear it
        pipe.send(msg.LoadFailed(wire.encode_error(error)))
        return
    outbox = _Outbox(pipe, scheduler)
    _behind_the_web_server()
    pipe.send(msg.Ready())  # (then the collection below runs while the web process finishes its own start)
    heap.settle()  # the model and the room live as long as this process: no full collection walks them again
    while True:
        try:
            if not conn.poll(1.0):
                if not scheduler.alive:
                    break  # its loop died: end the process, and the web process tells every caller
                continue
            message = pipe.recv()
        except (EOFError, OSError):
            break  # the web process is gone
        if isinstance(message, msg.Submit):
            _submit(message, loaded, scheduler, outbox)
        elif isinstance(message, msg.Cancel):
            scheduler.cancel([outbox.live.pop(rid) for rid in message.rids if rid in outbox.live])
        elif isinstance(message, msg.RoomQuery):
            pipe.send(msg.Reply(message.call, scheduler.room()))
        elif isinstance(message, msg.Stop):
            scheduler.stop(reason=wire.decode_error(message.reason))
            loaded.model = None
            return
    scheduler.stop()


def _submit(message: msg.Submit, loaded, scheduler, outbox: _Outbox) -> None:
    """Rebuild the web process's Jobs here and queue them; the Reply says submitted, or why they were refused."""
    from .step import RowState
    from .streams import Job

    sinks, jobs = {}, []
    try:
        for r in message.requests:
            if r.caller not in sinks:  # a caller's requests share a sink, as in the web process
                sinks[r.caller] = _CallerSink(outbox, r.rid, r.report_waiting)
            row = RowState(loaded, r.settings, r.max_new_tokens, r.stop, r.prefix, r.ignore_eos, seed=r.seed)
            job = Job(r.ids, row, r.first_step, r.top_n, r.capture, sinks[r.caller], index=r.index)
            job.rid, job.keep_logits = r.rid, r.keep_logits
            jobs.append(job)
        for job in jobs:
            outbox.live[job.rid] = job
        scheduler.submit(jobs)
        outbox.pipe.send(msg.Reply(message.call, None))
    except Exception as error:  # noqa: BLE001 - a refusal (room full) is the caller's answer
        for job in jobs:
            outbox.live.pop(job.rid, None)
        outbox.pipe.send(msg.Reply(message.call, wire.encode_error(error)))
