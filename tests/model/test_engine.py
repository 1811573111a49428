"""The batched engine: each request in a mixed batch gets exactly what it gets alone."""

from __future__ import annotations

import pytest

from model_service import BatchStep, Request, SamplingSettings

MIXED = [
    Request("The capital of France is", SamplingSettings(temperature=0), 12),
    Request("Once upon a time", SamplingSettings(temperature=0.8, top_p=0.95, seed=1), 12),
    Request("Write a haiku about the sea.", SamplingSettings(min_p=0.1, seed=2), 10, chat=True),
    Request("1, 2, 3,", SamplingSettings(temperature=1.5, seed=3), 8, stop=(" 7",)),
    Request("The best way to learn is", SamplingSettings(temperature=0.7, top_k=40, order="vllm", seed=4), 12),
    Request("def fib(n):", SamplingSettings(temperature=0.6, top_p=0.9, order="llama.cpp", seed=5), 6),
]


def per_request(steps):
    out = [[] for _ in steps[0].rows]
    for st in steps:
        for i, r in enumerate(st.rows):
            if r is not None:
                out[i].append(r)
    return out


def alone(service, q):
    return list(service.generate(q.prompt, q.settings, q.max_new_tokens, q.stop, q.chat))


@pytest.fixture(scope="module")
def mixed_run(embedded):
    return list(embedded.generate_batch(MIXED))


def test_mixed_batch_equals_each_request_alone(embedded, mixed_run):
    for q, batched in zip(MIXED, per_request(mixed_run)):
        single = alone(embedded, q)
        assert [r.token_id for r in batched] == [r.token_id for r in single], q.prompt
        assert batched[-1].text == single[-1].text and batched[-1].stop_reason == single[-1].stop_reason


def test_each_row_stops_on_its_own_and_leaves_the_batch(mixed_run):
    shapes = [st.logits_shape[0] for st in mixed_run]
    assert shapes[0] == len(MIXED) and shapes == sorted(shapes, reverse=True) and shapes[-1] < len(MIXED)
    for st in mixed_run:
        assert len(st.active) == st.logits_shape[0] == len(st.params["temperature"])
        assert [i for i, r in enumerate(st.rows) if r is not None] == list(st.active)
    rows = per_request(mixed_run)
    assert len(rows[5]) == 6 and rows[5][-1].stop_reason == "max_tokens"
    assert all(r[-1].stop_reason for r in rows)


def test_parameter_tensors_are_shown_as_the_sampler_receives_them(mixed_run):
    p = mixed_run[0].params
    assert p["greedy"] == [True, False, False, False, False, False]
    assert p["top_k"] == [0, 0, 0, 0, 40, 0]
    assert p["min_p"][2] == pytest.approx(0.1)


def test_a_seeded_row_is_unchanged_when_its_batch_mates_change(embedded, mixed_run):
    seeded = per_request(mixed_run)[1]
    others = [Request("Completely different " * 3, SamplingSettings(temperature=2.0, seed=9), 5), MIXED[1],
              Request("x", SamplingSettings(temperature=0), 3)]
    again = per_request(list(embedded.generate_batch(others)))[1]
    assert [r.token_id for r in again] == [r.token_id for r in seeded]


def test_batch_on_the_tiny_model_matches_alone(tiny_service):
    qs = [Request("ab", SamplingSettings(seed=s), 10 + s) for s in range(4)] + [Request("a much longer prompt", SamplingSettings(temperature=0), 7)]
    steps = list(tiny_service.generate_batch(qs))
    for q, batched in zip(qs, per_request(steps)):
        assert [r.token_id for r in batched] == [r.token_id for r in alone(tiny_service, q)]


def test_batch_step_round_trips_json(mixed_run):
    import json

    st = mixed_run[-1]
    assert BatchStep.from_dict(json.loads(json.dumps(st.to_dict()))) == st


@pytest.mark.parametrize(
    "requests,needle",
    [
        ([Request("ok"), Request("ok", SamplingSettings(), 0)], "request 2: max_new_tokens"),
        ([Request("")], "request 1: the prompt is empty"),
        ([{"prompt": "x", "settings": {"top_p": 3}}], "request 1: top_p"),
        ([Request("a"), Request("b"), "c"], "request 3: each request must be a Request or an object"),
        ([], "1 to"),
    ],
)
def test_invalid_rows_are_refused_naming_the_row_and_field(embedded, requests, needle):
    with pytest.raises(ValueError, match=needle):
        embedded.generate_batch(requests)
