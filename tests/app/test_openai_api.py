"""The OpenAI-compatible API (playground/openai_api) with the real `openai` client, against the app launched as app.py
launches it (launch_kwargs), on the embedded model: models, completions and chat, streamed and not, logprobs, seeds,
errors in OpenAI's shape, the room's row freed when a client leaves, and the key a room asks for."""

from __future__ import annotations

import httpx
import pytest

from playground import limits
from tests.waiting import wait_until

from ..conftest import close_demo, free_port

openai = pytest.importorskip("openai")  # a dev dependency (requirements-dev.txt)

PROMPT = limits.LESSON_PROMPT  # "The capital of France is"
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
HI = [{"role": "user", "content": "Write one short sentence about cats."}]


@pytest.fixture(scope="module")
def api_url(embedded):
    """The page and the API on one port, launched as app.py launches them (open: it listens on 127.0.0.1)."""
    from model_service.models.switching import LoadingService
    from playground.openai_api import Access, launch_kwargs
    from playground.page import build_demo, launch_options, queue_options

    service = LoadingService(service=embedded)
    demo = build_demo(service)
    demo.queue(**queue_options())
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, ssr_mode=False,
                show_error=True, **launch_options(), **launch_kwargs(service, Access("open")))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        close_demo(demo)


@pytest.fixture()
def oa(api_url):
    return openai.OpenAI(base_url=f"{api_url}/v1", api_key="not-needed-here", max_retries=0)


def wait_for_empty_room(service) -> None:
    wait_until(lambda: not service.room().rows and not service.room().waiting, f"an empty room ({service.room()})",
               interval=0.1)


def test_models_lists_the_served_model(oa, embedded):
    models = oa.models.list().data
    assert [m.id for m in models] == [SMOLLM2]
    assert models[0].model_extra["playground"]["ready"] is True
    assert oa.models.retrieve("smollm2").id == SMOLLM2  # the catalog key and the model's name work too
    with pytest.raises(openai.NotFoundError):
        oa.models.retrieve("gpt-4o")


def test_a_greedy_completion_of_the_lesson_prompt_is_paris_with_its_top_5(oa, embedded, api_url):
    done = oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=1, temperature=0, logprobs=5)
    choice = done.choices[0]
    assert choice.text == " Paris" and choice.finish_reason == "length"
    top = choice.logprobs.top_logprobs[0]
    assert len(top) == 5
    best = max(top, key=top.get)
    assert best == choice.logprobs.tokens[0] == " Paris"
    assert choice.logprobs.token_logprobs[0] == pytest.approx(top[best])
    assert -1.0 < choice.logprobs.token_logprobs[0] < 0  # the raw distribution's ~0.77, not the greedy one-hot 1
    assert done.usage.prompt_tokens == len(embedded.encode(PROMPT)) and done.usage.completion_tokens == 1
    link = done.model_extra["playground"]["lab_link"]
    assert link.startswith(api_url + "/?") and "prompt=The+capital+of+France+is" in link and "max_new_tokens=1" in link


def test_a_request_is_tokenised_once_and_every_choice_runs_its_token_ids(oa, embedded, monkeypatch):
    tokenised = []  # the prompts the tokenizer read (token ids are not tokenised again)
    real = embedded._encode

    def counting(prompt, chat):
        if chat or isinstance(prompt, str):
            tokenised.append(prompt)
        return real(prompt, chat)

    monkeypatch.setattr(embedded, "_encode", counting)
    done = oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=2, temperature=0)
    assert tokenised == [PROMPT] and done.usage.prompt_tokens == len(real(PROMPT, False))
    tokenised.clear()
    done = oa.chat.completions.create(model=SMOLLM2, messages=HI, max_tokens=2, n=3, seed=1)
    assert len(tokenised) == 1 and len(done.choices) == 3 and done.usage.prompt_tokens == len(real(tokenised[0], True))
    tokenised.clear()
    oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=1, echo=True, logprobs=1)  # scored, then run
    assert tokenised == [PROMPT]


def test_final_logprobs_are_the_distribution_the_token_was_drawn_from(oa):
    greedy = oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=1, temperature=0, logprobs=3,
                                   extra_body={"logprobs_mode": "final"})
    assert greedy.choices[0].logprobs.token_logprobs == [0.0]  # greedy: all on the argmax
    assert list(greedy.choices[0].logprobs.top_logprobs[0].values())[1:] == [-9999.0, -9999.0]
    cut = oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=1, seed=3, logprobs=2,
                                extra_body={"logprobs_mode": "final", "top_k": 2, "order": "vllm"})
    assert sum(2.718281828 ** lp for lp in cut.choices[0].logprobs.top_logprobs[0].values()) == pytest.approx(1, abs=1e-4)


def test_chat_streamed_and_not_say_the_same(oa):
    whole = oa.chat.completions.create(model=SMOLLM2, messages=HI, max_tokens=12, temperature=0)
    text = whole.choices[0].message.content
    assert text and whole.choices[0].message.role == "assistant"
    assert whole.choices[0].finish_reason in ("stop", "length")
    chunks = list(oa.chat.completions.create(model=SMOLLM2, messages=HI, max_tokens=12, temperature=0, stream=True,
                                             stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_a_seeded_chat_completion_replays_exactly_streamed_or_not(oa):
    ask = dict(model=SMOLLM2, messages=HI, max_tokens=16, temperature=1, seed=7, logprobs=True, top_logprobs=3)
    first = oa.chat.completions.create(**ask)
    again = oa.chat.completions.create(**ask)
    streamed = list(oa.chat.completions.create(**ask, stream=True))
    text = first.choices[0].message.content
    assert again.choices[0].message.content == text
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text
    tokens = [t.token for t in first.choices[0].logprobs.content]
    assert [t.token for c in streamed if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content] == tokens
    assert all(len(t.top_logprobs) == 3 for t in first.choices[0].logprobs.content)
    assert first.model_extra["playground"]["seeds"] == [7]
    # n = 2: choice 0 is the request with n = 1, choice 1 has seed 8
    two = oa.chat.completions.create(**{**ask, "n": 2})
    assert two.choices[0].message.content == text and two.model_extra["playground"]["seeds"] == [7, 8]


def test_echo_with_logprobs_scores_the_prompt_then_the_answer(oa, embedded):
    done = oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=1, temperature=0, echo=True, logprobs=3)
    choice, n = done.choices[0], len(embedded.encode(PROMPT))
    logprobs = choice.logprobs
    assert choice.text == PROMPT + " Paris" and choice.text.startswith(PROMPT)
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == len(
        logprobs.text_offset) == n + 1 == done.usage.prompt_tokens + done.usage.completion_tokens
    assert "".join(logprobs.tokens[:n]) == PROMPT and logprobs.tokens[n] == " Paris"
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None  # OpenAI's shape
    assert all(-30 < v < 0 for v in logprobs.token_logprobs[1:])
    assert all(len(top) == 3 for top in logprobs.top_logprobs[1:])
    assert logprobs.text_offset == [PROMPT.index(t) if i else 0 for i, t in enumerate(logprobs.tokens[:n])] + [len(PROMPT)]
    scored = embedded.prompt_logprobs(PROMPT, top_n=3)  # the service's own record: the same numbers
    assert logprobs.token_logprobs[1:n] == pytest.approx([p.logprob for p in scored.positions[1:]], abs=1e-6)


def test_echo_with_max_tokens_0_is_the_prompts_logprobs_alone_streamed_or_not(oa, embedded):
    ask = dict(model=SMOLLM2, prompt=PROMPT, max_tokens=0, echo=True, logprobs=1)
    whole = oa.completions.create(**ask)
    choice = whole.choices[0]
    assert choice.text == PROMPT and choice.finish_reason == "length" and whole.usage.completion_tokens == 0
    assert len(choice.logprobs.tokens) == whole.usage.prompt_tokens == len(embedded.encode(PROMPT))
    chunks = [c for c in oa.completions.create(**ask, stream=True)]
    assert "".join(c.choices[0].text for c in chunks) == PROMPT
    assert chunks[0].choices[0].logprobs.token_logprobs == choice.logprobs.token_logprobs
    assert chunks[-1].choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError) as e:  # 0 without echo: nothing to answer
        oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=0)
    assert e.value.param == "max_tokens" and "echo" in e.value.message


CONVERSATION = [{"role": "system", "content": "You are a helpful assistant. Answer in a few words."},
                {"role": "user", "content": "What is the capital of France?"},
                {"role": "assistant", "content": "Paris."},
                {"role": "user", "content": "And of Italy?"}]


def test_a_conversation_of_system_and_earlier_turns_gets_an_answer(oa, embedded):
    done = oa.chat.completions.create(model=SMOLLM2, messages=CONVERSATION, max_tokens=12, temperature=0)
    assert done.choices[0].message.content.strip() and done.choices[0].message.role == "assistant"
    assert done.usage.prompt_tokens == len(embedded.encode(CONVERSATION, chat=True))
    assert done.usage.prompt_tokens > len(embedded.encode("And of Italy?", chat=True))  # the whole conversation is read
    playground = done.model_extra["playground"]
    assert "prompt=And+of+Italy%3F" in playground["lab_link"] and "last user message" in playground["lab_link_note"]
    with pytest.raises(openai.BadRequestError) as e:
        oa.chat.completions.create(model=SMOLLM2, messages=[*CONVERSATION, {"role": "tool", "content": "Rome"}])
    assert e.value.param == "messages[4].role" and "tool" in e.value.message


def test_a_seeded_conversation_replays_exactly_streamed_or_not(oa):
    ask = dict(model=SMOLLM2, messages=CONVERSATION, max_tokens=16, temperature=1, seed=11, logprobs=True)
    first = oa.chat.completions.create(**ask)
    again = oa.chat.completions.create(**ask)
    streamed = list(oa.chat.completions.create(**ask, stream=True))
    text = first.choices[0].message.content
    assert text and again.choices[0].message.content == text
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text
    assert [t.logprob for t in again.choices[0].logprobs.content] == [t.logprob for t in first.choices[0].logprobs.content]
    two = oa.chat.completions.create(**{**ask, "n": 2})  # n = 2 is one batch: choice 0 is still this run
    assert two.choices[0].message.content == text


def test_a_template_that_refuses_a_system_message_is_a_400_naming_messages():
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from model_service import ModelService
    from playground.openai_api import Access, routes

    from ..conftest import byte_chat_tokenizer, tiny_llama

    strict = ModelService(tiny_llama(), byte_chat_tokenizer(system=False))
    http = TestClient(Starlette(routes=routes(strict, Access("open"))))
    client = openai.OpenAI(base_url="http://testserver/v1", api_key="-", http_client=http, max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=strict.info.name, messages=CONVERSATION, max_tokens=2)
    assert e.value.param == "messages" and "System role not supported" in e.value.message
    assert "Traceback" not in e.value.message
    ok = client.chat.completions.create(model=strict.info.name, messages=CONVERSATION[1:], max_tokens=2, seed=1)
    assert ok.choices[0].finish_reason in ("stop", "length")


def test_a_stop_string_ends_the_text_before_it_in_every_choice(oa):
    done = oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=8, temperature=0, stop=".")
    assert done.choices[0].text == " Paris" and done.choices[0].finish_reason == "stop"
    chunks = list(oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=8, temperature=0, stop=["."], n=2,
                                        stream=True))
    for index in (0, 1):
        mine = [c.choices[0] for c in chunks if c.choices[0].index == index]
        assert "".join(c.text for c in mine) == " Paris" and mine[-1].finish_reason == "stop"


def test_temperature_5_is_a_400_that_names_temperature(oa):
    with pytest.raises(openai.BadRequestError) as e:
        oa.chat.completions.create(model=SMOLLM2, messages=HI, temperature=5)
    assert "temperature" in e.value.message and e.value.param == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        oa.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=0)
    assert e.value.param == "max_tokens"
    with pytest.raises(openai.BadRequestError) as e:
        oa.completions.create(model=SMOLLM2, prompt=PROMPT, extra_body={"top-k": 3})
    assert e.value.param == "top-k"


def test_an_unknown_model_is_a_404(oa):
    with pytest.raises(openai.NotFoundError) as e:
        oa.chat.completions.create(model="gpt-4o", messages=HI)
    assert SMOLLM2 in e.value.message


def test_errors_are_json_never_html_or_a_traceback(api_url):
    for body in (b"{not json", b"[1, 2]", b'{"prompt": "\\ud800"}'):
        r = httpx.post(f"{api_url}/v1/completions", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
        assert "Traceback" not in r.text


def test_a_client_that_leaves_frees_its_row(oa, embedded, api_url):
    # greedy counting runs the whole 400 tokens (~25 s here) unless the row is freed when its client leaves
    ask = dict(model=SMOLLM2, prompt="1, 2, 3, 4, 5, 6,", max_tokens=400, temperature=0)
    with oa.completions.create(**ask, stream=True) as stream:
        chunks = iter(stream)
        next(chunks), next(chunks), next(chunks)
        assert len(embedded.room().rows) == 1
    wait_for_empty_room(embedded)
    with pytest.raises(httpx.ReadTimeout):  # a whole answer: the client gives up waiting
        httpx.post(f"{api_url}/v1/completions", json=ask, timeout=httpx.Timeout(5, read=1.5))
    wait_for_empty_room(embedded)


# ---- the key a room asks for (the routes alone, through the openai client) -------------------------------------------


def routes_app(embedded, access):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from model_service.models.switching import LoadingService
    from playground.openai_api import routes

    return TestClient(Starlette(routes=routes(LoadingService(service=embedded), access)))


def test_a_room_asks_for_the_hosts_key(embedded, monkeypatch):
    from playground.openai_api import Access

    monkeypatch.setattr(limits, "HOST_KEY_DELAY_SECONDS", 0.0)
    http = routes_app(embedded, Access("key", "s3cret"))
    assert http.get("/v1/models").status_code == 401  # no key at all
    wrong = openai.OpenAI(base_url="http://testserver/v1", api_key="guess", http_client=http, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    with pytest.raises(openai.AuthenticationError):
        wrong.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=1)
    right = openai.OpenAI(base_url="http://testserver/v1", api_key="s3cret", http_client=http, max_retries=0)
    assert right.models.list().data[0].id == SMOLLM2
    assert right.completions.create(model=SMOLLM2, prompt=PROMPT, max_tokens=1, temperature=0).choices[0].text == " Paris"


def test_a_model_still_loading_is_a_503_that_says_so():
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from model_service.models.switching import LoadingService
    from model_service.records.step import LoadStatus
    from playground.openai_api import Access, routes

    loading = LoadingService.__new__(LoadingService)  # a load that never finishes
    loading._service, loading._status, loading.current = None, LoadStatus(0.4, "reading weights", False), "smollm2"
    http = TestClient(Starlette(routes=routes(loading, Access("open"))))
    client = openai.OpenAI(base_url="http://testserver/v1", api_key="-", http_client=http, max_retries=0)
    assert client.models.list().data[0].model_extra["playground"]["ready"] is False
    with pytest.raises(openai.InternalServerError) as e:
        client.chat.completions.create(model=SMOLLM2, messages=HI, stream=True)
    assert e.value.status_code == 503 and "still loading" in e.value.message


def test_a_room_without_a_key_keeps_the_api_closed(embedded):
    from playground.openai_api import Access

    http = routes_app(embedded, Access("unset"))
    client = openai.OpenAI(base_url="http://testserver/v1", api_key="anything", http_client=http, max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as e:
        client.models.list()
    assert "NTP_API_KEY" in e.value.message
