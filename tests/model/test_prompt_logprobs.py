"""Prompt logprobs (model_service/forward_pass/prompt_logprobs.py, the client's prompt_logprobs): every prompt token's
log-probability given the tokens before it, checked against a direct log_softmax of the model's own logits, on the
tiny random Llama (a byte tokenizer: multi-byte characters span tokens) and on the embedded SmolLM2."""

from __future__ import annotations

import math

import pytest
import torch

from model_service import ModelService
from model_service.models.switching import LoadingService
from model_service.records import validation
from model_service.records.prompt import PromptLogprobs
from playground import limits
from playground.openai_api import logprobs as lp

from ..conftest import byte_tokenizer, tiny_llama

PROMPT = "Thủ đô của Pháp là"  # "ủ", "đ", "ô", "á", "à": two or three bytes, one token each


def direct(service, ids) -> torch.Tensor:
    """log_softmax of the model's logits, position j - 1 scoring the token at j: (T - 1, V)."""
    with torch.inference_mode():
        return torch.log_softmax(service.model(torch.tensor([ids])).logits[0, :-1].float(), dim=-1)


def spelled(record: PromptLogprobs) -> bytes:
    return b"".join(b"" if p.added else bytes(lp.token_bytes(p.token.piece, p.token.bytes_hex)) for p in record.positions)


def check_against_torch(service, prompt: str, top_n: int) -> PromptLogprobs:
    ids = service.encode(prompt)
    record = service.prompt_logprobs(prompt, top_n=top_n)
    expected = direct(service, ids)
    assert [p.token.id for p in record.positions] == ids and [p.position for p in record.positions] == list(range(len(ids)))
    first = record.positions[0]
    assert (first.logprob, first.rank, first.top, first.top_logprobs) == (None, None, (), ())
    for p in record.positions[1:]:
        row = expected[p.position - 1]
        assert p.logprob == pytest.approx(float(row[p.token.id]), abs=1e-6)  # the same float32, up to round-off
        assert p.rank == int((row > row[p.token.id]).sum())
        top = row.topk(top_n)
        assert [c.id for c in p.top] == top.indices.tolist()
        assert p.top_logprobs == pytest.approx(top.values.tolist(), abs=1e-6)
        assert all(c.prob == pytest.approx(math.exp(v), rel=1e-5) for c, v in zip(p.top, p.top_logprobs))
        if p.rank < top_n:
            assert p.top[p.rank].id == p.token.id
    return record


def test_each_prompt_token_is_scored_given_the_ones_before_it(tiny_service):
    record = check_against_torch(tiny_service, PROMPT, 5)
    assert spelled(record) == PROMPT.encode()  # the tokens put together are the prompt, byte for byte
    assert PromptLogprobs.from_dict(record.to_dict()) == record  # JSON and back: what a remote service sends
    assert record.top_n == 5 and not record.chat and record.forward_ms >= 0


def test_the_api_shape_spells_the_prompt_and_counts_characters(tiny_service):
    record = tiny_service.prompt_logprobs(PROMPT, top_n=2)
    out = lp.prompt_logprobs(record, 2)
    assert len(out["tokens"]) == len(out["token_logprobs"]) == len(out["top_logprobs"]) == len(record.positions)
    assert out["token_logprobs"][0] is None and out["top_logprobs"][0] is None
    assert all(math.isfinite(v) for v in out["token_logprobs"][1:])
    data = spelled(record)
    for p, offset in zip(record.positions, out["text_offset"]):
        before = data[: sum(len(bytes(lp.token_bytes(q.token.piece, q.token.bytes_hex))) for q in record.positions[: p.position])]
        assert offset == len(before.decode("utf-8", "ignore"))  # characters whole before this token


def test_a_bos_the_tokenizer_adds_is_read_but_writes_none_of_the_prompt():
    from tokenizers import processors

    tok = byte_tokenizer()
    tok._tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    service = ModelService(tiny_llama(), tok)
    record = check_against_torch(service, "Hi there", 3)
    assert record.positions[0].token.id == 1 and record.positions[0].added
    assert not any(p.added for p in record.positions[1:]) and record.positions[1].logprob is not None
    assert spelled(record) == b"Hi there"
    assert lp.prompt_logprobs(record, 1)["tokens"][:2] == ["", "H"]


def test_a_one_token_prompt_has_nothing_to_score_and_bad_input_is_named(tiny_service):
    one = tiny_service.prompt_logprobs("x", top_n=0)
    assert len(one.positions) == 1 and one.positions[0].logprob is None and one.forward_ms == 0
    assert tiny_service.prompt_logprobs("xy", top_n=0).positions[1].top == ()
    with pytest.raises(validation.InputError, match="top_n must be a whole number between 0 and 20"):
        tiny_service.prompt_logprobs("x", top_n=limits.MAX_PROMPT_TOP_N + 1)
    with pytest.raises(validation.InputError, match="prompt is empty"):
        tiny_service.prompt_logprobs("")
    with pytest.raises(validation.InputError, match="prompt is 1,025 tokens"):
        tiny_service.prompt_logprobs("a" * (limits.MAX_PROMPT_TOKENS + 1))


def test_a_loading_service_forwards_it(tiny_service):
    same = LoadingService(service=tiny_service).prompt_logprobs("Hello", top_n=2)
    assert same.positions == tiny_service.prompt_logprobs("Hello", top_n=2).positions


def test_the_embedded_model_scores_the_lesson_prompt_as_its_logits_say(embedded):
    record = check_against_torch(embedded, limits.LESSON_PROMPT, 3)
    assert "".join(p.token.piece for p in record.positions) == limits.LESSON_PROMPT  # SmolLM2 adds no BOS
    assert record.positions[-1].token.piece == " is" and record.positions[-1].rank < 3  # "... France" -> " is"
