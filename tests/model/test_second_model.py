"""The second offline model, Gemma 3 270M: a BOS token and a 262k vocabulary (the lesson's contrast)."""

from __future__ import annotations

import pytest

from model_service import ModelService, SamplingSettings


@pytest.fixture(scope="module")
def gemma():
    return ModelService.load("gemma3-270m")


def test_gemma_adds_a_bos_and_has_a_large_vocabulary(gemma):
    ids = gemma.encode("The capital of France is")
    assert len(ids) == 6 and ids[0] == gemma.tokenizer.bos_token_id and gemma.info.adds_bos
    assert gemma.info.vocab_size == 262144


def test_gemma_streams_records(gemma):
    records = list(gemma.generate("The capital of France is", SamplingSettings(temperature=0), max_new_tokens=3))
    assert len(records) == 3 and records[0].piece.strip() and records[0].stage("raw").chosen_prob > 0.1
    assert len(records[0].candidates) == 20


def test_gemma_traces_the_lesson_prompt_with_its_bos(gemma):
    s = gemma.trace("The capital of France is").shapes
    assert (s.input_ids, s.num_hidden_states, s.hidden_state, s.logits) == ((1, 6), 19, (1, 6, 640), (1, 6, 262144))
