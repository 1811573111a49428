"""The scheduler in a process of its own (model_service/engine/scheduler_process.py), on the tiny random Llama saved to
disk: the same records as the scheduler in a thread, cancels and refusals across the pipe, and a process that
dies ends its callers' streams with a clear message instead of a hang."""

from __future__ import annotations

import os
import threading

import pytest

from model_service import ModelService, Request, SamplingSettings, StepRecord, limits
from model_service.engine.scheduler_process import SchedulerProcess
from model_service.records import validation, wire
from model_service.service import scheduler_mode
from tests.conftest import byte_tokenizer, tiny_llama
from tests.waiting import finishes, wait_until

SAMPLED = dict(temperature=0.9, top_p=0.95)


def tokens(records):
    return [r.token_id for r in records if isinstance(r, StepRecord)]


def drawn(record: StepRecord) -> tuple:
    """What a seeded run must repeat wherever it runs (its probabilities may differ in round-off: a batch, or the
    other process's thread count, sums in another order)."""
    return record.step, record.token_id, record.text, record.seed, record.stop_reason, record.draw.u


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    tiny_llama().save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def in_process(tiny_dir):
    """The room's loop in a spawned process; this process keeps its own copy for everything else."""
    service = ModelService.load(tiny_dir, "cpu", scheduler="process")
    yield service
    service.close()


@pytest.fixture(scope="module")
def in_thread(tiny_dir):
    return ModelService.load(tiny_dir, "cpu")


def test_it_runs_in_another_process(in_process):
    scheduler = in_process.scheduler
    assert isinstance(scheduler, SchedulerProcess) and scheduler.alive
    assert scheduler._process.pid != os.getpid()
    assert (scheduler.max_rows, scheduler.queue_size) == (in_process.max_rows, in_process.queue_size)
    if hasattr(os, "getpriority"):  # the room's passes yield the CPU to the web process (limits.SCHEDULER_NICE)
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, scheduler._process.pid) == min(19, mine + limits.SCHEDULER_NICE)


def test_bad_input_is_refused_by_name_before_it_reaches_the_process(in_process):
    """The same validators as every other path (tests/app/test_bad_input.py): nothing crosses the pipe."""
    steps = in_process.scheduler.steps
    with pytest.raises(ValueError, match="stop: at most 8 stop strings, got 1000"):
        in_process.generate("x", None, 2, stop=[f"s{i}" for i in range(1000)])
    with pytest.raises(ValueError, match="request 1: stop: at most 8 stop strings"):
        in_process.generate_batch([{"prompt": "x", "stop": [f"s{i}" for i in range(1000)]}])
    with pytest.raises(ValueError, match="top_n must be a whole number"):
        in_process.generate("x", None, 2, top_n=1.5)
    assert in_process.scheduler.steps == steps and in_process.scheduler.alive


def test_records_equal_the_thread_schedulers_alone_and_among_strangers(in_process, in_thread):
    prompts = [f"prompt {i}" for i in range(6)]
    alone = {p: list(in_thread.generate(p, SamplingSettings(**SAMPLED, seed=i), 12, ignore_eos=True))
             for i, p in enumerate(prompts)}
    got = {}

    def run(i, p):
        got[p] = list(in_process.generate(p, SamplingSettings(**SAMPLED, seed=i), 12, ignore_eos=True))

    threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(prompts)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    for p in prompts:
        assert [drawn(r) for r in got[p]] == [drawn(r) for r in alone[p]], p
    assert max(r.batch_size for rs in got.values() for r in rs) > 1  # they did share steps


def test_a_request_joining_mid_flight_gets_its_solo_tokens(in_process, in_thread):
    long_run = in_process.generate("a long one", SamplingSettings(**SAMPLED, seed=5), 60, ignore_eos=True)
    first = [next(long_run) for _ in range(7)]
    joined = list(in_process.generate("joins", SamplingSettings(**SAMPLED, seed=6), 10, ignore_eos=True))
    rest = list(long_run)
    assert tokens(joined) == tokens(in_thread.generate("joins", SamplingSettings(**SAMPLED, seed=6), 10, ignore_eos=True))
    assert tokens(first + rest) == tokens(in_thread.generate("a long one", SamplingSettings(**SAMPLED, seed=5), 60,
                                                             ignore_eos=True))


def test_an_unseeded_request_draws_with_the_seed_its_record_shows(in_process, in_thread):
    records = list(in_process.generate("fresh", SamplingSettings(**SAMPLED), 8, ignore_eos=True))
    seed = records[0].seed
    assert all(r.seed == seed for r in records)
    assert tokens(records) == tokens(in_thread.generate("fresh", SamplingSettings(**SAMPLED, seed=seed), 8, ignore_eos=True))


def test_batches_steps_and_many_draws_cross_the_pipe(in_process, in_thread):
    requests = [Request("ab", SamplingSettings(seed=1), 5), Request("cd", SamplingSettings(**SAMPLED, seed=2), 7)]
    ours, theirs = list(in_process.generate_batch(requests)), list(in_thread.generate_batch(requests))
    assert [[r and r.token_id for r in s.rows] for s in ours] == [[r and r.token_id for r in s.rows] for s in theirs]
    assert [s.active for s in ours] == [s.active for s in theirs]
    # Step: a run continued token by token replays the full run
    full = tokens(in_process.generate("step", SamplingSettings(**SAMPLED, seed=9), 6, ignore_eos=True))
    stepped = []
    for _ in range(6):
        stepped.append(next(in_process.generate("step", SamplingSettings(**SAMPLED, seed=9), 6, ignore_eos=True,
                                                continue_from=stepped)).token_id)
    assert stepped == full
    # sample_many needs the step's logits back: they cross with the record
    many, alone = (s.sample_many("Hello", SamplingSettings(seed=3), n=400, seed=5) for s in (in_process, in_thread))
    assert (many.token_id, many.counts, [t.id for t in many.tokens]) == (alone.token_id, alone.counts,
                                                                          [t.id for t in alone.tokens])


def test_closing_a_stream_frees_its_row_and_waiting_callers_see_their_place(tiny_dir):
    service = ModelService.load(tiny_dir, "cpu", scheduler="process", max_rows=1, queue_size=1)
    try:
        first = service.generate("busy", SamplingSettings(seed=1), 200, ignore_eos=True)
        next(first)
        waiting = service.generate("next", SamplingSettings(seed=2), 3, ignore_eos=True, report_waiting=True)
        place = next(waiting)
        assert place.position == 1 and place.ahead == 0  # a Waiting record, from the other process
        with pytest.raises(validation.Unavailable) as full:  # one row running, one waiting: the queue is full
            service.generate("third", SamplingSettings(seed=3), 3)
        assert full.value.key == "room_full" and "1" in str(full.value)
        steps = service.room().step
        first.close()  # the row leaves at the next boundary; the waiting request takes it
        assert tokens(waiting) == tokens(service.generate("next", SamplingSettings(seed=2), 3, ignore_eos=True))
        room = service.room()
        # the closed row stopped costing steps: it had ~199 tokens to go, and took at most the steps that ran while
        # its close crossed the pipe (a few ms: on the native CPU step, a tiny model's steps are fractions of a ms)
        assert not room.rows and room.step < steps + 60
    finally:
        service.close()
    with pytest.raises(RuntimeError):
        service.generate("after close", SamplingSettings(seed=1), 2)


def test_a_process_that_dies_ends_its_streams_with_a_clear_message(tiny_dir):
    service = ModelService.load(tiny_dir, "cpu", scheduler="process")
    stream = service.generate("doomed", SamplingSettings(seed=1), 200, ignore_eos=True)
    next(stream)
    service.scheduler._process.kill()
    with pytest.raises(RuntimeError, match="scheduler process has stopped; restart the app"):
        finishes(lambda: list(stream), "the dead process's stream")  # it ends, with the reason, rather than hanging
    wait_until(lambda: not service.scheduler.alive, "the service seeing its process gone")
    with pytest.raises(RuntimeError, match="restart the app"):
        service.generate("after", SamplingSettings(seed=1), 2)
    with pytest.raises(RuntimeError, match="restart the app"):  # never None
        service.room()
    service.close()


def test_closing_the_service_tells_requests_in_flight_why(tiny_dir):
    # A model switch closes the old service: its callers hear the reason, not "restart the app".
    service = ModelService.load(tiny_dir, "cpu", scheduler="process")
    stream = service.generate("in flight", SamplingSettings(seed=1), 200, ignore_eos=True)
    next(stream)
    service.close("the host switched the model")
    with pytest.raises(RuntimeError, match="the host switched the model"):
        list(stream)


def test_the_room_shows_which_learners_chose_a_seed(in_process):
    unseeded = in_process.generate("unseeded", SamplingSettings(**SAMPLED), 100, ignore_eos=True)
    seeded = in_process.generate("seeded", SamplingSettings(**SAMPLED, seed=4), 100, ignore_eos=True)
    next(unseeded), next(seeded)
    rows = in_process.room().rows
    unseeded.close(), seeded.close()
    assert sorted(row.seeded for row in rows) == [False, True]


def test_a_model_that_fails_to_load_fails_the_load_and_stops_the_process(tmp_path):
    with pytest.raises((RuntimeError, OSError, ValueError)):
        ModelService.load(str(tmp_path / "no-model-here"), "cpu", scheduler="process")


def test_one_error_codec_keeps_the_meaning_on_every_boundary():
    """The scheduler process's pipe, the Ray Serve route and the ZeroGPU lease carry errors one way (wire)."""
    from model_service.deploy.zero_gpu import Failure, _failure

    keyed = validation.Unavailable("room_full", waiting="3", limit="3")
    for back in (wire.decode_error(wire.encode_error(keyed)), _raised(_failure(keyed))):
        assert type(back) is validation.Unavailable and back.key == "room_full" and str(back) == str(keyed)
    named = validation.InputError("stop_count", field="stop", limit=8, count=1000)
    back = _raised(_failure(named))
    assert type(back) is validation.InputError and back.key == "stop_count"  # ZeroGPU kept only the text before
    plain = wire.decode_error(wire.encode_error(ValueError("max_new_tokens must be at most 4")))
    assert type(plain) is ValueError and str(plain) == "max_new_tokens must be at most 4"

    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    odd = wire.decode_error(wire.encode_error(Odd(1, 2)))  # another kind of error: its text survives
    assert isinstance(odd, RuntimeError) and "1/2" in str(odd)
    assert isinstance(_failure(keyed), Failure)


def _raised(failure) -> Exception:
    try:
        failure.raise_again()
    except Exception as e:  # noqa: BLE001 - whatever it raises is what the test reads
        return e
    raise AssertionError("raise_again raised nothing")


def test_the_mode_comes_from_the_argument_and_app_py_reads_the_environment(monkeypatch):
    import app

    assert scheduler_mode("thread") == "thread" and scheduler_mode("process") == "process"
    assert scheduler_mode("auto", "cpu") == "process"  # a CPU: away from the web server's GIL
    with pytest.raises(ValueError, match="scheduler must be one of auto, process, thread, got 'fork'"):
        scheduler_mode("fork")
    assert limits.SCHEDULER_MODES == ("auto", "process", "thread")
    assert app.parse_args([]).scheduler == "auto"
    monkeypatch.setenv("NTP_SCHEDULER", "process")
    assert app.parse_args([]).scheduler == "process"
    monkeypatch.setenv("NTP_SCHEDULER", "fork")
    with pytest.raises(SystemExit, match="NTP_SCHEDULER must be one of auto, process, thread, got 'fork'"):
        app.parse_args([])
