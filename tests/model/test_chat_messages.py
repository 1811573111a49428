"""A chat prompt that is a conversation (system, earlier turns): the service puts the model's chat template around
the messages (ModelService._encode), on the tiny random Llama with a small template; one user message as text runs
exactly as before."""

from __future__ import annotations

import pytest

from model_service import ModelService, SamplingSettings
from model_service.records import validation

from ..conftest import byte_chat_tokenizer, tiny_llama

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "developer", "content": "In French."},
        {"role": "user", "content": "A colour?"}]


@pytest.fixture(scope="module")
def chat_service():
    return ModelService(tiny_llama(), byte_chat_tokenizer())


def test_a_conversation_is_read_through_the_chat_template(chat_service):
    ids = chat_service.encode(CHAT, chat=True)
    text = "<system>Be brief.\n<user>Hi\n<assistant>Hello!\n<system>In French.\n<user>A colour?\n<assistant>"
    assert ids == chat_service.tokenizer(text, add_special_tokens=False)["input_ids"]  # developer is system
    assert chat_service.encode("Hi", chat=True) == chat_service.encode([{"role": "user", "content": "Hi"}], chat=True)


def test_a_seeded_conversation_replays_and_differs_from_its_last_message_alone(chat_service):
    settings = SamplingSettings(temperature=1.0, seed=5)
    first = [r.token_id for r in chat_service.generate(CHAT, settings, 8, chat=True, ignore_eos=True)]
    again = [r.token_id for r in chat_service.generate(tuple(map(dict, CHAT)), settings, 8, chat=True, ignore_eos=True)]
    assert first == again and len(first) == 8
    batch = list(chat_service.generate_batch([{"prompt": CHAT, "settings": settings.to_dict(), "max_new_tokens": 8,
                                               "chat": True}]))
    assert [s.rows[0].token_id for s in batch if s.rows[0]] == first[: len(batch)]
    scored = chat_service.prompt_logprobs(CHAT, chat=True, top_n=1)
    assert [p.token.id for p in scored.positions] == chat_service.encode(CHAT, chat=True) and scored.chat


def test_a_template_that_refuses_a_system_message_says_so_naming_messages():
    strict = ModelService(tiny_llama(), byte_chat_tokenizer(system=False))
    with pytest.raises(validation.InputError) as e:
        strict.encode(CHAT, chat=True)
    assert e.value.key == "chat_refused" and e.value.values["field"] == "messages"
    assert "System role not supported" in str(e.value)
    assert strict.encode(CHAT[1:], chat=True)  # without it the same template takes the conversation


def test_a_conversation_needs_the_chat_template_and_bad_messages_are_named(chat_service):
    with pytest.raises(validation.InputError, match="prompt must be text, or a non-empty list of token ids"):
        chat_service.encode(CHAT)  # chat off: a raw completion takes text, or token ids
    with pytest.raises(validation.InputError, match=r"messages\[1\]\.role: tool messages"):
        list(chat_service.generate([CHAT[1], {"role": "tool", "content": "42"}, CHAT[1]], chat=True))
    with pytest.raises(validation.InputError, match="must end with a user message"):
        chat_service.encode(CHAT[:3], chat=True)


def test_a_tokenised_prompt_runs_as_its_text_does_and_bad_ids_are_named(chat_service):
    # what the OpenAI route sends after tokenising once: the template's ids, chat off
    settings = SamplingSettings(temperature=1.0, seed=5)
    ids = chat_service.encode(CHAT, chat=True)
    by_text = [r.token_id for r in chat_service.generate(CHAT, settings, 6, chat=True, ignore_eos=True)]
    by_ids = [r.token_id for r in chat_service.generate(ids, settings, 6, ignore_eos=True)]
    assert by_ids == by_text
    batch = list(chat_service.generate_batch([{"prompt": ids, "settings": settings.to_dict(), "max_new_tokens": 6}]))
    assert [s.rows[0].token_id for s in batch if s.rows[0]] == by_text[: len(batch)]
    for bad, says in (([], "prompt must be text, or a non-empty list of token ids"),
                      ([1, "2"], "prompt must be text, or a non-empty list of token ids"),
                      ([1, True], "prompt must be text, or a non-empty list of token ids"),
                      ([1, 10 ** 6], "prompt must be a whole number between 0 and 257")):
        with pytest.raises(validation.InputError, match=says):
            list(chat_service.generate(bad, settings, 2))
