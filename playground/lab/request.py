"""From the lab's control values to one validated run request (no gradio, no torch here).

Every message names the control, so a learner who types a bad value knows what to fix; the same
validators (model_service.records.validation) check the API, the links and the engine's table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from model_service import limits
from model_service.records import validation
from model_service.records.settings import ORDERS, SamplingSettings, parse_settings

from ..common.i18n import tr

ORDER_LABELS = {  # names and arrows: the same in every language
    "hf": "Hugging Face: temperature → top-k → top-p → min-p",
    "vllm": "vLLM: temperature → min-p → top-k → top-p",
    "llama.cpp": "llama.cpp: top-k → top-p → min-p → temperature",
    "custom": "Custom: your chain ↓",
}
ORDER_NOTES = {"hf": "lab.order_note.hf", "vllm": "lab.order_note.vllm", "llama.cpp": "lab.order_note.llama_cpp",
               "custom": "lab.order_note.custom"}  # keys
assert set(ORDER_LABELS) == set(ORDERS) == set(ORDER_NOTES)

_OFF = SamplingSettings()  # every filter off: the defaults the controls start from
# the controls after the lesson's ten, in parse_request's order: the bias and penalties, then the other samplers
KNOB_CONTROLS = ("logit_bias", "repetition_penalty", "frequency_penalty", "presence_penalty", "penalty_last_n",
                 "no_repeat_ngram_size", "min_tokens", "typical_p", "epsilon_cutoff", "eta_cutoff", "top_n_sigma", "xtc_probability", "xtc_threshold",
                 "dynatemp_range", "dynatemp_exponent", "dry_multiplier", "dry_base", "dry_allowed_length",
                 "dry_penalty_last_n", "dry_sequence_breakers", "mirostat", "mirostat_tau", "mirostat_eta", "chain")
TEXT_KNOBS = ("logit_bias", "dry_sequence_breakers", "chain")  # typed in a box: their control shows text


def knob_values(settings: SamplingSettings) -> dict:
    """The KNOB_CONTROLS' values as the lab's controls (and links, run files) show them: numbers, and text for the
    bias ("13:-100, 42:5"), the breakers ("\\n|:" as the stop box writes them) and the chain ("top_k, temperature")."""
    return {**{name: getattr(settings, name) for name in KNOB_CONTROLS if name not in TEXT_KNOBS},
            "logit_bias": validation.format_logit_bias(settings.logit_bias),
            "dry_sequence_breakers": validation.format_stop_text(settings.dry_sequence_breakers),
            "chain": ", ".join(settings.chain)}


DEFAULTS = dict(
    temperature=_OFF.temperature, top_k=_OFF.top_k, top_p=_OFF.top_p, min_p=_OFF.min_p, seed=None,
    order=_OFF.order, max_new_tokens=limits.DEFAULT_MAX_NEW_TOKENS, **knob_values(_OFF),
)
CHAIN_EXAMPLE = "top_k, top_p, min_p, temperature"  # what the chain box suggests
# The sliders' ranges: a link may set a control only inside them (the API accepts the service's wider ranges).
SLIDERS = {
    "temperature": (0.0, 2.0, 0.05),
    "top_k": (0, 200, 1),
    "top_p": (0.01, 1.0, 0.01),
    "min_p": (0.0, 1.0, 0.01),
    "max_new_tokens": (1, limits.MAX_NEW_TOKENS, 1),
    "repetition_penalty": (0.5, 2.0, 0.01),
    "frequency_penalty": (-limits.MAX_FREQUENCY_PENALTY, limits.MAX_FREQUENCY_PENALTY, 0.05),
    "presence_penalty": (-limits.MAX_FREQUENCY_PENALTY, limits.MAX_FREQUENCY_PENALTY, 0.05),
    "penalty_last_n": (-1, limits.MAX_NEW_TOKENS + limits.MAX_PROMPT_TOKENS, 1),
    "no_repeat_ngram_size": (0, 8, 1),
    "min_tokens": (0, 64, 1),
    "typical_p": (0.01, 1.0, 0.01),
    "epsilon_cutoff": (0.0, 0.05, 0.0005),
    "eta_cutoff": (0.0, 0.05, 0.0005),
    "top_n_sigma": (0.0, 5.0, 0.1),
    "xtc_probability": (0.0, 1.0, 0.05),
    "xtc_threshold": (0.0, 0.5, 0.01),
    "dynatemp_range": (0.0, 2.0, 0.05),
    "dynatemp_exponent": (0.1, 4.0, 0.1),
    "dry_multiplier": (0.0, 3.0, 0.05),
    "dry_base": (1.0, 4.0, 0.05),
    "dry_allowed_length": (1, 10, 1),
    "dry_penalty_last_n": (-1, limits.MAX_NEW_TOKENS + limits.MAX_PROMPT_TOKENS, 1),
    "mirostat_tau": (0.0, 15.0, 0.5),
    "mirostat_eta": (0.0, 1.0, 0.01),
}
CONTROL_NAMES = {"top_k": "top-k", "top_p": "top-p", "min_p": "min-p", "order": "sampler order",  # as the page labels them
                 "logit_bias": "logit bias", "repetition_penalty": "repetition penalty",
                 "frequency_penalty": "frequency penalty", "presence_penalty": "presence penalty",
                 "penalty_last_n": "penalty window", "no_repeat_ngram_size": "no-repeat n-gram",
                 "min_tokens": "min tokens", "typical_p": "typical-p", "epsilon_cutoff": "epsilon cutoff",
                 "eta_cutoff": "eta cutoff", "top_n_sigma": "top-n-sigma", "xtc_probability": "XTC probability",
                 "xtc_threshold": "XTC threshold", "dynatemp_range": "dynamic temperature range",
                 "dynatemp_exponent": "dynamic temperature exponent", "dry_multiplier": "DRY multiplier",
                 "dry_base": "DRY base", "dry_allowed_length": "DRY allowed length",
                 "dry_penalty_last_n": "DRY window", "dry_sequence_breakers": "DRY sequence breakers",
                 "mirostat": "mirostat", "mirostat_tau": "mirostat tau", "mirostat_eta": "mirostat eta",
                 "chain": "custom chain"}
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
    return replace(settings, mirostat_mu=records[-1].mirostat_mu)


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
