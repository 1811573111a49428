"""The scheduler that owns the model: requests join and leave one running batch at step boundaries.

Holding `service.model_lock` pauses the scheduler at its next forward pass, which is how these tests
make a request join at a known point of another's run; `one_boundary` makes several join at the same one."""

from __future__ import annotations

import gc
import json
import threading
import time
from contextlib import contextmanager

import pytest

from model_service import ModelService, Request, SamplingSettings, StepRecord
from model_service.engine.step import RowState
from model_service.records.step import Room, Waiting
from tests.conftest import byte_tokenizer, tiny_llama
from tests.waiting import wait_until

GREEDY = SamplingSettings(temperature=0)


def tokens(records):
    return [r.token_id for r in records if isinstance(r, StepRecord)]


def take(stream, n):
    return [next(stream) for _ in range(n)]


@contextmanager
def one_boundary(service):
    """Every request made inside joins the batch at the same step boundary. The model lock alone does not
    promise that: the scheduler admits waiting requests before it takes the lock for its pass, so one that
    came first could be admitted alone while the others were still being made (a CPU hog showed it). It
    admits only while holding its condition, so holding that as well parks it before its next admission."""
    with service.model_lock, service.scheduler._cond:
        yield


def idle(service):
    wait_until(lambda: not service.room().rows and not service.room().waiting, "an empty room", interval=0.002)


@pytest.fixture()
def small_room():
    """A service of its own (own model, own scheduler): 2 rows per step, 2 places in the queue."""
    return ModelService(tiny_llama(), byte_tokenizer(), max_rows=2, queue_size=2)


def joins_mid_flight(service, a, b, c, join_at):
    """a runs; c leaves early; b joins once a has taken `join_at` steps. Returns the three runs."""
    idle(service)
    run_a = service.generate(*a, ignore_eos=True)
    run_c = service.generate(*c, ignore_eos=True)
    got_a = take(run_a, join_at)
    with service.model_lock:  # the scheduler waits at its next forward pass while b joins
        run_b = service.generate(*b, ignore_eos=True)
    got_a += list(run_a)
    return got_a, list(run_b), list(run_c)


@pytest.mark.parametrize("join_at", [0, 7])
def test_a_seeded_request_gets_the_same_tokens_joining_mid_flight_as_alone(tiny_service, join_at):
    a = ("hello there", SamplingSettings(temperature=0.9, top_p=0.95, seed=1), 60)
    b = ("a different, longer prompt", SamplingSettings(temperature=1.2, seed=2), 30)
    c = ("x", GREEDY, 12)  # leaves while a and b go on
    got_a, got_b, got_c = joins_mid_flight(tiny_service, a, b, c, join_at)
    for q, got in ((a, got_a), (b, got_b), (c, got_c)):
        idle(tiny_service)
        assert tokens(got) == tokens(tiny_service.generate(*q, ignore_eos=True)), q[0]
    # b joined a's forward passes after a's first join_at steps (when only c could share them), and
    # shared them after c had left
    assert all(r.batch_size <= 2 for r in got_a[:join_at])
    assert any(r.batch_size >= 2 for r in got_a if r.step >= 15)
    assert got_b[0].batch_size == 1 and got_b[1].batch_size >= 2  # its prefill ran alone


def test_join_and_leave_mid_flight_on_the_embedded_model(embedded):
    a = ("Once upon a time", SamplingSettings(temperature=0.8, top_p=0.95, seed=11), 16)
    b = ("The capital of France is", GREEDY, 6)
    c = ("1, 2, 3,", SamplingSettings(temperature=1.0, seed=3), 3)
    got_a, got_b, got_c = joins_mid_flight(embedded, a, b, c, 7)
    assert got_b[1].batch_size == 2 and any(r.batch_size == 2 for r in got_a[7:])  # b joined a
    for q, got in ((a, got_a), (b, got_b), (c, got_c)):
        alone = list(embedded.generate(*q, ignore_eos=True))
        assert tokens(got) == tokens(alone), q[0]
        assert got[-1].text == alone[-1].text


def test_closing_a_stream_frees_its_row_within_one_step(tiny_service):
    idle(tiny_service)
    seen = []  # rows in every forward pass the model runs
    hook = tiny_service.model.register_forward_pre_hook(lambda m, args, kw: seen.append(kw["input_ids"].shape[0]), with_kwargs=True)
    try:
        stays = tiny_service.generate("stays", GREEDY, 240, ignore_eos=True)
        leaves = tiny_service.generate("leaves", GREEDY, 200, ignore_eos=True)
        take(leaves, 3), take(stays, 3)
        job = leaves._jobs[0]
        with tiny_service.model_lock:
            leaves.close()
            forwards, step = job.forwards, tiny_service.room().step
        take(stays, 20)
        assert job.forwards <= forwards + 1  # at most the step already under way when it closed
        assert len(tiny_service.room().rows) <= 1  # "stays" (unless it already finished its 240 steps)
        assert tiny_service.room().step >= step + 5 and seen[-5:] == [1] * 5  # the batch went on without it
        with pytest.raises(StopIteration):
            next(leaves)
    finally:
        hook.remove()
        stays.close()


def test_a_dropped_or_gradio_closed_stream_is_cancelled(tiny_service):
    idle(tiny_service)
    never_read = tiny_service.generate("never read", GREEDY, 200, ignore_eos=True)
    job = never_read._jobs[0]
    del never_read  # garbage: nobody will read it
    gc.collect()
    assert job.cancelled

    def handler():  # what a Gradio event handler does with the stream
        for record in tiny_service.generate("streamed", GREEDY, 200, ignore_eos=True):
            yield record

    running = handler()
    next(running)
    running.close()  # Gradio's cancel: GeneratorExit at the yield; the stream is dropped with the frame
    idle(tiny_service)


def test_the_queue_is_bounded_and_a_waiting_caller_sees_its_place(small_room, monkeypatch):
    from model_service import limits

    monkeypatch.setattr(limits, "LONG_REQUEST_TOKENS", 1000)  # both rows may go to long requests here
    first = small_room.generate("long", GREEDY, 200, ignore_eos=True)
    second = small_room.generate("long", GREEDY, 200, ignore_eos=True)
    take(first, 1), take(second, 1)  # both rows taken
    with one_boundary(small_room):  # both wait before the scheduler's next boundary
        third = small_room.generate("third", GREEDY, 3, report_waiting=True)
        fourth = small_room.generate("fourth", GREEDY, 3, report_waiting=True)
        with pytest.raises(RuntimeError, match="the room is full: 2 requests are waiting .* limit here is 2"):
            small_room.generate("fifth", GREEDY, 3)
    first_news = next(third)
    assert isinstance(first_news, Waiting) and (first_news.position, first_news.ahead) == (1, 0)
    assert next(fourth) == Waiting(position=2, ahead=1, queue_length=2)
    room = small_room.room()
    assert (room.waiting, room.max_rows, room.queue_size, len(room.rows)) == (2, 2, 2, 2)
    first.close()
    assert isinstance(next(third), StepRecord)  # admitted when a row freed
    assert next(fourth) == Waiting(position=1, ahead=0, queue_length=1)
    # callers that did not ask never see a Waiting
    plain = small_room.generate("plain", GREEDY, 2)
    second.close()
    assert all(isinstance(r, StepRecord) for r in plain) and all(isinstance(r, StepRecord) for r in fourth)


def test_long_requests_hold_at_most_half_the_rows(small_room):
    """Two rows: one long request at a time; a short request behind the second long one goes first."""
    long1 = small_room.generate("long one", GREEDY, 240, ignore_eos=True)
    take(long1, 1)
    long2 = small_room.generate("long two", GREEDY, 200, ignore_eos=True, report_waiting=True)
    short = small_room.generate("short", GREEDY, 5, ignore_eos=True)
    assert len(list(short)) == 5  # it passed long2, which still waits for the long share
    assert isinstance(next(long2), Waiting)
    long1.close()
    assert isinstance(next(long2), StepRecord)
    long2.close()


@pytest.mark.parametrize("where", ["advance", "record_of"])  # in the loop (its stop), in the output worker (its record)
def test_a_crash_in_one_row_fails_that_caller_only(tiny_service, monkeypatch, where):
    original = getattr(RowState, where)

    def failing(self, first, *args, **kwargs):
        step = first if where == "advance" else first.step
        if self.settings.seed == 666 and step == 3:
            raise RuntimeError("injected failure in one row")
        return original(self, first, *args, **kwargs)

    monkeypatch.setattr(RowState, where, failing)
    idle(tiny_service)
    victim = tiny_service.generate("victim", SamplingSettings(seed=666), 20, ignore_eos=True)
    other = tiny_service.generate("other", SamplingSettings(seed=5), 20, ignore_eos=True)
    assert len(take(victim, 3)) == 3
    with pytest.raises(RuntimeError, match="injected failure"):
        next(victim)
    got = list(other)
    assert len(got) == 20 and tokens(got) == tokens(tiny_service.generate("other", SamplingSettings(seed=5), 20, ignore_eos=True))
    assert len(list(tiny_service.generate("after", GREEDY, 4))) == 4  # the loop lives on


def test_a_failing_prefill_fails_that_request_only(tiny_service, monkeypatch):
    """Prompts read together: when their shared pass fails, each is read again alone to find whose it was."""
    from model_service.engine import runner as decoder

    original = decoder.Decoder._forward
    marker = tiny_service.encode("!!!")[-3:]

    def forward(self, ids, positions):
        if any(row[-3:] == marker for row in ids.tolist()):
            raise RuntimeError("injected prefill failure")
        return original(self, ids, positions)

    monkeypatch.setattr(decoder.Decoder, "_forward", forward)
    idle(tiny_service)
    with one_boundary(tiny_service):  # the three arrive at the same boundary
        before = tiny_service.generate("fine", SamplingSettings(seed=8), 10, ignore_eos=True)
        bad = tiny_service.generate("bad!!!", GREEDY, 10)
        after = tiny_service.generate("also fine", GREEDY, 10, ignore_eos=True)
    with pytest.raises(RuntimeError, match="injected prefill failure"):
        next(bad)
    got = list(before)
    assert len(got) == 10 and len(list(after)) == 10
    assert tokens(got) == tokens(tiny_service.generate("fine", SamplingSettings(seed=8), 10, ignore_eos=True))


def test_long_prompts_are_read_in_chunks_and_give_the_same_tokens_joined(tiny_service):
    from model_service import limits

    idle(tiny_service)
    shapes = []
    hook = tiny_service.model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    prompt = "y" * 200
    try:
        alone = list(tiny_service.generate(prompt, SamplingSettings(seed=4), 8))
    finally:
        hook.remove()
    assert shapes[:2] == [(1, limits.PREFILL_CHUNK_TOKENS), (1, 200 - limits.PREFILL_CHUNK_TOKENS)]
    busy = tiny_service.generate("busy", GREEDY, 100, ignore_eos=True)
    take(busy, 2)
    assert tokens(tiny_service.generate(prompt, SamplingSettings(seed=4), 8)) == tokens(alone)
    busy.close()


def test_newcomers_of_very_different_lengths_are_read_in_one_pass_per_length(tiny_service):
    """Four short prompts and two long ones at one boundary: padding the short ones to the long ones' width
    would cost 6 x 40 token slots; two passes cost 4 x 3 + 2 x 40 (plus one more reading of the weights)."""
    longs = ["L" * 40, "M" * 40]
    shorts = ["ab", "cd", "ef", "gh"]
    busy = tiny_service.generate("busy", GREEDY, 100, ignore_eos=True)
    take(busy, 2)  # the scheduler is mid-run: the six wait for the same boundary
    shapes = []
    hook = tiny_service.model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        with one_boundary(tiny_service):  # all six arrive at the same boundary
            runs = [tiny_service.generate(q, SamplingSettings(seed=i), 3, ignore_eos=True) for i, q in enumerate(longs + shorts)]
        got = [list(run) for run in runs]
    finally:
        hook.remove()
        busy.close()
    width = {len(tiny_service.encode(q)) for q in longs}.pop()
    short = max(len(tiny_service.encode(q)) for q in shorts)
    prefills = [shape for shape in shapes if shape[1] > 1]
    assert prefills == [(4, short), (2, width)]  # shortest first, each padded to its own group's width
    for i, q in enumerate(longs + shorts):
        assert tokens(got[i]) == tokens(tiny_service.generate(q, SamplingSettings(seed=i), 3, ignore_eos=True)), q


def test_generate_batch_rows_start_together_and_match_generate(tiny_service):
    qs = [Request("ab", SamplingSettings(seed=s), 5 + s) for s in range(2)] + [Request("a longer one", GREEDY, 6)]
    busy = tiny_service.generate("busy", GREEDY, 100, ignore_eos=True)
    take(busy, 2)
    shapes = []
    hook = tiny_service.model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        steps = list(tiny_service.generate_batch(qs))
    finally:
        hook.remove()
        busy.close()
    assert (3, len(tiny_service.encode("a longer one"))) in shapes  # their prompts were read in one padded pass
    assert steps[0].active == (0, 1, 2) and all(r.step == 0 for r in steps[0].rows)
    for i, q in enumerate(qs):
        assert [st.rows[i].token_id for st in steps if st.rows[i]] == tokens(tiny_service.generate(q.prompt, q.settings, q.max_new_tokens))


def test_the_room_is_anonymous_and_json(tiny_service):
    idle(tiny_service)
    run = tiny_service.generate("a secret prompt", SamplingSettings(temperature=0.7, seed=9), 50, ignore_eos=True)
    take(run, 2)
    room = tiny_service.room()
    assert isinstance(room, Room) and len(room.rows) == 1
    row = room.rows[0]
    assert row.settings["temperature"] == 0.7 and "seed" not in row.settings and row.seeded
    assert row.max_new_tokens == 50 and row.step >= 2 and not row.prefilling
    text = json.dumps(room.to_dict())
    assert "secret" not in text and json.loads(text)["max_rows"] == tiny_service.max_rows
    run.close()


def test_a_trace_waits_for_the_step_and_is_unchanged(tiny_service):
    idle(tiny_service)
    quiet = tiny_service.trace("trace me")
    run = tiny_service.generate("busy", SamplingSettings(seed=1), 150, ignore_eos=True)
    take(run, 1)
    busy = tiny_service.trace("trace me")
    run.close()
    assert untimed(busy.to_dict()) == untimed(quiet.to_dict())


def untimed(d):
    if isinstance(d, dict):
        return {k: untimed(v) for k, v in d.items() if k != "ms" and not k.endswith("_ms")}
    return [untimed(v) for v in d] if isinstance(d, list) else d


def test_limits_are_checked_before_anything_is_queued(tiny_service, monkeypatch):
    from model_service import limits

    monkeypatch.setattr(limits, "MAX_PROMPT_TOKENS", 10)
    with pytest.raises(ValueError, match="prompt is 16 tokens; the limit here is 10"):
        tiny_service.generate("sixteen bytes!!!", GREEDY, 5)
    with pytest.raises(ValueError, match="max_new_tokens must be a whole number between 1 and 512"):
        tiny_service.generate("ok", GREEDY, 513)


def test_rows_and_queue_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("NTP_MAX_ROWS", "3")
    monkeypatch.setenv("NTP_QUEUE_SIZE", "7")
    service = ModelService(tiny_llama(), byte_tokenizer())
    assert (service.max_rows, service.queue_size) == (3, 7)
    monkeypatch.setenv("NTP_MAX_ROWS", "many")
    with pytest.raises(ValueError, match="NTP_MAX_ROWS must be a whole number"):
        ModelService(tiny_llama(), byte_tokenizer())


def test_old_records_without_batch_size_still_load(tiny_service):
    record = next(iter(tiny_service.generate("x", GREEDY, 1)))
    d = record.to_dict()
    assert d["batch_size"] == record.batch_size
    del d["batch_size"]
    assert StepRecord.from_dict(d).batch_size == 1


def test_many_threads_at_once(tiny_service):
    """Eight callers in eight threads, each seeded: every one gets its solo tokens."""
    results = {}

    def caller(seed):
        results[seed] = tokens(tiny_service.generate("many", SamplingSettings(seed=seed), 15 + seed, ignore_eos=True))

    threads = [threading.Thread(target=caller, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seed, got in results.items():
        assert got == tokens(tiny_service.generate("many", SamplingSettings(seed=seed), 15 + seed, ignore_eos=True))


def test_sliding_window_attention_joins_like_alone():
    """Gemma 3 (tiny, window of 8 tokens): left pads shift every column of a row alike, so the window
    the mask applies is the same, alone or joined mid-flight."""
    from tests.model.test_tracing import tiny_other

    service = ModelService(tiny_other("gemma3"), byte_tokenizer())
    a = ("a prompt longer than the window", SamplingSettings(seed=1), 40)
    b = ("short", SamplingSettings(temperature=0.7, seed=2), 20)
    c = ("c", GREEDY, 6)
    got = joins_mid_flight(service, a, b, c, 7)
    for q, run in zip((a, b, c), got):
        idle(service)
        assert tokens(run) == tokens(service.generate(*q, ignore_eos=True)), q[0]
    assert max(r.batch_size for r in got[1]) >= 2


def test_a_jobs_status_follows_it_through_the_room():
    from model_service.engine.streams import JobStatus

    small_room = ModelService(tiny_llama(), byte_tokenizer(), max_rows=2, queue_size=8)  # all three may wait
    idle(small_room)
    with one_boundary(small_room):  # the scheduler waits at its next forward pass: nothing has moved yet
        first = small_room.generate("a", SamplingSettings(seed=1), 30, ignore_eos=True)
        second = small_room.generate("b", SamplingSettings(seed=2), 30, ignore_eos=True)
        third = small_room.generate("c", SamplingSettings(seed=3), 30, ignore_eos=True)  # 2 rows: it waits
        job, waiting = first._jobs[0], third._jobs[0]
        assert job.status in (JobStatus.WAITING, JobStatus.PREFILLING)
    take(first, 2)
    assert job.status is JobStatus.DECODING and waiting.status is JobStatus.WAITING
    first.close()
    assert job.status is JobStatus.CANCELLED
    list(second)
    assert second._jobs[0].status is JobStatus.FINISHED
    list(third)
    assert waiting.status is JobStatus.FINISHED


def test_stopping_while_the_last_records_cancel_their_rows_ends_the_loop():
    """A caller that cancels as its records arrive (a web process gone, a page closed) while the room stops: the loop's
    end must not hold the lock its output worker needs. It did, and a scheduler process stayed alive for ever,
    holding its copy of the model, after its web process ended."""
    from model_service import ModelService
    from model_service.engine.step import RowState
    from model_service.engine.streams import Job, StreamSink
    from model_service.records.settings import SamplingSettings

    from ..conftest import byte_tokenizer, tiny_llama

    service = ModelService(tiny_llama(), byte_tokenizer())
    scheduler, arrived = service.scheduler, threading.Event()

    class Cancelling(StreamSink):
        def put(self, job, record):  # each record: a moment, then a cancel (which takes the room's lock)
            arrived.set()
            time.sleep(0.2)  # the room's stop lands while a record is going out
            scheduler.cancel([])

    ids = service.encode("Hello there")
    job = Job(ids, RowState(service.loaded, SamplingSettings(seed=1), 200, (), [], True), 0, 5, True, Cancelling())
    scheduler.submit([job])
    assert arrived.wait(60)
    scheduler.stop(timeout=60)
    assert not scheduler.alive  # a deadlock would keep the loop's thread waiting here until the deadline
