"""The model service on Ray Serve (model_service/deploy/ray_serve.py) and the UI's RemoteService in front of it.

A local Ray instance is started for this module and shut down after it; the replica serves the tiny random
Llama, whose weights equal tests/conftest.py's tiny_service, so every remote record can be compared with the
in-process service's.
"""

from __future__ import annotations

import functools
import os

import pytest

ray = pytest.importorskip("ray", reason="Ray Serve is an optional dependency: requirements-scale.txt")
from ray import serve  # noqa: E402

from model_service import SamplingSettings
from model_service.deploy.remote import RemoteService  # noqa: E402
from model_service.records import validation
from tests.conftest import ROOT, free_port, launched  # noqa: E402
from tests.scale import factories  # noqa: E402
from tests.waiting import wait_until

TIMINGS = ("forward_ms", "sampling_ms", "capture_ms", "batch_size")


def _same(record) -> dict:
    """A record without what depends on when it ran (timings, who shared the step)."""
    d = record.to_dict()
    if "rows" in d:  # a BatchStep
        d = {**{k: v for k, v in d.items() if k not in ("forward_ms", "sampling_ms", "active", "logits_shape", "params")},
             "rows": [{k: v for k, v in r.items() if k not in TIMINGS} if r else None for r in d["rows"]]}
    return {k: v for k, v in d.items() if k not in TIMINGS}


@pytest.fixture(scope="module")
def remote():
    from model_service.deploy.ray_serve import application

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}})
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    factory = functools.partial(factories.tiny, step_delay_s=0.02)  # ~20 ms a step: a run lasts long enough to act on
    import torch

    # the same intra-op threads as this process: float sums in another order could move a probability's 6th digit
    serve.run(application(factory=factory, threads=torch.get_num_threads(), num_cpus=0), name="playground",
              route_prefix="/")
    service = RemoteService(f"http://127.0.0.1:{port}")
    assert service.wait(120).ready, service.status
    yield service
    serve.shutdown()
    ray.shutdown()


SETTINGS = [
    SamplingSettings(temperature=0.8, top_p=0.95, seed=1),
    SamplingSettings(temperature=1.3, top_k=20, min_p=0.05, seed=7, order="vllm"),
    SamplingSettings(temperature=0.0, seed=4),  # unseeded runs draw a fresh seed, which the record shows
    SamplingSettings(temperature=0.7, top_p=0.9, seed=3, order="llama.cpp"),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.order}-T{s.temperature}")
def test_generate_equals_the_in_process_service(remote, tiny_service, settings):
    here = list(tiny_service.generate("Hello, world", settings, 12, stop=["zz"], top_n=5))
    there = list(remote.generate("Hello, world", settings, 12, stop=["zz"], top_n=5))
    assert type(there[0]) is type(here[0])
    assert [_same(r) for r in there] == [_same(r) for r in here]


def test_step_continues_like_the_in_process_service(remote, tiny_service):
    """The lab's Step button: continue_from replays the run after the tokens already generated."""
    settings = SamplingSettings(temperature=0.9, seed=11)
    first = [r.token_id for r in tiny_service.generate("Step by step", settings, 3)]
    here = list(tiny_service.generate("Step by step", settings, 6, continue_from=first))
    there = list(remote.generate("Step by step", settings, 6, continue_from=first))
    assert [_same(r) for r in there] == [_same(r) for r in here] and there[0].step == 3


def test_engine_batch_equals_the_in_process_service(remote, tiny_service):
    requests = [{"prompt": "One", "settings": {"temperature": 0.5, "seed": 1}, "max_new_tokens": 5},
                {"prompt": "Two words", "settings": {"temperature": 1.5, "top_k": 10, "seed": 2}, "max_new_tokens": 8,
                 "stop": ["q"]}]
    here = list(tiny_service.generate_batch(requests, top_n=4))
    there = list(remote.generate_batch(requests, top_n=4))
    assert [_same(s) for s in there] == [_same(s) for s in here]


def test_trace_lm_head_and_pieces_equal_the_in_process_service(remote, tiny_service):
    def strip(d):
        return {k: strip(v) if isinstance(v, dict) else v for k, v in d.items() if not (k == "ms" or k.endswith("_ms"))}

    assert strip(remote.trace("Trace me", block=2).to_dict()) == strip(tiny_service.trace("Trace me", block=2).to_dict())
    assert strip(remote.trace_attention("Trace me", block=1).to_dict()) == strip(
        tiny_service.trace_attention("Trace me", block=1).to_dict())
    assert remote.lm_head("Head", top_k=5) == tiny_service.lm_head("Head", top_k=5)
    assert remote.pieces_of([1, 70, 200]) == tiny_service.pieces_of([1, 70, 200])
    assert remote.encode("abc") == tiny_service.encode("abc")
    assert remote.info == tiny_service.info


def test_prompt_logprobs_equal_the_in_process_service(remote, tiny_service):
    far, near = remote.prompt_logprobs("Thủ đô", top_n=3), tiny_service.prompt_logprobs("Thủ đô", top_n=3)
    assert far.positions == near.positions and far.positions[0].logprob is None
    with pytest.raises(validation.InputError, match="top_n must be a whole number between 0 and 20"):
        remote.prompt_logprobs("x", top_n=50)


def test_a_conversation_crosses_as_json_and_is_checked_by_the_same_validator(remote):
    """The pairs a chat's messages become travel as lists of two; the replica reads them with validation.messages."""
    import httpx

    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    with pytest.raises(validation.InputError) as e:  # the tiny model has no chat template: said by the replica
        remote.encode(chat, chat=True)
    assert e.value.key == "no_chat_template"
    answer = httpx.post(f"{remote.url}/generate", json={"prompt": [["user", "Hi"], ["tool", "42"], ["user", "?"]],
                                                        "chat": True, "max_new_tokens": 2})
    assert answer.status_code == 400 and answer.json()["key"] == "message_tool", answer.text
    assert answer.json()["values"]["field"] == "messages[1].role"


def test_sample_many_equals_the_in_process_service(remote, tiny_service):
    settings = SamplingSettings(temperature=0.9, top_k=40, seed=6)
    far, near = (s.sample_many("Hello", settings, continue_from=[72], n=3000, seed=2) for s in (remote, tiny_service))
    timeless = lambda m: {k: v for k, v in m.to_dict().items() if not k.endswith("_ms")}  # noqa: E731
    assert timeless(far) == timeless(near) and far.tokens == near.tokens
    with pytest.raises(validation.InputError, match="draws must be a whole number between 100 and 10,000"):
        remote.sample_many("Hello", settings, n=5)


def test_the_busy_room_lesson_equals_the_in_process_service(remote, tiny_service):
    settings = SamplingSettings(temperature=1.0, top_p=0.95, seed=8)
    far, near = (s.batch_effect("Hello", settings, continue_from=[72]) for s in (remote, tiny_service))
    assert {**far.to_dict(), "forward_ms": 0} == {**near.to_dict(), "forward_ms": 0}
    with pytest.raises(ValueError, match="continue_from"):
        remote.batch_effect("Hello", settings, continue_from=[10**9])


def test_bad_input_reaches_the_visitor_as_the_same_clear_error(remote):
    with pytest.raises(validation.InputError) as e:
        remote.generate("x", {"temperature": -1}, 4)
    assert "temperature" in str(e.value) and e.value.key  # keyed: the page can say it in Vietnamese
    with pytest.raises(ValueError, match="top_n"):
        remote.generate("x", SamplingSettings(), 4, top_n=10_000)
    with pytest.raises(ValueError, match="request 1"):
        remote.generate_batch([{"prompt": "", "max_new_tokens": 3}])


def test_the_ray_route_refuses_what_every_path_refuses_by_the_same_named_error(remote):
    """1,000 stop strings, a 'false' chat, a body that is no object: sent raw to the routes, not through the client."""
    import httpx

    stops = [f"s{i}" for i in range(1000)]
    with pytest.raises(ValueError, match=r"stop: at most 8 stop strings, got 1000"):
        remote.generate("x", None, 4, stop=stops)  # the client checks first, with the same validator
    answer = httpx.post(f"{remote.url}/generate", json={"prompt": "x", "max_new_tokens": 2, "stop": stops})
    assert answer.status_code == 400 and answer.json()["key"] == "stop_count", answer.text
    assert "stop: at most 8 stop strings" in answer.json()["message"]
    batch = httpx.post(f"{remote.url}/generate_batch", json={"requests": [{"prompt": "x", "stop": stops}]})
    assert batch.status_code == 400 and "request 1: stop: at most 8" in batch.json()["message"], batch.text
    answer = httpx.post(f"{remote.url}/trace", json={"prompt": "x", "chat": "maybe"})
    assert answer.status_code == 400 and "chat must be true or false" in answer.json()["message"], answer.text
    answer = httpx.post(f"{remote.url}/encode", json=["not", "an", "object"])
    assert answer.status_code == 400 and "must be a JSON object" in answer.json()["message"], answer.text




def test_a_stream_closed_by_the_ui_stops_the_replicas_row(remote):
    stream = remote.generate("Cancel me", SamplingSettings(seed=5), 200)
    next(stream), next(stream)
    assert len(remote.room().rows) == 1
    stream.close()  # what a Stop, a closed tab or a dropped gradio_client does to the UI's iterator
    closed_at = remote.room().step
    wait_until(lambda: not remote.room().rows, "the replica ending the row nobody reads", interval=0.05)
    ran = remote.room().step - closed_at
    assert ran < 50, f"{ran} steps ran after the close (a 200-token run)"  # HTTP hang-up + one step boundary


def test_a_killed_replica_gives_a_clear_error_and_the_next_request_succeeds(remote):
    stream = remote.generate("Long run", SamplingSettings(seed=9), 200)
    next(stream)
    pid = remote._refresh(force=True)["pid"]
    started = remote._refresh(force=True)["started"]
    os.kill(pid, 9)  # the replica's process dies mid-run
    with pytest.raises(validation.Unavailable) as e:
        for _ in stream:
            pass
    assert e.value.key in ("service_lost", "service_away"), e.value
    # Serve restarts the replica; meanwhile the page says it waits, and the next request then succeeds
    wait_until(lambda: (remote._refresh(force=True) or {}).get("started") not in (None, started),
               "the replica's restart", interval=0.05)
    records = list(remote.generate("After the restart", SamplingSettings(seed=1), 4))
    assert len(records) == 4 and records[-1].stop_reason == "max_tokens"


def test_the_page_in_front_of_the_remote_service_streams_the_same_records(remote, tiny_service):
    """app.py --service: the unchanged page, its API included, served by the replica."""
    from gradio_client import Client

    from playground.page import build_demo

    with launched(build_demo(remote)) as url:
        client = Client(url, verbose=False)
        info = client.predict(api_name="/model_info")
        assert info["status"]["ready"] and info["model"]["vocab_size"] == tiny_service.info.vocab_size
        streamed = list(client.submit("Hello", 0.8, 0, 0.95, 0.0, 3, "hf", 6, api_name="/stream_records"))
        local = tiny_service.generate("Hello", SamplingSettings(temperature=0.8, top_p=0.95, seed=3), 6)
        assert [r["token_id"] for r in streamed] == [r.token_id for r in local]


def test_the_openai_api_in_front_of_the_remote_service_answers_as_the_service_does(remote, tiny_service):
    """app.py --service with the OpenAI-compatible routes: a seeded completion, whole and streamed, draws the
    replica's tokens, which are the in-process service's; a bad one is answered in OpenAI's shape."""
    openai = pytest.importorskip("openai")
    from playground.page import build_demo

    settings = SamplingSettings(temperature=0.8, top_p=0.95, seed=3)
    local = [r for r in tiny_service.generate("Hello", settings, 6)]
    with launched(build_demo(remote), api=remote) as url:
        client = openai.OpenAI(base_url=f"{url.rstrip('/')}/v1", api_key="-", max_retries=0)
        model = client.models.list().data[0].id
        assert model == remote.info.name
        whole = client.completions.create(model=model, prompt="Hello", max_tokens=6, temperature=0.8, top_p=0.95,
                                          seed=3, logprobs=2)
        assert whole.choices[0].text == local[-1].text
        assert whole.usage.completion_tokens == len(local)
        pieces = "".join(c.choices[0].text for c in client.completions.create(
            model=model, prompt="Hello", max_tokens=6, temperature=0.8, top_p=0.95, seed=3, stream=True))
        assert pieces == local[-1].text
        with pytest.raises(openai.BadRequestError) as bad:
            client.completions.create(model=model, prompt="Hello", max_tokens=2, temperature=5)
        assert "temperature" in bad.value.message


def test_the_interventions_cross_as_records_and_equal_the_in_process_service(remote, tiny_service):
    from model_service.records.intervention import Knockout

    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if not (k == "ms" or k.endswith("_ms"))}
        return [strip(v) for v in d] if isinstance(d, (list, tuple)) else d

    same = lambda far, near: strip(far.to_dict()) == strip(near.to_dict())
    assert same(remote.attribute("hello world", head_block=2), tiny_service.attribute("hello world", head_block=2))
    settings = SamplingSettings(temperature=0.8, seed=4)
    target = Knockout("head", 2, 3, "mean")
    assert same(remote.knock_out("hello world", target, settings), tiny_service.knock_out("hello world", target, settings))
    cells = [(0, 1), (None, 2), (3, 2)]
    assert same(remote.patch("hello world", "hello there", cells), tiny_service.patch("hello world", "hello there", cells))
    far, near = (client.steer("hello", "good", "bad", 1, 2.0, settings, 4) for client in (remote, tiny_service))
    assert same(far, near)
    with pytest.raises(ValueError, match="kind must be one of attention, mlp, head"):
        remote.knock_out("hello", {"kind": "neuron", "block": 1})
    # the precision check: a float32 model beside itself; another precision needs a model loaded by name, and says so
    assert same(remote.precision_effect("hello world"), tiny_service.precision_effect("hello world"))
    assert remote.precision_effect("hello world").max_abs_dlogit == 0
    with pytest.raises(RuntimeError, match="loads a copy of the model, and this model was not loaded from a name"):
        remote.precision_effect("hello world", precision="int4")
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, int4, got 'int3'"):
        remote.precision_effect("hello world", precision="int3")
