"""The sampling knobs of one request, validated: plain data, no tensors (the UI imports this).

The order of the transforms for each `order` is documented once, in model_service/sampling/pipeline.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from .. import limits
from . import validation

ORDERS: dict[str, tuple[str, ...]] = {
    "hf": ("logit_bias", "penalties", "temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff",
           "eta_cutoff"),
    "vllm": ("logit_bias", "penalties", "temperature", "min_p", "top_k", "top_p"),
    "llama.cpp": ("logit_bias", "penalties", "top_n_sigma", "top_k", "typical_p", "top_p", "min_p", "xtc",
                  "temperature"),
}
LESSON_STAGES = ("raw", "temperature", "top_k", "top_p", "min_p", "final")  # the lesson's chain: always drawn
# The stages that change logits anywhere in the vocabulary (they can reorder the ranking) and read the context:
# every engine applies them first, so the cuts after them rank the adjusted logits.
ADJUSTERS = ("logit_bias", "penalties")
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
    "repetition_penalty": dict(low=0, high=limits.MAX_REPETITION_PENALTY, low_open=True),
    "frequency_penalty": dict(low=-limits.MAX_FREQUENCY_PENALTY, high=limits.MAX_FREQUENCY_PENALTY),
    "presence_penalty": dict(low=-limits.MAX_FREQUENCY_PENALTY, high=limits.MAX_FREQUENCY_PENALTY),
    "penalty_last_n": dict(integer=True, low=-1, high=limits.MAX_PENALTY_LAST_N),
    "typical_p": dict(low=0, high=1, low_open=True),
    "epsilon_cutoff": dict(low=0, high=limits.MAX_EPSILON_CUTOFF),
    "eta_cutoff": dict(low=0, high=limits.MAX_EPSILON_CUTOFF),
    "top_n_sigma": dict(low=0, high=limits.MAX_TOP_N_SIGMA),
    "xtc_probability": dict(low=0, high=1),
    "xtc_threshold": dict(low=0, high=1),
    "dynatemp_range": dict(low=0, high=limits.MAX_TEMPERATURE),
    "dynatemp_exponent": dict(low=0, high=limits.MAX_DYNATEMP_EXPONENT, low_open=True),
}
# What an order's engine does not have (docs/sampling.md): a knob set away from its default there is refused,
# naming the knob and the engine, rather than applied where the engine would not apply it.
_HF_ONLY = {"epsilon_cutoff": "only transformers has an epsilon cutoff", "eta_cutoff": "only transformers has an eta cutoff"}
_LLAMA_ONLY = {"top_n_sigma": "only llama.cpp has top-n-sigma", "xtc_probability": "only llama.cpp has XTC",
               "dynatemp_range": "only llama.cpp has a dynamic temperature"}
NOT_IN_ORDER = {
    "hf": {"frequency_penalty": "transformers has no frequency penalty",
           "presence_penalty": "transformers has no presence penalty", **_LLAMA_ONLY},
    "vllm": {**_HF_ONLY, **_LLAMA_ONLY, "typical_p": "vLLM has no typical sampling"},
    "llama.cpp": _HF_ONLY,
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
    silent default is top_k=50): temperature 1, top_k 0, top_p 1, min_p 0, no bias, no penalty.

    The penalties read the row's context (sampling/penalties.py): which tokens count is each engine's rule, by
    `order`; penalty_last_n is llama.cpp's window and only its order reads it."""

    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    min_p: float = 0.0  # 0 = off
    seed: int | None = None  # None = fresh randomness
    order: str = "hf"
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias) pairs, added to those logits first
    repetition_penalty: float = 1.0  # 1 = off: a counted token's positive logit / r, negative x r
    frequency_penalty: float = 0.0  # 0 = off: minus f x the token's count
    presence_penalty: float = 0.0  # 0 = off: minus p once a token is counted at all
    penalty_last_n: int = limits.DEFAULT_PENALTY_LAST_N  # llama.cpp: count the last n tokens (-1 all, 0 none)
    typical_p: float = 1.0  # 1 = off: keep the tokens whose surprise is nearest the entropy, up to this mass
    epsilon_cutoff: float = 0.0  # 0 = off: remove tokens below this probability (the top one stays)
    eta_cutoff: float = 0.0  # 0 = off: remove tokens below min(eta, sqrt(eta) exp(-entropy))
    top_n_sigma: float = 0.0  # 0 = off: keep logits within n standard deviations of the largest
    xtc_probability: float = 0.0  # 0 = off: how often XTC removes the top choices
    xtc_threshold: float = limits.DEFAULT_XTC_THRESHOLD  # the tokens at least this probable, all but the last, go
    dynatemp_range: float = 0.0  # 0 = off: the temperature moves within T +- this, with the entropy
    dynatemp_exponent: float = 1.0

    def __post_init__(self):
        for name in RANGES:
            object.__setattr__(self, name, validation.number(name, getattr(self, name), **RANGES[name]))
        object.__setattr__(self, "seed", validation.seed("seed", self.seed))
        object.__setattr__(self, "logit_bias", validation.logit_bias("logit_bias", self.logit_bias))
        validation.choice("order", self.order, ORDERS)
        off = type(self).__dataclass_fields__
        for name, why in NOT_IN_ORDER.get(self.order, {}).items():
            if getattr(self, name) != off[name].default:
                raise validation.InputError("not_in_order", field=name, order=self.order, why=why,
                                            off=off[name].default)

    @property
    def penalised(self) -> bool:
        """Any repetition, frequency or presence penalty (the context is read only then)."""
        return self.repetition_penalty != 1 or self.frequency_penalty != 0 or self.presence_penalty != 0

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

    @property
    def xtc(self) -> bool:
        """XTC can remove tokens (llama.cpp skips it at a threshold above 0.5: no two tokens can pass it)."""
        return self.xtc_probability > 0 and self.xtc_threshold <= 0.5

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["logit_bias"] = {str(token): bias for token, bias in self.logit_bias}  # JSON's keys are text
        return out


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
                   blank_is_default: bool = False, logit_bias=None, **knobs) -> SamplingSettings:
    """SamplingSettings from raw values (numbers or their text, as a page, a link, a table or JSON sends
    them), each checked with the message naming it. labels: how the caller names each field ("top-k"
    on the page, "top_k" in the API); blank_is_default: an empty cell takes the default (the table).
    knobs: any other numeric field of SamplingSettings (the penalties, typical_p, ...); absent: its default."""
    name = {**{f: f for f in (*RANGES, "seed", "order", "logit_bias")}, **(labels or {})}
    off = SamplingSettings()
    unknown = sorted(set(knobs) - set(RANGES))
    if unknown:
        raise TypeError(f"parse_settings got unknown knobs: {', '.join(unknown)}")
    values = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
              **{f: knobs.get(f, getattr(off, f)) for f in RANGES if f not in ("temperature", "top_k", "top_p", "min_p")}}
    numbers = {
        f: validation.number(name[f], v, **RANGES[f], **({"blank": getattr(off, f)} if blank_is_default else {}))
        for f, v in values.items()
    }
    if blank_is_default and isinstance(order, str) and order.strip():
        order = order.strip().lower()  # a typed cell: " VLLM " means vllm
    elif blank_is_default and validation.is_blank(order):
        order = off.order
    order = validation.choice(name["order"], order, ORDERS)
    for field, why in NOT_IN_ORDER.get(order, {}).items():
        if numbers[field] != getattr(off, field):
            raise validation.InputError("not_in_order", field=name[field], order=order, why=why,
                                        off=getattr(off, field))
    return SamplingSettings(**numbers, seed=validation.seed(name["seed"], seed), order=order,
                            logit_bias=validation.logit_bias(name["logit_bias"], logit_bias))


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
