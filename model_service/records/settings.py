"""The sampling knobs of one request, validated: plain data, no tensors (the UI imports this).

The order of the transforms for each `order` is documented once, in model_service/sampling/pipeline.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, make_dataclass

from .. import limits
from . import validation
from .knobs import (  # noqa: F401  (the orders and the stages, as every module imports them from here)
    ADJUSTERS,
    BANS,
    BY_NAME,
    CHAIN_STAGES,
    KNOBS,
    LESSON_STAGES,
    MIROSTAT_REPLACES,
    NOT_IN_ORDER,
    NUMERIC,
    ORDERS,
)

# vLLM treats T below this as greedy and clamps (this, 0.01) up to 0.01. Every order treats T below it
# as greedy: dividing float32 logits by T <= ~1e-37 overflows to inf and the softmax to NaN, and above
# 1e-5 but tiny the tempered distribution is already one-hot on the argmax (docs/sampling.md).
GREEDY_EPS = 1e-5
VLLM_MIN_TEMPERATURE = 0.01
MAX_SEED = limits.MAX_SEED
# What each numeric knob accepts (the API's range; the lab's sliders show the useful part of it): from the rows.
RANGES = {name: BY_NAME[name].range for name in NUMERIC}


def fresh_seed() -> int:
    """A random seed from the OS, recorded so an unseeded run can still be replayed (no torch: a page draws
    one seed to share between several requests)."""
    return int.from_bytes(os.urandom(8), "little") & MAX_SEED


def stage_names(order: str, chain: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The stage names of one order (and a custom order's chain), raw first and final last."""
    return ("raw", *ORDERS[order], *chain, "final")


def parse_chain(field: str, value) -> tuple[str, ...]:
    """A custom chain: stage names (CHAIN_STAGES) as a list, or text separated by commas, ">" or arrows
    ("top_k > temperature > min_p"); each at most once. Blank: none."""
    if validation.is_blank(value):
        return ()
    if isinstance(value, str):
        for arrow in ("→", "->", ">", ";"):
            value = value.replace(arrow, ",")
        value = [part.strip().lower().replace("-", "_") for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)):
        raise validation.InputError("chain_stage", field=field, got=repr(value), choices=", ".join(CHAIN_STAGES))
    seen: list[str] = []
    for name in value:
        if name not in CHAIN_STAGES:
            raise validation.InputError("chain_stage", field=field, got=repr(name), choices=", ".join(CHAIN_STAGES))
        if name in seen:
            raise validation.InputError("chain_twice", field=field, got=name)
        seen.append(name)
    return tuple(seen)


def _chain_text(value) -> bool:
    """Text that lists stages ("top_k > temperature"): words joined by commas or arrows (anything else is read as
    an order's name, and refused quoting it whole)."""
    return isinstance(value, str) and bool(re.fullmatch(r"\s*[A-Za-z_-]+(\s*(,|>|->|→|;)\s*[A-Za-z_-]+)+\s*", value))


def _refusal(values: Mapping, order: str, chain: tuple[str, ...], name) -> validation.InputError | None:
    """Why these knob values cannot run in this order, naming the field as `name` names it; None if they can.
    One check for every path (SamplingSettings itself, parse_settings' labelled fields)."""
    def set_(field):
        return values[field] != _DEFAULTS[field]

    for field, why in NOT_IN_ORDER[order].items():
        if set_(field):
            return validation.InputError("not_in_order", field=name(field), order=order, why=why,
                                         off=_DEFAULTS[field])
    if order == "custom":
        if not chain:
            return validation.InputError("chain_empty", field=name("chain"), choices=", ".join(CHAIN_STAGES))
        for stage, knobs in CHAIN_STAGES.items():
            for field in knobs:
                greedy = field == "temperature" and values[field] < GREEDY_EPS  # greedy needs no stage
                if stage not in chain and set_(field) and not greedy:
                    return validation.InputError("chain_missing", field=name(field), value=values[field], stage=stage,
                                                 off=_DEFAULTS[field])
    elif chain:
        return validation.InputError("chain_without_custom", field=name("chain"))
    if values["mirostat"]:
        for field in MIROSTAT_REPLACES:
            if set_(field):
                return validation.InputError("mirostat_replaces", field=name(field), off=_DEFAULTS[field])
    return None


def _mu(name: str, value) -> float | None:
    return validation.number(name, value, low=-limits.MAX_MIROSTAT_MU, high=limits.MAX_MIROSTAT_MU, blank=None)


def _checked(values: Mapping, name, blank_is_default: bool = False) -> dict:
    """Every field of SamplingSettings from raw values (numbers or their text; every field given), each checked once,
    an error naming it as name(field) does: the one check of a request's sampling settings, whichever way it came
    (SamplingSettings(...) itself, parse_settings' labelled fields). blank_is_default: an empty cell is the default."""
    numbers = {f: validation.number(name(f), values[f], **RANGES[f], **({"blank": _DEFAULTS[f]} if blank_is_default else {}))
               for f in RANGES}
    order, chain, chain_name = values["order"], values["chain"], name("chain")
    if isinstance(order, (list, tuple)) or _chain_text(order):
        order, chain, chain_name = "custom", order, name("order")  # a list of stages is a custom chain
    elif blank_is_default and isinstance(order, str) and order.strip():
        order = order.strip().lower()  # a typed cell: " VLLM " means vllm
    elif blank_is_default and validation.is_blank(order):
        order = _DEFAULTS["order"]
    order = validation.choice(name("order"), order, ORDERS)
    chain = parse_chain(chain_name, chain)
    refused = _refusal(numbers, order, chain, name)
    if refused is not None:
        raise refused
    breakers = values["dry_sequence_breakers"]
    return {**numbers, "seed": validation.seed(name("seed"), values["seed"]), "order": order,
            "logit_bias": validation.logit_bias(name("logit_bias"), values["logit_bias"]),
            "dry_sequence_breakers": _DEFAULTS["dry_sequence_breakers"] if breakers is None else validation.strings(
                name("dry_sequence_breakers"), breakers, limit=limits.MAX_DRY_BREAKERS, chars=limits.MAX_DRY_BREAKER_CHARS),
            "chain": chain, "mirostat_mu": _mu(name("mirostat_mu"), values["mirostat_mu"])}


def _trusted(values: dict) -> SamplingSettings:
    """SamplingSettings of values _checked has checked already: not checked again."""
    settings = object.__new__(SamplingSettings)
    for name, value in values.items():
        object.__setattr__(settings, name, value)
    return settings


class _Knobs:
    """One request's sampling knobs: SamplingSettings' behaviour (its fields come from the rows, knobs.py). Defaults
    switch every filter off (unlike HF generate(), whose silent default is top_k=50): temperature 1, top_k 0,
    top_p 1, min_p 0, no bias, no penalty.

    The penalties read the row's context (sampling/penalties.py): which tokens count is each engine's rule, by
    `order`; penalty_last_n is llama.cpp's window and only its order reads it."""

    __slots__ = ()

    def __post_init__(self):
        for name, value in _checked({f.name: getattr(self, f.name) for f in fields(self)}, str).items():
            object.__setattr__(self, name, value)

    def with_seed(self, seed) -> SamplingSettings:
        """These settings with another seed (checked); the rest as they are, not checked again."""
        return _trusted({**self._values(), "seed": validation.seed("seed", seed)})

    def with_mu(self, mu) -> SamplingSettings:
        """These settings with the mirostat mu a continued run starts from (checked); the rest as they are."""
        return _trusted({**self._values(), "mirostat_mu": _mu("mirostat_mu", mu)})

    def _values(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def penalised(self) -> bool:
        """Any repetition, frequency or presence penalty (the context is read only then)."""
        return self.repetition_penalty != 1 or self.frequency_penalty != 0 or self.presence_penalty != 0

    @property
    def dry(self) -> bool:
        """DRY can penalise (llama.cpp: a multiplier above 0, a base of at least 1, a window that is not 0)."""
        return self.dry_multiplier > 0 and self.dry_penalty_last_n != 0

    @property
    def bans(self) -> bool:
        """A no-repeat n-gram or a min_tokens ban may apply (each reads the row's context)."""
        return self.no_repeat_ngram_size > 0 or self.min_tokens > 0

    @property
    def rule(self) -> str:
        """Whose arithmetic each stage follows: the order's engine; a custom chain follows llama.cpp's."""
        return "llama.cpp" if self.order == "custom" else self.order

    @property
    def stages(self) -> tuple[str, ...]:
        """This row's chain, raw first and final last (its order's, or a custom order's own)."""
        return stage_names(self.order, self.chain)

    @property
    def order_text(self) -> str:
        """The order as one cell of text (a table, a link, a title): its name, or a custom chain's stages joined by
        " > " (which parse_settings reads back as that chain)."""
        return " > ".join(self.chain) if self.order == "custom" else self.order

    @property
    def start_mu(self) -> float:
        """Mirostat's mu at a run's first step: a continued run's (its last record's), else 2 tau (llama.cpp's)."""
        return self.mirostat_mu if self.mirostat_mu is not None else 2 * self.mirostat_tau

    def next_mu(self, mu: float, p: float) -> float:
        """Mirostat's mu after a token of probability p (in the final, cut distribution) was drawn: mu - eta
        (surprise - tau), the surprise -log2 p in bits (llama.cpp's update, v1 and v2 alike), kept in range."""
        surprise = -math.log2(p) if p > 0 else limits.MAX_MIROSTAT_MU
        bound = limits.MAX_MIROSTAT_MU
        return min(max(mu - self.mirostat_eta * (surprise - self.mirostat_tau), -bound), bound)

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
        out["dry_sequence_breakers"], out["chain"] = list(self.dry_sequence_breakers), list(self.chain)
        return out


def _field_type(knob) -> type:
    if knob.control == "text":
        return tuple
    return int if knob.integer else float


# The lesson's knobs, the seed and the order, then every other row of knobs.py in its order; then mirostat's mu, the
# state a continued run starts from (its last record's; None: 2 tau), which no control sets.
SamplingSettings = make_dataclass(
    "SamplingSettings",
    [*((k.name, _field_type(k), dataclasses.field(default=k.default)) for k in KNOBS if k.group == "lesson"),
     ("seed", int | None, dataclasses.field(default=None)),  # None = fresh randomness
     ("order", str, dataclasses.field(default="hf")),
     *((k.name, _field_type(k), dataclasses.field(default=k.default)) for k in KNOBS if k.group != "lesson"),
     ("mirostat_mu", float | None, dataclasses.field(default=None))],
    bases=(_Knobs,), frozen=True, namespace={"__module__": __name__, "__doc__": _Knobs.__doc__},
)
_DEFAULTS = {f.name: f.default for f in fields(SamplingSettings)}  # every knob off


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
                   blank_is_default: bool = False, logit_bias=None, dry_sequence_breakers=None, chain=None,
                   mirostat_mu=None, **knobs) -> SamplingSettings:
    """SamplingSettings from raw values (numbers or their text, as a page, a link, a table or JSON sends
    them), each checked once with the message naming it. labels: how the caller names each field ("top-k"
    on the page, "top_k" in the API); blank_is_default: an empty cell takes the default (the table).
    knobs: any other numeric field of SamplingSettings (the penalties, typical_p, ...); absent: its default.
    order may be a list of stage names (or text with commas or arrows): a custom chain, as `chain` with order
    "custom". dry_sequence_breakers: a list, or text separated by | (None: llama.cpp's four)."""
    unknown = sorted(set(knobs) - set(RANGES))
    if unknown:
        raise TypeError(f"parse_settings got unknown knobs: {', '.join(unknown)}")
    labels = labels or {}
    values = {**_DEFAULTS, **knobs, "temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
              "seed": seed, "order": order, "logit_bias": logit_bias, "dry_sequence_breakers": dry_sequence_breakers,
              "chain": chain, "mirostat_mu": mirostat_mu}
    return _trusted(_checked(values, lambda f: labels.get(f, f), blank_is_default))


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
    unknown = sorted(set(value) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"settings has unknown fields: {', '.join(map(repr, unknown))}")
    return parse_settings(**{**_DEFAULTS, **value})


def request_from(value) -> Request:
    """A Request as given, or built from a mapping of its fields (a JSON caller's batch row): settings through
    settings_from, stop strings through the one stop validator, chat as a boolean; unknown fields refused.
    A chat's prompt may be a conversation, any other token ids (validation.prompt). The prompt's length and
    max_new_tokens are checked against the model by the service (they need its tokenizer)."""
    if isinstance(value, Request):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"each request must be a Request or an object of its fields, got {type(value).__name__}")
    unknown = sorted(set(value) - set(Request.__dataclass_fields__))
    if unknown:
        raise ValueError(f"request has unknown fields: {', '.join(map(repr, unknown))}")
    chat, prompt = validation.boolean("chat", value.get("chat", False)), value.get("prompt")
    return Request(
        prompt=validation.prompt("prompt", prompt, chat),
        settings=settings_from(value.get("settings")),
        max_new_tokens=value.get("max_new_tokens", limits.DEFAULT_MAX_NEW_TOKENS),
        stop=validation.stop_strings("stop", value.get("stop")),
        chat=chat,
    )
