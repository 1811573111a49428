"""From the page's control values to validated service arguments (no gradio, no torch here).

Every message names the control, so a learner who types a bad value knows what to fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from model_service.settings import ORDERS, SamplingSettings

ORDER_LABELS = {
    "hf": "Hugging Face: temperature → top-k → top-p → min-p",
    "vllm": "vLLM: temperature → min-p → top-k → top-p",
    "llama.cpp": "llama.cpp: top-k → top-p → min-p → temperature",
}
ORDER_NOTES = {
    "hf": "The lesson's order (transformers' generate()). Filters act on the tempered distribution.",
    "vllm": "min-p runs before top-p, on the renormalised row, so the same knobs can keep fewer tokens.",
    "llama.cpp": "The cut is decided at T = 1; temperature only reshapes the tokens that survived.",
}
assert set(ORDER_LABELS) == set(ORDERS)

DEFAULTS = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=None, order="hf", max_new_tokens=48)
DEFAULTS_NOTE = (
    "Defaults: temperature 1, top-k off (0), top-p off (1), min-p off (0), order HF. "
    "Note: Hugging Face's own `generate()` silently applies top-k 50; the playground applies nothing you do not set."
)
MAX_NEW_TOKENS = 512


@dataclass(frozen=True)
class RunRequest:
    prompt: str
    chat: bool
    settings: SamplingSettings
    max_new_tokens: int
    stop: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt, "chat": self.chat, "settings": self.settings.to_dict(),
            "max_new_tokens": self.max_new_tokens, "stop": list(self.stop),
        }


def parse_seed(value) -> int | None:
    """Blank = fresh randomness. Accepts a number or its text."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"seed must be a whole number or blank, got {value!r}") from None
    if number != int(number):
        raise ValueError(f"seed must be a whole number or blank, got {value!r}")
    return int(number)


def parse_stop(text) -> tuple[str, ...]:
    """One stop string per line; \\n and \\t written literally stand for a newline and a tab."""
    if not text:
        return ()
    lines = [line for line in str(text).splitlines() if line != ""]
    return tuple(line.replace("\\n", "\n").replace("\\t", "\t") for line in lines)


def parse_request(prompt, chat, temperature, top_k, top_p, min_p, seed, max_new_tokens, stop, order) -> RunRequest:
    """Raises ValueError with a message that names the control."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty: type some text for the model to continue")
    if order not in ORDERS:
        raise ValueError(f"sampler order must be one of {', '.join(ORDERS)}, got {order!r}")
    try:
        n = int(max_new_tokens)
    except (TypeError, ValueError):
        raise ValueError(f"max new tokens must be a whole number, got {max_new_tokens!r}") from None
    if not 1 <= n <= MAX_NEW_TOKENS:
        raise ValueError(f"max new tokens must be between 1 and {MAX_NEW_TOKENS}, got {max_new_tokens!r}")
    settings = SamplingSettings(
        temperature=_num("temperature", temperature), top_k=_num("top-k", top_k), top_p=_num("top-p", top_p),
        min_p=_num("min-p", min_p), seed=parse_seed(seed), order=order,
    )
    return RunRequest(prompt, bool(chat), settings, n, parse_stop(stop))


def _num(name, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
