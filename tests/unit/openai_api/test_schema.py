"""A request body -> the service's settings (playground/openai_api/schema.py), and the service's errors -> OpenAI's
error shape (errors.py): the service's validators do the checking, and the API names the parameter."""

from __future__ import annotations

import json

import pytest

from model_service.records import validation
from playground import limits
from playground.openai_api import errors, schema

HI = [{"role": "user", "content": "hi"}]


def refused(body, kind="chat") -> errors.ApiError:
    with pytest.raises(Exception) as e:
        schema.parse(body, kind)
    return errors.from_exception(e.value, "messages" if kind == "chat" else "prompt")


def test_a_chat_is_its_one_user_message_through_the_chat_template():
    plan = schema.parse({"model": "smollm2", "messages": HI}, "chat")
    assert plan.prompt == "hi" and plan.chat and plan.n == 1
    assert plan.max_tokens == limits.API_CHAT_MAX_TOKENS and plan.logprobs is None and plan.logprobs_mode == "raw"
    parts = [{"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]}]
    assert schema.parse({"messages": parts}, "chat").prompt == "a b"


def test_openai_and_playground_knobs_become_the_services_settings():
    body = {"prompt": "x", "temperature": 0.7, "top_p": 0.9, "top_k": -1, "min_p": 0.05, "order": "vllm", "seed": 3,
            "max_tokens": 5, "stop": "\n"}
    plan = schema.parse(body, "completion")
    s = plan.settings[0]
    assert (s.temperature, s.top_p, s.top_k, s.min_p, s.order, s.seed) == (0.7, 0.9, 0, 0.05, "vllm", 3)
    assert plan.stop == ("\n",) and plan.max_tokens == 5 and not plan.chat
    assert schema.parse({"prompt": "x"}, "completion").max_tokens == limits.API_COMPLETION_MAX_TOKENS
    nulls = schema.parse({"prompt": "x", "temperature": None, "top_p": None, "n": None, "stop": None}, "completion")
    assert nulls.settings[0].temperature == 1.0 and nulls.n == 1 and nulls.stop == ()


def test_top_h_comes_as_an_extra_field_and_an_order_without_it_is_a_400_naming_it():
    assert schema.parse({"prompt": "x", "top_h": 0.4}, "completion").settings[0].top_h == 0.4
    error = refused({"prompt": "x", "top_h": 0.4, "order": "llama.cpp"}, "completion")
    assert error.status == 400 and error.param == "top_h" and "only transformers has top-H" in error.message


def test_openais_bias_and_penalties_reach_the_sampler():
    body = {"messages": HI, "order": "vllm", "logit_bias": {"13": -100, "42": 5}, "frequency_penalty": 0.5,
            "presence_penalty": -0.25, "repetition_penalty": 1.2, "penalty_last_n": None}
    s = schema.parse(body, "chat").settings[0]
    assert s.logit_bias == ((13, -100.0), (42, 5.0)) and (s.frequency_penalty, s.presence_penalty) == (0.5, -0.25)
    assert s.repetition_penalty == 1.2 and s.penalty_last_n == 64
    zeros = schema.parse({"messages": HI, "presence_penalty": 0, "frequency_penalty": 0, "logit_bias": {}}, "chat")
    assert zeros.settings[0].order == "hf" and not zeros.settings[0].penalised


def test_the_bans_come_as_extra_fields_and_an_order_without_one_is_a_400_naming_it():
    s = schema.parse({"messages": HI, "order": "vllm", "min_tokens": 16}, "chat").settings[0]
    assert s.min_tokens == 16 and s.no_repeat_ngram_size == 0
    assert schema.parse({"prompt": "x", "no_repeat_ngram_size": 3}, "completion").settings[0].no_repeat_ngram_size == 3
    error = refused({"messages": HI, "order": "llama.cpp", "min_tokens": 4})
    assert error.status == 400 and error.param == "min_tokens" and "llama.cpp has no min_tokens" in error.message


def test_n_choices_get_consecutive_seeds_or_fresh_ones():
    assert [s.seed for s in schema.parse({"messages": HI, "n": 3, "seed": 7}, "chat").settings] == [7, 8, 9]
    fresh = schema.parse({"messages": HI, "n": 2}, "chat").settings
    assert all(isinstance(s.seed, int) for s in fresh) and fresh[0].seed != fresh[1].seed
    assert schema.parse({"messages": HI, "seed": limits.MAX_SEED, "n": 2}, "chat").settings[1].seed == 0


@pytest.mark.parametrize("body, param", [
    ({"messages": HI, "temperature": 5}, "temperature"),
    ({"messages": HI, "temperature": "hot"}, "temperature"),
    ({"messages": HI, "top_p": 0}, "top_p"),
    ({"messages": HI, "top_k": 2.5}, "top_k"),
    ({"messages": HI, "seed": -1}, "seed"),
    ({"messages": HI, "order": "random"}, "order"),
    ({"messages": HI, "n": 5}, "n"),
    ({"messages": HI, "max_tokens": 0}, "max_tokens"),
    ({"messages": HI, "max_completion_tokens": limits.MAX_NEW_TOKENS + 1}, "max_completion_tokens"),
    ({"messages": HI, "stop": ["a"] * (limits.MAX_STOP_STRINGS + 1)}, "stop"),
    ({"messages": HI, "logprobs": True, "top_logprobs": limits.API_MAX_TOP_LOGPROBS + 1}, "top_logprobs"),
    ({"messages": HI, "top_logprobs": 2}, "top_logprobs"),
    ({"messages": HI, "logprobs_mode": "processed"}, "logprobs_mode"),
    ({"messages": HI, "presence_penalty": 0.5}, "presence_penalty"),  # the default order, hf, has none
    ({"messages": HI, "order": "vllm", "frequency_penalty": 3}, "frequency_penalty"),
    ({"messages": HI, "logit_bias": {"13": 200}}, "logit_bias"),
    ({"messages": HI, "tools": [{"type": "function"}]}, "tools"),
    ({"messages": HI, "top-k": 3}, "top-k"),
    ({"messages": HI, "stream_options": {"include_usage": True}}, "stream_options"),
    ({"messages": [*HI, {"role": "assistant", "content": "hello"}]}, "messages"),  # nothing left to answer
    ({"messages": [{"role": "tool", "content": "42"}, *HI]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, "messages[0].name"),
    ({"messages": [{"role": "assistant", "content": "x", "tool_calls": []}, *HI]}, "messages[0].tool_calls"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content"),
    ({"messages": ["hi"]}, "messages[0]"),
    ({"messages": "hi"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": " "}]}, "messages[0].content"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": HI, "model": 3}, "model"),
])
def test_a_bad_chat_field_is_a_400_naming_it(body, param):
    error = refused(body)
    assert error.status == 400 and error.param == param and error.type == "invalid_request_error"
    assert param.split("[")[0].split(".")[0] in error.message or param == "messages[0].content"


@pytest.mark.parametrize("body, param", [
    ({"prompt": ""}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"),
    ({"prompt": 3}, "prompt"),
    ({"prompt": "x", "logprobs": 21}, "logprobs"),
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),  # 0 only with echo
    ({"prompt": "x", "max_tokens": -1, "echo": True}, "max_tokens"),
    ({"prompt": "x", "suffix": "y"}, "suffix"),
    ({"prompt": "x", "messages": HI}, "messages"),
])
def test_a_bad_completion_field_is_a_400_naming_it(body, param):
    error = refused(body, "completion")
    assert error.status == 400 and error.param == param


def test_a_conversation_is_its_role_and_content_pairs_and_the_lab_gets_its_last_user_message():
    body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]},
                         {"role": "developer", "content": ""}, {"role": "user", "content": "Name a colour."}],
            "n": 2, "seed": 1}
    plan = schema.parse(body, "chat")
    assert plan.prompt == (("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello!"), ("system", ""),
                           ("user", "Name a colour.")), "developer is read as system; text parts are joined"
    assert plan.conversation and plan.lab_prompt == "Name a colour." and plan.chat
    hash(plan)  # frozen all the way down: a Plan, its Requests, the service's calls stay hashable
    # each choice runs the token ids the route tokenised once (the template's, so chat is off in the request)
    assert {(r.prompt, r.chat) for r in plan.requests([1, 2, 3])} == {((1, 2, 3), False)}
    # what the remote and ZeroGPU paths carry: the pairs as JSON, read back by the same validator
    assert validation.messages("messages", json.loads(json.dumps(plan.prompt))) == plan.prompt
    one = schema.parse({"messages": HI}, "chat")
    assert one.prompt == "hi" and not one.conversation and one.lab_prompt == "hi"  # as the lab's chat toggle runs it


def test_echo_with_logprobs_and_max_tokens_0_scores_the_prompt():
    plan = schema.parse({"prompt": "x", "echo": True, "logprobs": 3, "max_tokens": 0}, "completion")
    assert (plan.echo, plan.logprobs, plan.max_tokens) == (True, 3, 0)
    error = refused({"prompt": "x", "max_tokens": 0}, "completion")
    assert error.param == "max_tokens" and "echo" in error.message
    chat = refused({"messages": HI, "max_tokens": 0})
    assert chat.param == "max_tokens" and "between 1 and" in chat.message


def test_a_template_that_refuses_a_conversation_is_a_400_naming_messages():
    refusal = validation.InputError("chat_refused", field="messages", model="m", error="System role not supported")
    error = errors.from_exception(refusal, "messages")
    assert error.status == 400 and error.param == "messages" and "System role not supported" in error.message


def test_temperature_beyond_openais_range_names_temperature():
    error = refused({"messages": HI, "temperature": 5})
    assert "temperature" in error.message and "between 0 and 2" in error.message
    assert error.body() == {"error": {"message": error.message, "type": "invalid_request_error",
                                      "param": "temperature", "code": None}}


def test_the_services_errors_keep_their_words_and_get_a_status():
    full = errors.from_exception(validation.Unavailable("room_full", waiting="256", limit="256"))
    assert full.status == 429 and full.code == "room_full" and "room is full" in full.message
    loading = errors.from_exception(validation.Unavailable("loading", percent="40%", message="reading weights"))
    assert loading.status == 503 and "still loading" in loading.message
    long = errors.from_exception(validation.InputError("prompt_too_long", count="2,000", limit="1,024"), "messages")
    assert long.status == 400 and long.param == "messages"
    batch = errors.from_exception(ValueError("request 2: prompt (900 tokens) + max_new_tokens (200) exceeds ..."))
    assert batch.param == "prompt" and batch.message.startswith("prompt (900")
    named = errors.from_exception(validation.InputError("whole_between", field="max_new_tokens", low="1", high="512", got="0"))
    assert named.param == "max_tokens"
    stopped = errors.from_exception(RuntimeError("the model's scheduler has stopped; restart the app"))
    assert stopped.status == 503 and "scheduler" in stopped.message
    try:
        raise KeyError("secret internals")
    except KeyError as e:
        hidden = errors.from_exception(e)
    assert hidden.status == 500 and "secret" not in hidden.message
