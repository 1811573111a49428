"""An OpenAI request body -> a Plan: what the service runs (its prompt, chat flag, SamplingSettings per choice,
stop strings, length) and what the answer carries (stream, usage, logprobs and from which stage).

Every value is checked by the service's own validators (model_service/records/validation.py, and settings_from
for the sampling knobs), so a bad one is refused with the message the page and the gradio API give, naming the
parameter as this API names it. Only the ranges that are OpenAI's and not the playground's (temperature 0-2,
n 1-4, top_logprobs 0-20) live in model_service/limits.py under the API's heading.

The playground's own knobs come as extra body fields, as vLLM takes them: top_k (-1 or 0 = off), min_p,
order ("hf", "vllm", "llama.cpp") and logprobs_mode ("raw": the model's distribution before sampling, the
default as vLLM's raw_logprobs; "final": after the sampler's whole pipeline).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from model_service import limits
from model_service.records import validation
from model_service.records.settings import Request, SamplingSettings, fresh_seed, settings_from

from .errors import bad

LOGPROBS_MODES = ("raw", "final")
# fields of both endpoints (OpenAI's, then the playground's extras)
COMMON = ("model", "temperature", "top_p", "max_tokens", "stop", "seed", "n", "stream", "stream_options",
          "top_k", "min_p", "order", "logprobs_mode", "logprobs")
CHAT = ("messages", "top_logprobs", "max_completion_tokens")
COMPLETION = ("prompt", "echo", "suffix", "best_of")
IGNORED = ("user", "store", "metadata", "service_tier", "parallel_tool_calls")  # no effect on a sampled text
# OpenAI knobs the playground's sampler does not have: accepted only at the value that means "off"
OFF = {"presence_penalty": (0, 0.0), "frequency_penalty": (0, 0.0), "repetition_penalty": (1, 1.0),
       "logit_bias": ({},), "tools": ([],), "functions": ([],), "tool_choice": ("none",)}


@dataclass(frozen=True)
class Plan:
    """One checked request."""

    kind: str  # "chat" or "completion"
    model: str | None  # as asked (None: the served one); the route checks it against the service
    prompt: str  # a completion's prompt, or the one user message of a chat
    chat: bool  # the model's chat template (the service's chat=True)
    settings: tuple[SamplingSettings, ...]  # one per choice, each with its seed (drawn here when none was given)
    max_tokens: int
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    logprobs: int | None = None  # None: no logprobs; k: the chosen token's and the k most probable
    logprobs_mode: str = "raw"
    echo: bool = False  # a completion's text starts with its prompt

    @property
    def n(self) -> int:
        return len(self.settings)

    @property
    def prompt_field(self) -> str:
        return "messages" if self.chat else "prompt"

    def requests(self) -> list[Request]:
        """The service's requests, one per choice (n > 1 runs them as one generate_batch)."""
        return [Request(self.prompt, s, self.max_tokens, self.stop, self.chat) for s in self.settings]


def _given(body: Mapping, name: str, default=None):
    """A field's value; absent or null is the default (clients send null for "not given")."""
    value = body.get(name)
    return default if value is None else value


def check_fields(body, kind: str) -> None:
    if not isinstance(body, Mapping):
        raise bad(f"the request body must be a JSON object, got {type(body).__name__}")
    known = (*COMMON, *(CHAT if kind == "chat" else COMPLETION), *IGNORED, *OFF)
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise bad(f"unknown field {unknown[0]!r}: this server takes {', '.join(known)}", unknown[0])
    for name, off in OFF.items():
        if body.get(name) is not None and body[name] not in off:
            raise bad(f"{name} is not supported here: the playground's sampler has none "
                      f"(send {off[0]!r} or leave it out)", name)


def sampling(body: Mapping) -> SamplingSettings:
    """temperature (OpenAI's 0-2), top_p, seed and the extras top_k, min_p, order, through settings_from."""
    temperature = validation.number("temperature", _given(body, "temperature", 1.0), low=0,
                                    high=limits.API_MAX_TEMPERATURE)
    top_k = _given(body, "top_k", 0)
    if top_k in (-1, "-1"):  # vLLM's "off"
        top_k = 0
    off = SamplingSettings()
    return settings_from({"temperature": temperature, "top_k": top_k, "top_p": _given(body, "top_p", off.top_p),
                          "min_p": _given(body, "min_p", off.min_p), "seed": body.get("seed"),
                          "order": _given(body, "order", off.order)})


def choices(settings: SamplingSettings, n: int) -> tuple[SamplingSettings, ...]:
    """n settings: choice i has seed + i (so choice 0 replays a request with n = 1); no seed: a fresh one each,
    drawn here so the answer can say it and the lab can replay it."""
    if settings.seed is None:
        seeds = [fresh_seed() for _ in range(n)]
    else:
        seeds = [(settings.seed + i) % (limits.MAX_SEED + 1) for i in range(n)]
    return tuple(dataclasses.replace(settings, seed=seed) for seed in seeds)


def _content(message, i: int) -> str:
    field = f"messages[{i}].content"
    content = message.get("content")
    if isinstance(content, list):  # content parts: only text ones
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                raise bad(f"{field}: only text parts are supported here, got {str(part)[:60]!r}", field)
            texts.append(validation.text(field, part.get("text"), required=False))
        content = "".join(texts)
    return validation.text(field, content)


def user_message(messages) -> str:
    """The chat's one user message: the service's chat=True applies the model's chat template to it."""
    if not isinstance(messages, list) or not messages:
        raise bad("messages must be a non-empty list of {role, content} objects", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise bad(f"messages[{i}] must be an object with a role and a content", "messages")
        validation.choice(f"messages[{i}].role", message.get("role"), ("system", "developer", "user", "assistant", "tool"))
    if len(messages) != 1 or messages[0]["role"] != "user":
        roles = ", ".join(m["role"] for m in messages)
        raise bad(f"messages: this server's chat takes exactly one user message (the model's chat template around it, as the "
                  f"lab's chat toggle does); got {len(messages)} message(s): {roles}", "messages")
    return _content(messages[0], 0)


def _logprobs(body: Mapping, kind: str) -> int | None:
    high = limits.API_MAX_TOP_LOGPROBS
    if kind == "completion":  # logprobs: k
        value = body.get("logprobs")
        return None if value is None else validation.number("logprobs", value, integer=True, low=0, high=high)
    wanted = validation.boolean("logprobs", _given(body, "logprobs", False))
    top = body.get("top_logprobs")
    if top is not None and not wanted:
        raise bad("top_logprobs needs logprobs: true", "top_logprobs")
    if not wanted:
        return None
    return 0 if top is None else validation.number("top_logprobs", top, integer=True, low=0, high=high)


def _max_tokens(body: Mapping, kind: str) -> int:
    name = "max_completion_tokens" if kind == "chat" and body.get("max_completion_tokens") is not None else "max_tokens"
    default = limits.API_CHAT_MAX_TOKENS if kind == "chat" else limits.API_COMPLETION_MAX_TOKENS
    return validation.number(name, _given(body, name, default), integer=True, low=1, high=limits.MAX_NEW_TOKENS)


def _stream_options(body: Mapping, stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, Mapping) or set(options) - {"include_usage"}:
        raise bad("stream_options must be {\"include_usage\": true or false}", "stream_options")
    if not stream:
        raise bad("stream_options needs stream: true", "stream_options")
    return validation.boolean("stream_options.include_usage", _given(options, "include_usage", False))


def _completion_prompt(body: Mapping) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, list):
        raise bad("prompt must be one string here (no batches of prompts, no token ids): send n for several "
                  "completions of one prompt", "prompt")
    if body.get("suffix"):
        raise bad("suffix (insertion) is not supported here", "suffix")
    return validation.text("prompt", prompt)


def parse(body, kind: str) -> Plan:
    """The Plan of a request body; an ApiError (400) or a validation error (named) otherwise."""
    check_fields(body, kind)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad(f"model must be a string, got {type(model).__name__}", "model")
    prompt = user_message(body.get("messages")) if kind == "chat" else _completion_prompt(body)
    n = validation.number("n", _given(body, "n", 1), integer=True, low=1, high=limits.API_MAX_CHOICES)
    best_of = body.get("best_of")
    if best_of is not None and best_of != n:
        raise bad("best_of is not supported here (send n, or best_of equal to n)", "best_of")
    stream = validation.boolean("stream", _given(body, "stream", False))
    echo = validation.boolean("echo", _given(body, "echo", False))
    logprobs = _logprobs(body, kind)
    if echo and logprobs is not None:
        raise bad("echo with logprobs (the prompt's logprobs) is not supported here yet", "echo")
    return Plan(
        kind=kind, model=model, prompt=prompt, chat=kind == "chat", settings=choices(sampling(body), n),
        max_tokens=_max_tokens(body, kind), stop=validation.stop_strings("stop", body.get("stop")), stream=stream,
        include_usage=_stream_options(body, stream), logprobs=logprobs,
        logprobs_mode=validation.choice("logprobs_mode", _given(body, "logprobs_mode", "raw"), LOGPROBS_MODES), echo=echo,
    )


__all__ = ["LOGPROBS_MODES", "Plan", "choices", "parse", "sampling", "user_message"]
