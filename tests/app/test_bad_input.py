"""Every public endpoint, fuzzed through gradio_client: each call either works or fails with a message
that names the field it did not like; the app keeps serving (' Paris' afterwards)."""

from __future__ import annotations

import re

import pytest
from gradio_client.exceptions import AppError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .lab_args import OFF_JSON

LESSON = "The capital of France is"
JUNK = st.one_of(
    st.none(), st.booleans(), st.text(max_size=12), st.sampled_from(["inf", "-1", "1e400", "nan", "<b>x</b>"]),
    st.floats(allow_nan=False, allow_infinity=False), st.integers(min_value=-(2**70), max_value=2**70),  # no NaN in JSON
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
)


def field(valid, name):
    """A value for one parameter: valid half of the time, junk otherwise."""
    return st.one_of(valid, JUNK).map(lambda v: (name, v))


SMALL = st.integers(min_value=1, max_value=3)
ENDPOINTS = {
    # api_name: the (name, strategy) of each positional argument
    "/stream_records": [
        field(st.just(LESSON), "prompt"), field(st.floats(0, 2), "temperature"), field(st.integers(0, 50), "top_k"),
        field(st.floats(0.01, 1), "top_p"), field(st.floats(0, 1), "min_p"), field(st.integers(0, 99), "seed"),
        field(st.sampled_from(["hf", "vllm", "llama.cpp"]), "order"), field(SMALL, "max_new_tokens"),
        field(st.lists(st.text(min_size=1, max_size=3), max_size=2), "stop"), field(st.booleans(), "chat"),
        field(SMALL, "top_n"),
    ],
    "/generate": [
        field(st.just(LESSON), "prompt"), field(st.booleans(), "chat template"), field(st.floats(0, 2), "temperature"),
        field(st.integers(0, 50), "top-k"), field(st.floats(0.01, 1), "top-p"), field(st.floats(0, 1), "min-p"),
        field(st.just("3"), "seed"), field(SMALL, "max new tokens"), field(st.just(""), "stop strings"),
        field(st.sampled_from(["hf", "vllm"]), "sampler order"),
    ],
    "/what_if": [  # the live lab: a knob moved (after a run, the step on screen redrawn; before one, only checked)
        field(st.just(LESSON), "prompt"), field(st.booleans(), "chat template"), field(st.floats(0, 2), "temperature"),
        field(st.integers(0, 50), "top-k"), field(st.floats(0.01, 1), "top-p"), field(st.floats(0, 1), "min-p"),
        field(st.just("3"), "seed"), field(SMALL, "max new tokens"), field(st.just(""), "stop strings"),
        field(st.sampled_from(["hf", "vllm"]), "sampler order"),
    ],
    "/sweep_t": [  # Sweep T: the same inputs (after a run, the step at every temperature; before one, only checked)
        field(st.just(LESSON), "prompt"), field(st.booleans(), "chat template"), field(st.floats(0, 2), "temperature"),
        field(st.integers(0, 50), "top-k"), field(st.floats(0.01, 1), "top-p"), field(st.floats(0, 1), "min-p"),
        field(st.just("3"), "seed"), field(SMALL, "max new tokens"), field(st.just(""), "stop strings"),
        field(st.sampled_from(["hf", "vllm"]), "sampler order"),
    ],
    "/trace_record": [field(st.just(LESSON), "prompt"), field(st.booleans(), "chat"), field(st.integers(1, 30), "block"),
                      field(st.integers(1, 5), "top_n")],
    "/attribution_record": [field(st.just(LESSON), "prompt"), field(st.booleans(), "chat"),
                            field(st.integers(0, 49151), "candidate"), field(st.integers(0, 49151), "rival"),
                            field(st.integers(1, 30), "head_block")],
    "/knockout_record": [field(st.just(LESSON), "prompt"), field(st.sampled_from(["attention", "mlp", "head"]), "kind"),
                         field(st.integers(1, 30), "block"), field(st.integers(1, 9), "head"),
                         field(st.sampled_from(["zero", "mean"]), "mode"),
                         field(st.just({"temperature": 0.7, "top_p": 0.9, "seed": 3}), "settings"),
                         field(st.booleans(), "chat"), field(st.integers(0, 49151), "candidate")],
    "/precision_record": [field(st.just(LESSON), "prompt"), field(st.booleans(), "chat"),
                          field(st.just("fp32"), "precision")],
    "/patch_record": [field(st.just(LESSON), "prompt"), field(st.just("The capital of Italy is"), "source"),
                      field(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 30)), min_size=1, max_size=3), "cells"),
                      field(st.booleans(), "chat"), field(st.integers(0, 49151), "candidate")],
    "/steer_record": [field(st.just("I think this movie is"), "prompt"), field(st.just("I love it"), "towards"),
                      field(st.just("I hate it"), "away"), field(st.integers(1, 30), "block"),
                      field(st.floats(-4, 4), "scale"), field(st.just({"temperature": 0.7, "seed": 3}), "settings"),
                      field(SMALL, "max_new_tokens"), field(st.booleans(), "chat")],
    "/engine_run": [field(st.just({"headers": [], "data": [[LESSON, 0, 0, 1, 0, "hf", "", 2, ""]]}), "table")],
}
FIELD_WORDS = re.compile(
    r"prompt|chat|temperature|top[-_ ]?k|top[-_ ]?p|min[-_ ]?p|seed|order|max[-_ ]?new[-_ ]?tokens|max tokens|stop|"
    r"top_n|block|table|row \d|scrub|step|head|candidate|rival|kind|mode|target|settings|source|cells|position|towards|away|scale",
    re.IGNORECASE,
)


def call(client, api_name, args):
    """One call, bounded in time: a hang is a bug as much as a crash."""
    job = client.submit(*args, api_name=api_name)
    job.result(timeout=120)
    return job.outputs(), job


@pytest.mark.parametrize("api_name", list(ENDPOINTS))
def test_every_call_succeeds_or_names_the_field(client, api_name):
    arguments = st.tuples(*ENDPOINTS[api_name])

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(arguments)
    def check(named):
        args = [v for _, v in named]
        try:
            call(client, api_name, args)
        except AppError as e:
            message = str(e)
            assert FIELD_WORDS.search(message), f"{api_name}{tuple(args)!r} -> {message!r} names no field"
            assert "upstream app raised an exception" not in message.lower()
            assert "<" not in message or "&lt;" in message or "<" not in repr(args)  # never raw markup

    check()
    # and the app still answers
    records = list(client.submit(LESSON, 0.0, 0, 1.0, 0.0, None, "hf", 1, api_name="/stream_records"))
    assert records[-1]["piece"] == " Paris"


def test_a_lone_surrogate_is_named_not_crashed():
    # gradio_client cannot even encode one; a raw JSON caller can ("\ud800"): our check names the field
    from model_service.records.validation import text

    with pytest.raises(ValueError, match="prompt contains characters that are not valid Unicode"):
        text("prompt", "a\ud800b")


@pytest.mark.parametrize("stop, expected", [(["\n"], ("\n",)), (["a\nb"], ("a\nb",)), ("abc", ("abc",))])
def test_stop_strings_are_used_exactly_as_given(monkeypatch, stop, expected):
    from model_service.records.validation import stop_strings

    assert stop_strings("stop", stop) == expected  # the API's parser: never split, never joined


def test_exact_cases_from_the_issue(client):
    bad = [
        ((LESSON, 1.0, 0, 1.0, 0.0, None, "hf", 1.5), "max_new_tokens must be a whole number"),
        ((LESSON, 1.0, 0, 1.0, 0.0, "nan", "hf", 2), "seed must be a whole number"),
        ((LESSON, 1.0, 2**63, 1.0, 0.0, None, "hf", 2), "top_k must be a whole number between 0 and"),
        ((LESSON, 1.0, 0, 1.0, 0.0, None, "hf", 2, [1]), "stop: each stop string must be non-empty text"),
        ((LESSON, 1.0, 0, 1.0, 0.0, None, "hf", 2, None, "maybe"), "chat must be true or false"),
        ((LESSON, 1.0, 0, 1.0, 0.0, 2**53, "hf", 2), "seed must be a whole number between 0 and"),
    ]
    for args, needle in bad:
        with pytest.raises(AppError, match=re.escape(needle)):
            client.predict(*args, api_name="/stream_records")
    # chat="false" means off, exactly
    off = client.predict(LESSON, 0.0, 0, 1.0, 0.0, None, "hf", 1, None, "false", api_name="/stream_records")
    assert off["piece"] == " Paris"


def test_a_seed_shown_after_a_run_replays_exactly(client):
    first = list(client.submit(LESSON, 1.0, 0, 1.0, 0.0, None, "hf", 4, api_name="/stream_records"))
    seed = first[0]["seed"]
    assert 0 <= seed < 2**53
    again = list(client.submit(LESSON, 1.0, 0, 1.0, 0.0, str(seed), "hf", 4, api_name="/stream_records"))
    assert [r["token_id"] for r in again] == [r["token_id"] for r in first] and again[0]["seed"] == seed


# ---- one validator per kind, on every path: the same bad stop strings get the same named error ----------

TOO_MANY_STOPS = [f"s{i}" for i in range(1000)]
TOO_LONG_STOP = ["x" * 10_000]


@pytest.mark.parametrize("stop, words", [(TOO_MANY_STOPS, "at most 8 stop strings, got 1000"),
                                         (TOO_LONG_STOP, "a stop string may have at most")])
def test_stop_strings_are_capped_on_every_path(client, embedded, stop, words):
    from model_service.records.settings import Request

    needle = "stop: " + words  # the page's box says its own label, "stop strings: ..."

    # the service, and so the Ray Serve route and the scheduler process's client, which call it
    with pytest.raises(ValueError, match=re.escape(needle)):
        embedded.generate(LESSON, None, 2, stop=stop)
    with pytest.raises(ValueError, match="request 1: " + re.escape(needle)):
        embedded.generate_batch([Request(LESSON, max_new_tokens=2, stop=tuple(stop))])
    # the API
    with pytest.raises(AppError, match=re.escape(needle)):
        client.predict(LESSON, 1.0, 0, 1.0, 0.0, None, "hf", 2, stop, api_name="/stream_records")
    # the page's box: stop strings separated by |
    with pytest.raises(AppError, match=re.escape("stop strings: " + words)):
        client.predict(LESSON, False, 1.0, 0, 1.0, 0.0, "", 2, "|".join(stop), "hf", api_name="/generate")


def raw_call(url: str, api_name: str, body: str) -> str:
    """What a JSON caller that is not gradio_client gets: Gradio's own call API, with NaN, Infinity or a lone
    surrogate written raw into the body. Returns the event stream's text."""
    import httpx

    posted = httpx.post(f"{url}gradio_api/call{api_name}", content=body, headers={"content-type": "application/json"})
    posted.raise_for_status()
    return httpx.get(f"{url}gradio_api/call{api_name}/{posted.json()['event_id']}", timeout=120).text


@pytest.mark.parametrize("api_name, body, needle", [
    ("/toy_softmax", '{"data": ["not a table", 0, 1, "en"]}', "the table must be rows of [token, logit], got str"),
    ("/toy_softmax", '{"data": [{"headers": ["token", "logit"], "data": [["Paris", NaN]]}, 0, 1, "en"]}',
     "the logit of 'Paris' must be a number"),
    ("/toy_softmax", '{"data": [{"headers": ["token", "logit"], "data": [["Paris", 1]]}, Infinity, 1, "en"]}',
     "shift must be a number"),
    ("/make_link", '{"data": ["Hi", false, "hot", 0, 1, 0, "", 8, "", "hf", ' + OFF_JSON + ', "en"]}', "temperature must be a number"),
    ("/make_link", '{"data": ["Hi", false, NaN, 0, 1, 0, "", 8, "", "hf", ' + OFF_JSON + ', "en"]}', "temperature must be a number"),
    ("/make_link", '{"data": ["\\ud800", false, 1, 0, 1, 0, "", 8, "", "hf", ' + OFF_JSON + ', "en"]}', "prompt contains characters"),
    ("/trace", '{"data": ["\\ud800", false, 1, -1, "en"]}', "prompt contains characters"),
    ("/trace", '{"data": ["Hi", false, Infinity, -1, "en"]}', "block must be a whole number"),
    ("/greedy_loop", '{"data": [NaN, "en"]}', "prompt must be text"),
    ("/engine_run", '{"data": [{"headers": [], "data": [["\\ud800", 1, 0, 1, 0, "hf", "", 2, ""]]}, "en"]}',
     "row 1, prompt contains characters"),
])
def test_raw_json_with_nan_infinity_or_a_surrogate_is_named(app_url, api_name, body, needle):
    import json

    events = raw_call(app_url, api_name, body)
    said = [json.loads(line[6:]) for line in events.splitlines() if line.startswith("data: ") and line[6:] != "null"]
    text = json.dumps(said, ensure_ascii=False)
    assert "event: error" in events or '"error"' in text, events[-500:]
    assert '{"error": null}' not in text, f"{api_name} answered a bare error for {body}"
    assert needle.lower() in text.replace("&#x27;", "'").lower(), f"{api_name}: {text[-500:]}"
