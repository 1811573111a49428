"""Every record a generation yields crosses a process boundary intact: ZeroGPU pickles each value a
GPU function yields or returns (model_service/deploy/zero_gpu.py). Pickled and unpickled, a record is equal to
itself, holds no tensor, and stays small."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from model_service import ModelService, Request, SamplingSettings
from model_service.records.step import BatchStep, StepRecord, Waiting

from ..conftest import byte_tokenizer, tiny_llama


def no_tensors(value) -> bool:
    if dataclasses.is_dataclass(value):
        return all(no_tensors(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return all(no_tensors(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(no_tensors(v) for v in value)
    return type(value).__module__.split(".")[0] not in ("torch", "numpy")


def round_trip(record):
    again = pickle.loads(pickle.dumps(record))
    assert again == record and type(again) is type(record)
    assert no_tensors(record)
    return again


@pytest.fixture(scope="module")
def service():
    return ModelService(tiny_llama(), byte_tokenizer(), max_rows=1)


def test_step_records_and_waiting_records(service):
    first = service.generate("Hello", SamplingSettings(temperature=0.8, top_k=20, top_p=0.9, seed=1), max_new_tokens=40,
                             ignore_eos=True)
    next(first)  # holds the only row, so the next request waits
    second = service.generate("Hi", SamplingSettings(temperature=0, seed=2), max_new_tokens=3, stop=["zz"],
                              report_waiting=True)
    records = [next(second)]
    first.close()
    records += list(second)
    kinds = {type(r) for r in records}
    assert kinds == {Waiting, StepRecord}
    for record in records:
        round_trip(record)
    assert records[-1].stop_reason is not None and len(pickle.dumps(records[-1])) < 8192


def test_batch_steps(service):
    requests = [Request("a", SamplingSettings(temperature=0), max_new_tokens=2),
                Request("bb", SamplingSettings(temperature=1.2, min_p=0.1, order="vllm", seed=3), max_new_tokens=3)]
    steps = list(ModelService(tiny_llama(), byte_tokenizer()).generate_batch(requests))
    assert steps and all(isinstance(s, BatchStep) for s in steps)
    assert any(r is None for s in steps for r in s.rows)  # a finished row crosses as None
    for step in steps:
        round_trip(step)


def test_the_trace_and_its_attention(service):
    trace = round_trip(service.trace("The capital of France is", block=2, top_n=3))
    assert trace.attention is not None
    round_trip(service.trace_attention("The capital of France is", block=1))


def test_the_lm_head_view(service):
    round_trip(service.lm_head("Hello", continue_from=[72, 73], top_k=4))


def test_the_busy_room_lesson(service):
    round_trip(service.batch_effect("Hello", {"temperature": 1.0, "seed": 3}, continue_from=[72]))


def test_the_prompt_logprobs(service):
    record = round_trip(service.prompt_logprobs("Thủ đô", top_n=3))
    assert len(pickle.dumps(record)) < 20_000  # 10 positions (one per byte) of 3 alternatives


def test_what_the_page_reads_about_the_service(service):
    from model_service.records.step import LoadStatus

    round_trip(service.info)
    round_trip(service.room())
    round_trip(LoadStatus(0.5, "reading weights", False, None))
