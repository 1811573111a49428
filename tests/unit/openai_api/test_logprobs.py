"""Logprobs read from a step record's stages (playground/openai_api/logprobs.py), and the answers built record by
record (responses.py): deltas, finish reasons, usage, OpenAI's two shapes of logprobs."""

from __future__ import annotations

import math

import pytest

from model_service.records.prompt import PromptLogprobs, PromptPosition
from model_service.records.step import DrawInfo, Stage, StepRecord, Token
from model_service.records.trace import Candidate
from playground.openai_api import logprobs as lp
from playground.openai_api import schema
from playground.openai_api.responses import Answer

CANDIDATES = (Token(5, " Paris"), Token(6, " the"), Token(7, "\\xe1", bytes_hex="e1"))


def record(step=0, text=" Paris", token=CANDIDATES[0], stop=None, special=False, raw=(0.7, 0.2, 0.1),
           final=(0.8, 0.2, 0.0)) -> StepRecord:
    stages = (Stage("raw", raw, 3, 1.0, 1.0, raw[0]), Stage("final", final, 2, 0.9, 0.7, final[0]))
    return StepRecord(step=step, token_id=token.id, piece=token.piece, special=special, text=text,
                      candidates=CANDIDATES, stages=stages, chosen_rank=0, draw=DrawInfo(None, 0, 0, 1), seed=1,
                      forward_ms=1, sampling_ms=1, stop_reason=stop)


def test_raw_is_the_models_distribution_and_final_the_drawn_one():
    r = record()
    assert lp.chosen(r, "raw") == pytest.approx(math.log(0.7))
    assert lp.chosen(r, "final") == pytest.approx(math.log(0.8))
    assert [t[0] for t in lp.top(r, "raw", 3)] == [" Paris", " the", "\\xe1"]
    assert [t[2] for t in lp.top(r, "final", 3)][-1] == lp.FLOOR  # removed by the pipeline: -inf, written as vLLM does
    assert lp.top(r, "raw", 0) == []


def test_a_token_that_holds_part_of_a_character_gives_its_bytes():
    entry = lp.chat_entry(record(), "raw", 3)
    assert entry["bytes"] == list(b" Paris")
    assert entry["top_logprobs"][2] == {"token": "\\xe1", "logprob": pytest.approx(math.log(0.1)), "bytes": [0xE1]}


def test_the_end_of_text_token_is_counted_as_generated_but_is_no_part_of_the_logprobs():
    eos = record(1, " Paris", Token(2, "<|im_end|>", special=True), stop="eos", special=True)
    plan = schema.parse({"messages": [{"role": "user", "content": "q"}], "logprobs": True, "top_logprobs": 2}, "chat")
    answer = Answer(plan, "m", 4, {"lab_link": "x"})
    assert answer.step(0, record())[0]["choices"][0]["delta"] == {"content": " Paris"}
    last = answer.step(0, eos)
    assert last[0]["choices"][0]["finish_reason"] == "stop" and last[0]["choices"][0]["delta"] == {}
    whole = answer.response()
    assert [t["token"] for t in whole["choices"][0]["logprobs"]["content"]] == [" Paris"]
    assert whole["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    assert whole["choices"][0]["message"]["content"] == " Paris" and whole["playground"] == {"lab_link": "x"}


def test_a_completion_streams_what_the_safe_text_gained_and_ends_on_length():
    plan = schema.parse({"prompt": "The capital of France is", "logprobs": 1, "max_tokens": 2, "echo": False},
                        "completion")
    answer = Answer(plan, "m", 5, {})
    first = answer.step(0, record(0, " Paris"))
    second = answer.step(0, record(1, " Paris.", Token(8, "."), stop="max_tokens"))
    assert first[0]["choices"][0]["text"] == " Paris" and second[0]["choices"][0]["text"] == "."
    assert second[0]["choices"][0]["finish_reason"] == "length"
    assert second[0]["choices"][0]["logprobs"]["text_offset"] == [6]
    whole = answer.response()["choices"][0]
    assert whole["text"] == " Paris." and whole["logprobs"]["text_offset"] == [0, 6]
    assert whole["logprobs"]["top_logprobs"] == [{" Paris": pytest.approx(math.log(0.7))}] * 2


def test_a_held_back_step_adds_no_text_but_keeps_its_token():
    plan = schema.parse({"prompt": "x"}, "completion")
    answer = Answer(plan, "m", 1, {})
    assert answer.step(0, record(0, "")) == []  # nothing safe to show yet, no logprobs asked
    assert answer.step(0, record(1, "ab", stop="stop_string"))[0]["choices"][0]["text"] == "ab"
    assert answer.usage()["completion_tokens"] == 2


# ---- echo with logprobs: the prompt's own logprobs first (the service's prompt_logprobs record) ---------------------

def prompt_record(added: bool = False) -> PromptLogprobs:
    """'Thủ' as a byte-level tokenizer cuts it, "ủ" (e1 bb a7) in two tokens; with `added`, a BOS in front."""
    tokens = [Token(9, "Th"), Token(10, "\\xe1\\xbb", bytes_hex="e1bb"), Token(11, "\\xa7", bytes_hex="a7")]
    if added:
        tokens.insert(0, Token(1, "<bos>", special=True))
    top = (Candidate(12, " the", 0.5), Candidate(13, "\\xe1\\xbb", 0.25, bytes_hex="e1bb"), Candidate(14, "x", 0.125))
    positions = [PromptPosition(0, tokens[0], None, None, (), (), added)]
    positions += [PromptPosition(j, t, -1.5 * j, j, top, (math.log(0.5), math.log(0.25), math.log(0.125)))
                  for j, t in enumerate(tokens[1:], start=1)]
    return PromptLogprobs("m", False, 3, tuple(positions), 1.0)


def test_an_echoed_prompt_starts_with_a_null_then_each_tokens_logprob_given_the_ones_before():
    out = lp.prompt_logprobs(prompt_record(), 2)
    assert out["tokens"] == ["Th", "\\xe1\\xbb", "\\xa7"]
    assert out["token_logprobs"] == [None, -1.5, -3.0]
    assert out["top_logprobs"][0] is None  # OpenAI's shape: nothing before the first token
    assert out["top_logprobs"][1] == {" the": pytest.approx(math.log(0.5)), "\\xe1\\xbb": pytest.approx(math.log(0.25))}
    assert out["text_offset"] == [0, 2, 2]  # characters written before each token: "ủ" is whole after its last byte
    assert lp.prompt_logprobs(prompt_record(), 0)["top_logprobs"] is None


def test_a_bos_the_tokenizer_added_is_listed_with_no_text_so_the_tokens_spell_the_prompt():
    record = prompt_record(added=True)
    out = lp.prompt_logprobs(record, 1)
    assert out["tokens"][0] == "" and out["token_logprobs"][:2] == [None, -1.5] and out["text_offset"] == [0, 0, 2, 2]
    spelled = b"".join(b"" if p.added else bytes(lp.token_bytes(p.token.piece, p.token.bytes_hex))
                       for p in record.positions)
    assert spelled.decode() == "Thủ"


def test_echo_with_logprobs_puts_the_prompts_lists_before_the_generated_ones():
    plan = schema.parse({"prompt": "Thủ", "echo": True, "logprobs": 2, "max_tokens": 1}, "completion")
    answer = Answer(plan, "m", 3, {}, prompt_record())
    opening = answer.opening()[0]["choices"][0]
    assert opening["text"] == "Thủ" and opening["logprobs"]["token_logprobs"] == [None, -1.5, -3.0]
    assert opening["finish_reason"] is None
    chunk = answer.step(0, record(0, " Paris", stop="max_tokens"))[0]["choices"][0]
    assert chunk["text"] == " Paris" and chunk["logprobs"]["text_offset"] == [3]  # after the echoed prompt
    whole = answer.response()["choices"][0]
    assert whole["text"] == "Thủ Paris"
    logprobs = whole["logprobs"]
    assert logprobs["tokens"] == ["Th", "\\xe1\\xbb", "\\xa7", " Paris"]
    assert logprobs["token_logprobs"][:3] == [None, -1.5, -3.0] and logprobs["token_logprobs"][3] < 0
    assert logprobs["text_offset"] == [0, 2, 2, 3]
    assert len({len(v) for v in logprobs.values()}) == 1  # four parallel lists of one length
    assert logprobs["top_logprobs"][0] is None and len(logprobs["top_logprobs"][3]) == 2


def test_echo_with_max_tokens_0_is_the_prompt_alone():
    plan = schema.parse({"prompt": "Thủ", "echo": True, "logprobs": 1, "max_tokens": 0}, "completion")
    answer = Answer(plan, "m", 3, {}, prompt_record())
    assert answer.opening()[0]["choices"][0]["finish_reason"] == "length"
    whole = answer.response()
    assert whole["choices"][0]["text"] == "Thủ" and whole["choices"][0]["finish_reason"] == "length"
    assert whole["choices"][0]["logprobs"]["tokens"] == ["Th", "\\xe1\\xbb", "\\xa7"]
    assert whole["usage"] == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}
