"""From the lab's control values to one validated run request (no gradio, no torch here).

Every message names the control, so a learner who types a bad value knows what to fix; the same
validators (model_service.records.validation) check the API, the links and the engine's table.
"""

from __future__ import annotations

from dataclasses import dataclass

from model_service.records import validation
from model_service.records.knobs import KNOBS, LAB_KNOBS
from model_service.records.settings import ORDERS, SamplingSettings, parse_settings
from playground import limits

from ..common.i18n import tr
from ..common.lab_link import CONTROL_DEFAULTS

ORDER_LABELS = {  # names and arrows: the same in every language
    "hf": "Hugging Face: temperature → top-k → top-p → min-p",
    "vllm": "vLLM: temperature → min-p → top-k → top-p",
    "llama.cpp": "llama.cpp: top-k → top-p → min-p → temperature",
    "custom": "Custom: your chain ↓",
}
ORDER_NOTES = {"hf": "lab.order_note.hf", "vllm": "lab.order_note.vllm", "llama.cpp": "lab.order_note.llama_cpp",
               "custom": "lab.order_note.custom"}  # keys
assert set(ORDER_LABELS) == set(ORDERS) == set(ORDER_NOTES)

# the controls after the lesson's ten, in parse_request's order (the rows' order, records/knobs.py)
KNOB_CONTROLS = LAB_KNOBS
DEFAULTS = CONTROL_DEFAULTS  # the controls as a fresh page shows them (common/lab_link.py)
CHAIN_EXAMPLE = "top_k, top_p, min_p, temperature"  # what the chain box suggests
# The sliders' ranges: a link may set a control only inside them (the API accepts the service's wider ranges).
SLIDERS = {**{k.name: k.slider for k in KNOBS if k.slider is not None},
           "max_new_tokens": (1, limits.MAX_NEW_TOKENS, 1)}
# the controls as the page labels them (an error names the control the learner sees)
CONTROL_NAMES = {**{k.name: k.label for k in KNOBS if k.label is not None}, "order": "sampler order"}
# the fields whose names are words, not terms: an error names them with the control's label in the page's language
FIELD_LABELS = {"max new tokens": "lab.max_new", "stop strings": "lab.stop", "sampler order": "lab.order",
                "scrub step": "lab.field.scrub", "free-writing prompt": "greedy.prompt",
                "chips on the page": "lab.field.on_page"}


def field_labels(lang: str) -> dict[str, str]:
    """The validators' English field names -> the controls' labels in `lang` (for errors.user_error)."""
    return {name: tr(lang, key) for name, key in FIELD_LABELS.items()}


@dataclass(frozen=True)
class RunRequest:
    prompt: str
    chat: bool
    settings: SamplingSettings
    max_new_tokens: int
    stop: tuple[str, ...]


def continued(settings: SamplingSettings, records) -> SamplingSettings:
    """The settings that continue a run after `records` (its steps so far): with mirostat, the mu its last record
    carries, so that the continuation cuts as the whole run would have."""
    if not settings.mirostat or not records or records[-1].mirostat_mu is None:
        return settings
    return settings.with_mu(records[-1].mirostat_mu)


def parse_request(prompt, chat, temperature, top_k, top_p, min_p, seed, max_new_tokens, stop, order, *knobs,
                  **named) -> RunRequest:
    """Raises ValueError with a message that names the control. `stop` is the box's text, the logit bias too
    ("13:-100, 42:5"). knobs: the KNOB_CONTROLS in order (as the page sends them), or by name; absent: off."""
    prompt = validation.text("prompt", prompt)
    max_new = validation.number("max new tokens", max_new_tokens, integer=True, low=1, high=limits.MAX_NEW_TOKENS)
    settings = parse_settings(temperature, top_k, top_p, min_p, seed, order, labels=CONTROL_NAMES,
                              **dict(zip(KNOB_CONTROLS, knobs)), **named)
    stops = validation.parse_stop_text("stop strings", stop)
    return RunRequest(prompt, validation.boolean("chat template", chat), settings, max_new, stops)
