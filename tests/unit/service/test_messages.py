"""A chat's messages: the one validator (model_service/records/validation.py:messages), and the (role, content) pairs
it returns crossing every path a prompt takes (a frozen call, a batch row, JSON to a remote service, a pickle to a
ZeroGPU worker) unchanged."""

from __future__ import annotations

import json
import pickle

import pytest

from model_service.client import GenerateCall, prompt_of
from model_service.records import validation
from model_service.records.settings import Request, request_from

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Name a colour."}]
PAIRS = (("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello!"), ("user", "Name a colour."))


def refused(value) -> validation.InputError:
    with pytest.raises(validation.InputError) as e:
        validation.messages("messages", value)
    return e.value


def test_a_conversation_becomes_role_and_content_pairs():
    assert validation.messages("messages", CHAT) == PAIRS
    assert validation.messages("messages", PAIRS) == PAIRS  # its own output, read again
    assert validation.messages("messages", [list(p) for p in PAIRS]) == PAIRS  # ... after a trip through JSON
    developer = [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hi"}]
    assert validation.messages("messages", developer)[0] == ("system", "Answer in French.")
    parts = [{"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]}]
    assert validation.messages("messages", parts) == (("user", "a b"),)
    assert validation.messages("messages", [{"role": "system", "content": ""}, CHAT[1]])[0] == ("system", "")


@pytest.mark.parametrize("value, key, field", [
    ([], "messages", "messages"),
    ("Hi", "messages", "messages"),
    (None, "messages", "messages"),
    (["Hi"], "message", "messages[0]"),
    ([CHAT[1], {"role": "tool", "content": "42"}, CHAT[1]], "message_tool", "messages[1].role"),
    ([{"role": "robot", "content": "x"}], "choice", "messages[0].role"),
    ([{"content": "x"}], "choice", "messages[0].role"),
    ([{"role": "user", "content": "x", "name": "bob"}], "message_field", "messages[0].name"),
    ([{"role": "user", "content": None}], "text", "messages[0].content"),
    ([{"role": "user", "content": " "}], "empty", "messages[0].content"),
    ([{"role": "user", "content": "\ud800"}], "surrogate", "messages[0].content"),
    ([{"role": "user", "content": [{"type": "image_url"}]}], "message_part", "messages[0].content"),
    (CHAT[:3], "messages_last", "messages"),
])
def test_a_bad_message_is_named_by_its_place_and_field(value, key, field):
    error = refused(value)
    assert error.key == key and error.values["field"] == field and str(error).startswith(field)


def test_the_end_must_be_a_user_message_and_the_error_says_what_came_last():
    assert str(refused(CHAT[:3])) == ("messages must end with a user message, which the model answers; the last one "
                                      "here is assistant")


def test_the_pairs_survive_a_frozen_call_a_batch_row_json_and_a_pickle():
    call = GenerateCall(prompt_of(CHAT, True), chat=True)
    assert call.prompt == PAIRS and hash(call) == hash(GenerateCall(prompt_of(PAIRS, True), chat=True))
    assert pickle.loads(pickle.dumps(call)) == call
    assert prompt_of("plain text", True) == "plain text" and prompt_of(CHAT, False) is CHAT  # checked where encoded
    row = json.loads(json.dumps(Request(PAIRS, chat=True).to_dict()))  # what a remote batch sends
    assert request_from(row) == Request(PAIRS, chat=True)
    assert request_from({"prompt": CHAT, "chat": True}).prompt == PAIRS
    with pytest.raises(validation.InputError, match="prompt must be text"):  # messages need the chat template
        request_from({"prompt": CHAT})
    assert request_from({"prompt": [5, 6, 7]}).prompt == (5, 6, 7)  # without it, a list is a tokenised prompt
