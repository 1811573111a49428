"""The sampling knobs of one request, validated: plain data, no tensors (the UI imports this).

The order of the transforms for each `order` is documented once, in model_service/sampling/pipeline.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .. import limits
from . import validation

ORDERS: dict[str, tuple[str, ...]] = {
    "hf": ("temperature", "top_k", "top_p", "min_p"),
    "vllm": ("temperature", "min_p", "top_k", "top_p"),
    "llama.cpp": ("top_k", "top_p", "min_p", "temperature"),
}
# vLLM treats T below this as greedy and clamps (this, 0.01) up to 0.01. Every order treats T below it
# as greedy: dividing float32 logits by T <= ~1e-37 overflows to inf and the softmax to NaN, and above
# 1e-5 but tiny the tempered distribution is already one-hot on the argmax (docs/sampling.md).
GREEDY_EPS = 1e-5
VLLM_MIN_TEMPERATURE = 0.01
MAX_SEED = limits.MAX_SEED


# What each numeric knob accepts (the API's range; the lab's sliders show the useful part of it).
RANGES = {
    "temperature": dict(low=0, high=limits.MAX_TEMPERATURE),
    "top_k": dict(integer=True, low=0, high=limits.MAX_TOP_K),
    "top_p": dict(low=0, high=1, low_open=True),
    "min_p": dict(low=0, high=1),
}


def fresh_seed() -> int:
    """A random seed from the OS, recorded so an unseeded run can still be replayed (no torch: a page draws
    one seed to share between several requests)."""
    return int.from_bytes(os.urandom(8), "little") & MAX_SEED


def stage_names(order: str) -> tuple[str, ...]:
    """The stage names of one order, raw first and final last."""
    return ("raw", *ORDERS[order], "final")


@dataclass(frozen=True)
class SamplingSettings:
    """One request's sampling knobs. Defaults switch every filter off (unlike HF generate(), whose
    silent default is top_k=50): temperature 1, top_k 0, top_p 1, min_p 0."""

    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    min_p: float = 0.0  # 0 = off
    seed: int | None = None  # None = fresh randomness
    order: str = "hf"

    def __post_init__(self):
        for name in RANGES:
            object.__setattr__(self, name, validation.number(name, getattr(self, name), **RANGES[name]))
        object.__setattr__(self, "seed", validation.seed("seed", self.seed))
        validation.choice("order", self.order, ORDERS)

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_EPS

    @property
    def effective_temperature(self) -> float:
        """The divisor actually applied (1 for greedy rows: their stages show the untempered shape)."""
        if self.greedy:
            return 1.0
        if self.order == "vllm":
            return max(self.temperature, VLLM_MIN_TEMPERATURE)
        return self.temperature

    def to_dict(self) -> dict:
        return {
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "seed": self.seed,
            "order": self.order,
        }


@dataclass(frozen=True)
class Request:
    """One request of a batch: its prompt, its own sampling settings and its own stop conditions. With chat, the
    prompt may be a conversation: (role, content) pairs (validation.messages), JSON as lists of two."""

    prompt: str | tuple
    settings: SamplingSettings = SamplingSettings()
    max_new_tokens: int = limits.DEFAULT_MAX_NEW_TOKENS
    stop: tuple[str, ...] = ()
    chat: bool = False

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt, "settings": self.settings.to_dict(), "max_new_tokens": self.max_new_tokens,
            "stop": list(self.stop), "chat": self.chat,
        }


def parse_settings(temperature, top_k, top_p, min_p, seed, order, *, labels: dict | None = None,
                   blank_is_default: bool = False) -> SamplingSettings:
    """SamplingSettings from raw values (numbers or their text, as a page, a link, a table or JSON sends
    them), each checked with the message naming it. labels: how the caller names each field ("top-k"
    on the page, "top_k" in the API); blank_is_default: an empty cell takes the default (the table)."""
    name = {**{f: f for f in (*RANGES, "seed", "order")}, **(labels or {})}
    off = SamplingSettings()
    values = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p}
    numbers = {
        f: validation.number(name[f], v, **RANGES[f], **({"blank": getattr(off, f)} if blank_is_default else {}))
        for f, v in values.items()
    }
    if blank_is_default and isinstance(order, str) and order.strip():
        order = order.strip().lower()  # a typed cell: " VLLM " means vllm
    elif blank_is_default and validation.is_blank(order):
        order = off.order
    return SamplingSettings(
        **numbers, seed=validation.seed(name["seed"], seed), order=validation.choice(name["order"], order, ORDERS)
    )


def settings_from(value) -> SamplingSettings:
    """SamplingSettings as given, or built from a mapping of its fields (what JSON callers send: numbers or
    their text), each field checked and named as the API names it; unknown fields refused. None: all off.
    The one reader of settings for every path (service, scheduler process, Ray route, remote, ZeroGPU)."""
    if isinstance(value, SamplingSettings):
        return value
    if value is None:
        return SamplingSettings()
    if not isinstance(value, Mapping):
        raise ValueError(f"settings must be an object of sampling fields, got {type(value).__name__}")
    off = SamplingSettings().to_dict()
    unknown = sorted(set(value) - set(off))
    if unknown:
        raise ValueError(f"settings has unknown fields: {', '.join(map(repr, unknown))}")
    return parse_settings(**{**off, **value})


def request_from(value) -> Request:
    """A Request as given, or built from a mapping of its fields (a JSON caller's batch row): settings through
    settings_from, stop strings through the one stop validator, chat as a boolean; unknown fields refused.
    A chat's prompt may be a conversation, read by validation.messages. The prompt's length and max_new_tokens
    are checked against the model by the service (they need its tokenizer)."""
    if isinstance(value, Request):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"each request must be a Request or an object of its fields, got {type(value).__name__}")
    unknown = sorted(set(value) - set(Request.__dataclass_fields__))
    if unknown:
        raise ValueError(f"request has unknown fields: {', '.join(map(repr, unknown))}")
    chat, prompt = validation.boolean("chat", value.get("chat", False)), value.get("prompt")
    return Request(
        prompt=validation.messages("messages", prompt) if chat and isinstance(prompt, (list, tuple))
        else validation.text("prompt", prompt),
        settings=settings_from(value.get("settings")),
        max_new_tokens=value.get("max_new_tokens", limits.DEFAULT_MAX_NEW_TOKENS),
        stop=validation.stop_strings("stop", value.get("stop")),
        chat=chat,
    )
