"""A lab run as the lab's controls show it, and as a link that opens it: one function for the page (its share
link, the Branches panel, run files, Reset) and the HTTP API (each OpenAI answer's lab link).

    lab_link("http://127.0.0.1:7860", run_controls("The capital of France is", False, settings, 48, ()))

Pure functions (no gradio, no torch). A link leaves out what equals the lab's defaults, so it stays short; the
lab's reader of links, with each field's check, is lab/deep_link.py (its fields are LINK_FIELDS, in order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlencode

from model_service.records import validation
from model_service.records.knobs import LAB_KNOBS, TEXT_KNOBS
from model_service.records.settings import SamplingSettings
from playground import limits

from .address import absolute
from .i18n import language

_OFF = SamplingSettings()  # every filter off: the defaults the controls start from
# a link's parameters: the lesson's ten controls, the knobs after them in the rows' order (records/knobs.py), and
# the Branches panel's forced tokens
LINK_FIELDS = ("prompt", "chat", "temperature", "top_k", "top_p", "min_p", "seed", "max_new_tokens", "stop", "order",
               *LAB_KNOBS, "branch")


def knob_values(settings: SamplingSettings) -> dict:
    """The lab's knob controls' values (after the lesson's ten) as the controls, links and run files show them:
    numbers, and text for the bias ("13:-100, 42:5"), the breakers ("\\n|:" as the stop box writes them) and the
    chain ("top_k, temperature")."""
    return {**{name: getattr(settings, name) for name in LAB_KNOBS if name not in TEXT_KNOBS},
            "logit_bias": validation.format_logit_bias(settings.logit_bias),
            "dry_sequence_breakers": validation.format_stop_text(settings.dry_sequence_breakers),
            "chain": ", ".join(settings.chain)}


# the lab's controls as a fresh page shows them
CONTROL_DEFAULTS = dict(
    temperature=_OFF.temperature, top_k=_OFF.top_k, top_p=_OFF.top_p, min_p=_OFF.min_p, seed=None,
    order=_OFF.order, max_new_tokens=limits.DEFAULT_MAX_NEW_TOKENS, **knob_values(_OFF),
)
LINK_DEFAULTS = {**CONTROL_DEFAULTS, "prompt": limits.LESSON_PROMPT, "chat": False, "seed": "", "stop": "", "branch": ""}


def run_controls(prompt: str, chat: bool, settings: SamplingSettings, max_new_tokens: int,
                 stop: Sequence[str]) -> dict:
    """The lab's control values (its keys) that make this run, as the boxes show them."""
    s = settings
    return {"prompt": prompt, "chat": chat, "temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p,
            "min_p": s.min_p, "seed": "" if s.seed is None else str(s.seed), "max_new_tokens": max_new_tokens,
            "stop": validation.format_stop_text(stop), "order": s.order, **knob_values(s)}


def lab_query(values: Mapping, lang: str | None = None, host_lang: str | None = None) -> str:
    """The query string for the lab's controls (defaults left out keeps links short), and the page's
    language `lang` (the room then reads what the host saw, whatever their browsers' languages). An English
    link stays as short as before unless the host's page opens in another language (`host_lang`, --lang)."""
    out = {}
    for name in LINK_FIELDS:
        value = values.get(name)
        if value is None or (name != "prompt" and value == LINK_DEFAULTS.get(name, object())):
            continue
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    if lang is not None and not language(lang) == language(host_lang) == "en":
        out["lang"] = language(lang)
    return urlencode(out)


def lab_link(base: str, values: Mapping, lang: str | None = None) -> str:
    """The absolute link that opens the lab with these controls (base: the page's public address)."""
    return absolute(base, lab_query(values, lang))


__all__ = ["CONTROL_DEFAULTS", "LINK_DEFAULTS", "LINK_FIELDS", "knob_values", "lab_link", "lab_query", "run_controls"]
