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


def test_a_vietnamese_page_is_told_when_the_model_reads_vietnamese_as_bytes_and_gemma_reads_it_as_words(gemma,
                                                                                                       embedded):
    from playground.language_fit import fit, fit_markdown

    smol = fit(embedded, "vi")
    assert smol.splits and smol.words == 5 and smol.tokens == len(embedded.encode("Thủ đô của Pháp là"))
    assert smol.byte_pieces >= 5 and smol.tokens >= 3 * smol.words  # 15 pieces for 5 words
    assert not fit(gemma, "vi").splits and fit(gemma, "vi").tokens <= 7
    assert fit(embedded, "en") is None and fit_markdown(gemma, "vi", can_switch=True) == ""
    note = fit_markdown(embedded, "vi", can_switch=True)
    assert f"thành {smol.tokens} token" in note and "Gemma 3 270M" in note and "--model gemma3-270m" in note


def test_every_filled_claim_of_the_captions_holds_on_gemma(gemma):
    from .caption_claims import check_every_scene

    assert check_every_scene(gemma) >= 20
