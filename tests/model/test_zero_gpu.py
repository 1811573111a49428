"""The service on ZeroGPU, with a stand-in `spaces` package that does what the real one does at the
process boundary: it computes the lease's duration from the call's own arguments, pickles the arguments
and every yielded or returned value, and runs the function as a forked worker would (no CUDA here)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import sys
import types

import pytest

from model_service import ModelService, SamplingSettings, limits
from model_service.records.step import StepRecord

from ..conftest import byte_tokenizer, tiny_llama


def crossing(value):
    return pickle.loads(pickle.dumps(value))


@pytest.fixture()
def zero(monkeypatch):
    """(the zero_gpu module built on the stand-in spaces, the leases it asked for, a direct service)."""
    leases = []
    fake = types.ModuleType("spaces")

    def GPU(task=None, *, duration=None):
        def wrap(fn):
            def seconds(args, kwargs):
                return duration(*args, **kwargs) if callable(duration) else duration

            if inspect.isgeneratorfunction(fn):
                def run(*args, **kwargs):
                    args, kwargs = crossing((args, kwargs))
                    leases.append((fn.__name__, seconds(args, kwargs)))
                    for value in fn(*args, **kwargs):
                        yield crossing(value)
            else:
                def run(*args, **kwargs):
                    args, kwargs = crossing((args, kwargs))
                    leases.append((fn.__name__, seconds(args, kwargs)))
                    return crossing(fn(*args, **kwargs))
            return run
        return wrap

    fake.GPU = GPU
    monkeypatch.setitem(sys.modules, "spaces", fake)
    import model_service.deploy.zero_gpu as zero_gpu

    module = importlib.reload(zero_gpu)
    inner = ModelService(tiny_llama(), byte_tokenizer())
    yield module.ZeroGpuService(inner), leases, ModelService(tiny_llama(), byte_tokenizer())
    monkeypatch.delitem(sys.modules, "spaces")
    importlib.reload(zero_gpu)


def timeless(record) -> dict:
    """A record's JSON form without its timings (two runs never take the same milliseconds)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not (k == "ms" or k.endswith("_ms"))}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(record.to_dict())


def tokens(records):
    return [r.token_id for r in records if isinstance(r, StepRecord)]


def test_a_generate_runs_in_slices_and_draws_what_one_run_draws(zero, monkeypatch):
    service, leases, direct = zero
    monkeypatch.setattr(limits, "ZERO_GPU_SLICE_TOKENS", 4)
    settings = SamplingSettings(temperature=0.9, top_p=0.95, seed=7)
    sliced = list(service.generate("Hello there", settings, max_new_tokens=10, ignore_eos=True))
    whole = list(direct.generate("Hello there", settings, max_new_tokens=10, ignore_eos=True))
    assert tokens(sliced) == tokens(whole) and len(sliced) == 10
    assert [r.step for r in sliced] == list(range(10))
    assert sliced[-1].text == whole[-1].text and sliced[-1].stop_reason == "max_tokens"
    assert [r.stop_reason for r in sliced[:-1]] == [None] * 9  # a slice's end is not the run's
    # three leases, each sized from its slice (4, 4, then the 2 left), never from the whole run
    seconds = [limits.ZERO_GPU_BASE_SECONDS + n * limits.ZERO_GPU_SECONDS_PER_TOKEN for n in (4, 4, 2)]
    assert leases == [("generate_slice", s) for s in seconds]


def test_an_unseeded_run_keeps_its_own_seed_across_slices(zero, monkeypatch):
    service, _, direct = zero
    monkeypatch.setattr(limits, "ZERO_GPU_SLICE_TOKENS", 3)
    sliced = list(service.generate("Hi", SamplingSettings(temperature=1.0), max_new_tokens=8, ignore_eos=True))
    assert len({r.seed for r in sliced}) == 1
    replay = direct.generate("Hi", SamplingSettings(temperature=1.0, seed=sliced[0].seed), max_new_tokens=8,
                             ignore_eos=True)
    assert tokens(sliced) == tokens(replay)


def test_bad_input_fails_here_naming_the_field_and_costs_no_lease(zero):
    service, leases, _ = zero
    with pytest.raises(ValueError, match="max_new_tokens"):
        list(service.generate("Hi", SamplingSettings(), max_new_tokens=0))
    with pytest.raises(ValueError, match="top_n"):
        list(service.generate("Hi", SamplingSettings(), top_n=0))
    with pytest.raises(ValueError, match="request 2"):
        service.generate_batch([{"prompt": "a"}, {"prompt": "b", "max_new_tokens": -1}])
    assert leases == []


def test_an_error_inside_the_lease_keeps_its_message(zero):
    service, leases, _ = zero
    with pytest.raises(ValueError, match="block"):
        service.trace("Hello", block=99)
    assert leases == [("one_pass", limits.ZERO_GPU_TRACE_SECONDS)]


def test_one_pass_views_cross_the_boundary_equal(zero):
    service, leases, direct = zero
    assert timeless(service.trace("Hello", block=1)) == timeless(direct.trace("Hello", block=1))
    assert timeless(service.trace_attention("Hello", block=2)) == timeless(direct.trace_attention("Hello", block=2))
    view = service.lm_head("Hello", continue_from=[72], top_k=5)
    assert timeless(view) == timeless(direct.lm_head("Hello", continue_from=[72], top_k=5))
    assert [name for name, _ in leases] == ["one_pass"] * 3


def test_prompt_logprobs_is_one_lease_and_crosses_equal(zero):
    service, leases, direct = zero
    assert timeless(service.prompt_logprobs("Thủ đô", top_n=3)) == timeless(direct.prompt_logprobs("Thủ đô", top_n=3))
    assert leases == [("one_pass", limits.ZERO_GPU_TRACE_SECONDS)]
    with pytest.raises(ValueError, match="prompt is empty"):
        service.prompt_logprobs("")
    assert len(leases) == 1  # checked here, before any lease


def test_a_conversation_crosses_into_the_lease_and_a_refusing_template_is_named_before_one(zero):
    from ..conftest import byte_chat_tokenizer

    service = type(zero[0])(ModelService(tiny_llama(), byte_chat_tokenizer()))
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Why?"}]
    settings = SamplingSettings(temperature=0.9, seed=3)
    leased = tokens(service.generate(chat, settings, max_new_tokens=6, chat=True, ignore_eos=True))
    assert leased == tokens(service.inner.generate(chat, settings, max_new_tokens=6, chat=True, ignore_eos=True))
    strict = type(zero[0])(ModelService(tiny_llama(), byte_chat_tokenizer(system=False)))
    with pytest.raises(ValueError, match="messages: the chat template .* refused this conversation") as e:
        list(strict.generate(chat, settings, max_new_tokens=2, chat=True))
    assert e.value.key == "chat_refused"


def test_sample_many_is_one_lease_and_bad_counts_cost_none(zero):
    service, leases, direct = zero
    settings = SamplingSettings(temperature=0.9, seed=4)
    many = service.sample_many("Hello", settings, continue_from=[72], n=2000, seed=1)
    same = direct.sample_many("Hello", settings, continue_from=[72], n=2000, seed=1)
    assert (many.counts, many.token_id, many.chi2) == (same.counts, same.token_id, same.chi2)
    assert leases == [("one_pass", limits.ZERO_GPU_TRACE_SECONDS)]
    with pytest.raises(ValueError, match="draws"):
        service.sample_many("Hello", settings, n=10**6)
    assert len(leases) == 1


def test_the_busy_room_lesson_is_one_lease_and_crosses_equal(zero):
    service, leases, direct = zero
    settings = SamplingSettings(temperature=1.0, top_p=0.95, seed=8)
    effect = service.batch_effect("Hello", settings, continue_from=[72])
    assert timeless(effect) == timeless(direct.batch_effect("Hello", settings, continue_from=[72]))
    assert leases == [("one_pass", limits.ZERO_GPU_TRACE_SECONDS)]
    with pytest.raises(ValueError, match="prompt is empty"):
        service.batch_effect("", settings)
    assert len(leases) == 1  # checked here, before any lease


def test_a_batch_is_one_lease_sized_from_its_longest_request(zero):
    from model_service import Request

    service, leases, direct = zero
    requests = [Request("Hi", SamplingSettings(temperature=0), max_new_tokens=3),
                Request("Yo", SamplingSettings(temperature=0.8, seed=2), max_new_tokens=5)]
    steps = list(service.generate_batch(requests))
    same = list(direct.generate_batch(requests))
    assert [[r and r.token_id for r in s.rows] for s in steps] == [[r and r.token_id for r in s.rows] for s in same]
    assert leases == [("generate_batch_lease", limits.ZERO_GPU_BASE_SECONDS + 5 * limits.ZERO_GPU_SECONDS_PER_TOKEN)]


def test_no_shared_scheduler_runs_in_the_app_process(zero):
    """On ZeroGPU CUDA is only emulated outside a lease: the room's view must not start a scheduler."""
    service, _, _ = zero
    room = service.room()
    assert room.rows == () and service.inner._scheduler is None


def test_without_the_spaces_package_the_decorator_changes_nothing():
    import model_service.deploy.zero_gpu as zero_gpu

    if zero_gpu.spaces is not None:
        pytest.skip("the spaces package is installed here")

    def f(x):
        return x + 1

    assert zero_gpu.gpu(duration=5)(f) is f


def test_a_kept_runs_what_if_costs_no_lease_and_is_the_runs_own_step(zero, monkeypatch):
    """The live lab on ZeroGPU: a run's steps cross back with their logits (a NumPy row and u each) and are kept on
    the app's side, so a what-if is answered there, on the CPU, with no GPU lease."""
    service, leases, _ = zero
    monkeypatch.setattr(limits, "ZERO_GPU_SLICE_TOKENS", 3)
    settings = SamplingSettings(temperature=0.9, seed=11)
    run = list(service.generate("Hello", settings, max_new_tokens=6, ignore_eos=True, keep="page"))
    slices = len(leases)
    for k in (0, 4):
        what = service.what_if("Hello", settings, 6, continue_from=tokens(run[:k]), keep="page")
        assert what.logits_from == "kept" and timeless(what.record) == timeless(run[k])
    cooler = service.what_if("Hello", SamplingSettings(temperature=0.3, seed=11), 6, continue_from=tokens(run[:2]),
                             keep="page")
    assert cooler.logits_from == "kept" and cooler.record.stages[-1].probs != run[2].stages[-1].probs
    assert len(leases) == slices  # no lease for a what-if
    unknown = service.what_if("Hello", settings, 6, continue_from=tokens(run[:2]), keep="other")
    assert unknown.logits_from == "not_kept" and leases[-1][0] == "one_pass"  # recomputed: in a lease
