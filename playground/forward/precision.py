"""The Forward pass tab's precision check, under the logits: what bf16, int8 or int4 weights do to the next token on
the prompt on screen, beside the same weights in float32 (the service's PrecisionEffect). A model served below
float32 (the host's --precision) shows its own at each trace; on a float32 model a learner picks one. Its components,
its text (every token escaped), its handlers and its events; no torch."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from model_service.records.precision import PrecisionEffect
from playground import limits

from ..common.handlers import bind
from ..common.i18n import T, catalogue, language, tr
from ..common.text import escape_html, piece_markdown, prob_text, show_token

CHOICES = ("bf16", "int8", "int4")  # what a learner may compare with float32


@dataclass(frozen=True)
class PrecisionComponents:
    pick: gr.Radio  # the precision compared (the model's own when it runs below float32)
    md: gr.Markdown  # the comparison; hidden until there is one


def build() -> PrecisionComponents:
    gr.Markdown(T("precision.heading"))
    pick = gr.Radio(list(CHOICES), value=None, label=T("precision.pick"), elem_id="fw-precision-pick")
    return PrecisionComponents(pick, gr.Markdown(visible=False, elem_id="fw-precision"))


def _token(token, lang: str) -> str:
    return f"<code>{piece_markdown(show_token(token, lang=lang))}</code>"


def described(precision: str, lang: str = "en") -> str:
    """The mode in the page's language (the record's `described` is the service's English)."""
    key = f"precision.described.{precision}"
    return tr(lang, key, group=limits.INT4_GROUP) if key in catalogue(language(lang)) else escape_html(precision)


def precision_markdown(e: PrecisionEffect, lang: str = "en") -> str:
    same = (tr(lang, "precision.same", token=_token(e.greedy, lang)) if e.same_greedy else
            tr(lang, "precision.differs", token=_token(e.greedy, lang), fp32=_token(e.greedy_fp32, lang)))
    key = "precision.summary" if e.precision == e.running else "precision.summary_other"
    lines = [tr(lang, key, precision=described(e.precision, lang), running=described(e.running, lang),
                max=e.max_abs_dlogit, mean=e.mean_abs_dlogit, same=same), "",
             tr(lang, "precision.table", precision=escape_html(e.precision)), "|---|---:|---:|---:|---:|"]
    lines += [f"| {_token(r.token, lang)} | {prob_text(r.prob)} | {prob_text(r.prob_fp32)} | {r.rank} | {r.rank_fp32} |"
              for r in e.top]
    note = "precision.note" if e.precision == e.running else "precision.note_other"
    lines += ["", tr(lang, note, precision=escape_html(e.precision))]
    return "\n".join(lines)


def running(service) -> str | None:
    """The precision the model serves in, or None while it loads (the trace's own message says so)."""
    try:
        return service.info.precision or "fp32"
    except RuntimeError:
        return None


def show(c: PrecisionComponents, service, trace, pick, lang: str = "en") -> dict:
    """A new trace, a pick or a language: the comparison for the prompt on screen. The model's own precision when it
    runs below float32 and nothing is picked; nothing (hidden) on a float32 model until a learner picks one."""
    serves = running(service)
    if pick is None and serves not in (None, "fp32"):
        pick = serves
    if trace is None or pick is None:
        return {c.pick: gr.update(value=pick), c.md: gr.update(visible=False)}
    try:
        effect = service.precision_effect(trace.prompt, trace.chat, pick)
    except (ValueError, RuntimeError) as e:
        return {c.pick: gr.update(value=pick), c.md: gr.update(value=escape_html(str(e)), visible=True)}
    return {c.pick: gr.update(value=pick), c.md: gr.update(value=precision_markdown(effect, lang), visible=True)}


def wire(c: PrecisionComponents, service, trace_state: gr.State, language: gr.Radio | None) -> None:
    lang = [language] if language is not None else []
    # "multiple": the trace state also starts the interventions' new_trace (tests/unit/page/test_triggers.py)
    options = {"api_visibility": "private", "preprocess": False, "trigger_mode": "multiple"}
    handler, inputs, outputs = bind(show, c, service), [trace_state, c.pick, *lang], [c.pick, c.md]
    trace_state.change(handler, inputs, outputs, show_progress="hidden", **options)
    c.pick.input(handler, inputs, outputs, show_progress="minimal", **options)
    if language is not None:
        language.change(handler, inputs, outputs, show_progress="hidden", **options)


__all__ = ["CHOICES", "PrecisionComponents", "build", "precision_markdown", "show", "wire"]
