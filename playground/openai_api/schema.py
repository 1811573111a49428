"""An OpenAI request body -> a Plan: what the service runs (its prompt, chat flag, SamplingSettings per choice,
stop strings, length) and what the answer carries (stream, usage, logprobs and from which stage).

Every value is checked by the service's own validators (model_service/records/validation.py, and settings_from
for the sampling knobs), so a bad one is refused with the message the page and the gradio API give, naming the
parameter as this API names it. Only the ranges that are OpenAI's and not the playground's (temperature 0-2,
n 1-4, top_logprobs 0-20) live in model_service/limits.py under the API's heading.

OpenAI's logit_bias, frequency_penalty and presence_penalty are the sampler's own (docs/sampling.md says which
tokens each order counts; the "hf" order has no frequency or presence penalty and refuses them, naming them).
The playground's own knobs come as extra body fields, as vLLM takes them, each by its name in records/knobs.py:
top_k (-1 or 0 = off), min_p, repetition_penalty, and every other sampler of the three engines (each in the orders
whose engine has it), order ("hf", "vllm", "llama.cpp", or a list of stage names: a custom chain) and
logprobs_mode ("raw": the model's distribution before sampling, the default as vLLM's raw_logprobs; "final": after
the sampler's whole pipeline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model_service.records import validation
from model_service.records.knobs import KNOBS
from model_service.records.settings import Request, SamplingSettings, fresh_seed, settings_from
from playground import limits

from .errors import bad

LOGPROBS_MODES = ("raw", "final")
# OpenAI's own fields of both endpoints
OPENAI_FIELDS = ("model", "temperature", "top_p", "max_tokens", "stop", "seed", "n", "stream", "stream_options",
                 "logit_bias", "frequency_penalty", "presence_penalty")
# to settings_from as they come (null: default): the order and every knob whose row says the API takes it as it is
# (records/knobs.py; temperature and top_k are read here first: OpenAI's range, vLLM's -1)
PASSED = ("order", *(knob.name for knob in KNOBS if knob.openai))
# fields of both endpoints (OpenAI's, then the playground's extras)
COMMON = (*OPENAI_FIELDS, "top_k", *(name for name in PASSED if name not in OPENAI_FIELDS), "logprobs_mode",
          "logprobs")
OFF_SETTINGS = SamplingSettings().to_dict()  # a null field takes its default
CHAT = ("messages", "top_logprobs", "max_completion_tokens")
COMPLETION = ("prompt", "echo", "suffix", "best_of")
IGNORED = ("user", "store", "metadata", "service_tier", "parallel_tool_calls")  # no effect on a sampled text
# OpenAI knobs the playground's sampler does not have: accepted only at the value that means "off"
OFF = {"tools": ([],), "functions": ([],), "tool_choice": ("none",)}


@dataclass(frozen=True)
class Plan:
    """One checked request."""

    kind: str  # "chat" or "completion"
    model: str | None  # as asked (None: the served one); the route checks it against the service
    prompt: str | tuple[tuple[str, str], ...]  # a completion's prompt; a chat's one user message, or its messages
    chat: bool  # the model's chat template (the service's chat=True)
    settings: tuple[SamplingSettings, ...]  # one per choice, each with its seed (drawn here when none was given)
    max_tokens: int
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    logprobs: int | None = None  # None: no logprobs; k: the chosen token's and the k most probable
    logprobs_mode: str = "raw"
    echo: bool = False  # a completion's text (and its logprobs, with logprobs) starts with its prompt's

    @property
    def n(self) -> int:
        return len(self.settings)

    @property
    def conversation(self) -> bool:
        """A chat of several messages (a system message, earlier turns), not one user message."""
        return not isinstance(self.prompt, str)

    @property
    def lab_prompt(self) -> str:
        """What the lab's prompt box takes: the prompt, or a conversation's last user message (the lab's chat
        toggle puts one user message in the template)."""
        return self.prompt[-1][1] if self.conversation else self.prompt

    @property
    def prompt_field(self) -> str:
        return "messages" if self.chat else "prompt"

    def requests(self, ids: Sequence[int]) -> list[Request]:
        """The service's requests, one per choice (n > 1 runs them as one generate_batch), each on the prompt's token
        ids (the chat template's, for a chat: the prompt is tokenised once, by the route)."""
        return [Request(tuple(ids), s, self.max_tokens, self.stop) for s in self.settings]


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
    """temperature (OpenAI's 0-2), top_p, seed, logit_bias, the penalties and the extras top_k, min_p, order, through
    settings_from."""
    temperature = validation.number("temperature", _given(body, "temperature", 1.0), low=0,
                                    high=limits.API_MAX_TEMPERATURE)
    top_k = _given(body, "top_k", 0)
    if top_k in (-1, "-1"):  # vLLM's "off"
        top_k = 0
    return settings_from({"temperature": temperature, "top_k": top_k, "seed": body.get("seed"),
                          **{name: _given(body, name, OFF_SETTINGS[name]) for name in PASSED}})


def choices(settings: SamplingSettings, n: int) -> tuple[SamplingSettings, ...]:
    """n settings: choice i has seed + i (so choice 0 replays a request with n = 1); no seed: a fresh one each,
    drawn here so the answer can say it and the lab can replay it."""
    if settings.seed is None:
        seeds = [fresh_seed() for _ in range(n)]
    else:
        seeds = [(settings.seed + i) % (limits.MAX_SEED + 1) for i in range(n)]
    return tuple(settings.with_seed(seed) for seed in seeds)


def chat_prompt(messages) -> str | tuple[tuple[str, str], ...]:
    """A chat's prompt for the service's chat=True: one user message as its text (what the lab's chat toggle
    runs), or a conversation as validation.messages' (role, content) pairs, which the model's chat template turns
    into one prompt. The one validator of messages names the field (messages[2].role)."""
    pairs = validation.messages("messages", messages)
    return pairs[0][1] if len(pairs) == 1 else pairs


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


def _max_tokens(body: Mapping, kind: str, echo: bool) -> int:
    """1 to MAX_NEW_TOKENS; 0 only with echo (OpenAI's way to score a prompt: its logprobs, nothing generated)."""
    name = "max_completion_tokens" if kind == "chat" and body.get("max_completion_tokens") is not None else "max_tokens"
    default = limits.API_CHAT_MAX_TOKENS if kind == "chat" else limits.API_COMPLETION_MAX_TOKENS
    tokens = validation.number(name, _given(body, name, default), integer=True, low=0 if kind == "completion" else 1,
                               high=limits.MAX_NEW_TOKENS)
    if tokens == 0 and not echo:
        raise bad(f"{name} must be at least 1: 0 is allowed only with echo: true (the prompt's own logprobs, "
                  f"nothing generated), got 0", name)
    return tokens


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
    prompt = chat_prompt(body.get("messages")) if kind == "chat" else _completion_prompt(body)
    n = validation.number("n", _given(body, "n", 1), integer=True, low=1, high=limits.API_MAX_CHOICES)
    best_of = body.get("best_of")
    if best_of is not None and best_of != n:
        raise bad("best_of is not supported here (send n, or best_of equal to n)", "best_of")
    stream = validation.boolean("stream", _given(body, "stream", False))
    echo = validation.boolean("echo", _given(body, "echo", False))
    return Plan(
        kind=kind, model=model, prompt=prompt, chat=kind == "chat", settings=choices(sampling(body), n),
        max_tokens=_max_tokens(body, kind, echo), stop=validation.stop_strings("stop", body.get("stop")), stream=stream,
        include_usage=_stream_options(body, stream), logprobs=_logprobs(body, kind),
        logprobs_mode=validation.choice("logprobs_mode", _given(body, "logprobs_mode", "raw"), LOGPROBS_MODES), echo=echo,
    )


__all__ = ["LOGPROBS_MODES", "Plan", "chat_prompt", "choices", "parse", "sampling"]
