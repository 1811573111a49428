"""The step loop on the embedded SmolLM2-135M-Instruct (loaded once per test session)."""

from __future__ import annotations

import json

import pytest
import torch

from model_service import SamplingSettings
from model_service.engine.runner import Decoder

LESSON = "The capital of France is"
GREEDY = SamplingSettings(temperature=0)


def test_describes_the_embedded_model(embedded):
    info = embedded.info
    assert (info.name, info.vocab_size, info.hidden_size, info.num_layers) == ("SmolLM2-135M-Instruct", 49152, 576, 30)
    assert 130e6 < info.parameters < 140e6 and info.device == "cpu" and info.dtype == "float32"
    assert "49,152" in embedded.description


def test_lesson_prompt_is_five_tokens_without_a_bos(embedded):
    assert embedded.encode(LESSON) == [504, 3575, 282, 4649, 314]


def test_greedy_picks_paris_first(embedded):
    first = next(iter(embedded.generate(LESSON, GREEDY, max_new_tokens=1)))
    assert first.piece == " Paris" and first.chosen_rank == 0
    assert first.stage("raw").chosen_prob == pytest.approx(0.77, abs=0.02)
    assert first.stage("final").chosen_prob == 1.0 and first.draw.u is None


def test_temperature_moves_paris_as_the_lesson_says(embedded):
    p = lambda t: next(iter(embedded.generate(LESSON, SamplingSettings(temperature=t, seed=0), max_new_tokens=1))).stage("temperature").probs[0]
    assert p(0.5) > p(1.0) > p(1.5)


def test_kv_cache_logits_equal_full_forward(embedded):
    prompt = embedded.encode(LESSON)
    generated = [r.token_id for r in embedded.generate(LESSON, GREEDY, max_new_tokens=6)]
    decoder = Decoder(embedded.model)
    steps = [decoder.prefill([prompt])[0]]
    for t in generated[:-1]:
        steps.append(decoder.step([t])[0])
    with torch.no_grad():
        full = embedded.model(torch.tensor([prompt + generated])).logits[0]
    for i, logits in enumerate(steps):
        torch.testing.assert_close(logits, full[len(prompt) - 1 + i], atol=2e-4, rtol=1e-4)


def test_seeded_sampling_replays(embedded):
    s = SamplingSettings(temperature=0.9, top_p=0.95, seed=1234)
    run = lambda: [r.token_id for r in embedded.generate("Once upon a time", s, max_new_tokens=12)]
    assert run() == run()


def test_stop_string_split_across_two_tokens(embedded):
    # greedy continues " Paris.\n\nThe answer is:" -- "\n" and "\n" are separate tokens
    records = list(embedded.generate(LESSON, GREEDY, max_new_tokens=12, stop=["\n\n"]))
    assert records[-1].stop_reason == "stop_string" and records[-1].text == " Paris."
    assert all("\n" not in r.text for r in records)


def test_chat_template_ends_with_eos(embedded):
    records = list(embedded.generate("Say hello.", GREEDY, max_new_tokens=60, chat=True))
    assert records[-1].stop_reason == "eos"
    assert records[-1].piece == "<|im_end|>" and records[-1].special
    assert "<|im_end|>" not in records[-1].text and records[-1].text.strip()


def test_records_stay_under_8kb(embedded):
    s = SamplingSettings(temperature=1.2, top_k=100, top_p=0.98, min_p=0.01, seed=5)
    for r in embedded.generate("Write a story about a dragon.", s, max_new_tokens=64, chat=True, top_n=20):
        assert len(json.dumps(r.to_dict()).encode()) <= 8192


def test_every_order_runs_on_the_real_model(embedded):
    for order in ("hf", "vllm", "llama.cpp"):
        s = SamplingSettings(temperature=0.7, top_k=40, top_p=0.9, min_p=0.05, seed=2, order=order)
        r = next(iter(embedded.generate(LESSON, s, max_new_tokens=1)))
        assert [st.name for st in r.stages][1:-1] == {"hf": ["temperature", "top_k", "top_p", "min_p"], "vllm": ["temperature", "min_p", "top_k", "top_p"], "llama.cpp": ["top_k", "top_p", "min_p", "temperature"]}[order]
        assert r.stage("top_k").kept_count <= 40
