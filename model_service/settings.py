"""The sampling knobs of one request, validated: plain data, no tensors (the UI imports this).

The order of the transforms for each `order` is documented once, in model_service/sampling.py.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

ORDERS: dict[str, tuple[str, ...]] = {
    "hf": ("temperature", "top_k", "top_p", "min_p"),
    "vllm": ("temperature", "min_p", "top_k", "top_p"),
    "llama.cpp": ("top_k", "top_p", "min_p", "temperature"),
}
# vLLM treats T below this as greedy and clamps (this, 0.01) up to 0.01.
VLLM_GREEDY_EPS = 1e-5
VLLM_MIN_TEMPERATURE = 0.01
MAX_SEED = 2**63 - 1


def stage_names(order: str) -> tuple[str, ...]:
    """The stage names of one order, raw first and final last."""
    return ("raw", *ORDERS[order], "final")


def _number(field: str, value, *, integer: bool = False):
    """Validate a plain real number (bools and NaN refused); integers must be integral."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field} must be a number, got {value!r}")
    if math.isnan(value):
        raise ValueError(f"{field} must be a number, got NaN")
    if integer:
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"{field} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


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
        t = _number("temperature", self.temperature)
        if not t >= 0 or math.isinf(t):
            raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {self.temperature!r}")
        k = _number("top_k", self.top_k, integer=True)
        if k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k!r}")
        p = _number("top_p", self.top_p)
        if not 0 < p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1 = off), got {self.top_p!r}")
        m = _number("min_p", self.min_p)
        if not 0 <= m <= 1:
            raise ValueError(f"min_p must be in [0, 1] (0 = off), got {self.min_p!r}")
        seed = self.seed
        if seed is not None:
            seed = _number("seed", seed, integer=True)
            if not 0 <= seed <= MAX_SEED:
                raise ValueError(f"seed must be between 0 and 2**63-1 or empty, got {self.seed!r}")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {self.order!r}")
        for name, value in (("temperature", t), ("top_k", k), ("top_p", p), ("min_p", m), ("seed", seed)):
            object.__setattr__(self, name, value)

    @property
    def greedy(self) -> bool:
        limit = VLLM_GREEDY_EPS if self.order == "vllm" else 0.0
        return self.temperature <= limit

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
    """One request of a batch: its prompt, its own sampling settings and its own stop conditions."""

    prompt: str
    settings: SamplingSettings = SamplingSettings()
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()
    chat: bool = False

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt, "settings": self.settings.to_dict(), "max_new_tokens": self.max_new_tokens,
            "stop": list(self.stop), "chat": self.chat,
        }
