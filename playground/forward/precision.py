"""The Forward pass tab's precision line: what the host's --precision (int4, int8, bf16) does to the next token on the
prompt on screen, beside the same weights in float32 (the service's PrecisionEffect). Hidden when the model runs
in float32. Its component, its text (every token escaped), its handler and its events; no torch."""

from __future__ import annotations

import gradio as gr

from model_service.records.precision import PrecisionEffect
from playground import limits

from ..common.handlers import bind
from ..common.i18n import catalogue, language, tr
from ..common.text import escape_html, piece_markdown, prob_text, show_token


def build() -> gr.Markdown:
    return gr.Markdown(visible=False, elem_id="fw-precision")


def _token(token, lang: str) -> str:
    return f"<code>{piece_markdown(show_token(token, lang=lang))}</code>"


def described(precision: str, lang: str = "en") -> str:
    """The mode in the page's language (the record's `described` is the service's English)."""
    key = f"precision.described.{precision}"
    return tr(lang, key, group=limits.INT4_GROUP) if key in catalogue(language(lang)) else escape_html(precision)


def precision_markdown(e: PrecisionEffect, lang: str = "en") -> str:
    same = (tr(lang, "precision.same", token=_token(e.greedy, lang)) if e.same_greedy else
            tr(lang, "precision.differs", token=_token(e.greedy, lang), fp32=_token(e.greedy_fp32, lang)))
    lines = [tr(lang, "precision.heading"),
             tr(lang, "precision.summary", precision=described(e.precision, lang), max=e.max_abs_dlogit,
                mean=e.mean_abs_dlogit, same=same), "",
             tr(lang, "precision.table", precision=escape_html(e.precision)), "|---|---:|---:|---:|---:|"]
    lines += [f"| {_token(r.token, lang)} | {prob_text(r.prob)} | {prob_text(r.prob_fp32)} | {r.rank} | {r.rank_fp32} |"
              for r in e.top]
    lines += ["", tr(lang, "precision.note", precision=escape_html(e.precision))]
    return "\n".join(lines)


def runs_below_fp32(service) -> bool:
    try:
        return service.info.precision not in ("", "fp32")
    except RuntimeError:  # still loading: the trace's own message says so
        return False


def show(md: gr.Markdown, service, trace, lang: str = "en") -> dict:
    """A new trace (or language): the comparison for its prompt, or hidden in float32."""
    if trace is None or not runs_below_fp32(service):
        return {md: gr.update(visible=False)}
    try:
        effect = service.precision_effect(trace.prompt, trace.chat)
    except (ValueError, RuntimeError) as e:
        return {md: gr.update(value=escape_html(str(e)), visible=True)}
    return {md: gr.update(value=precision_markdown(effect, lang), visible=True)}


def wire(md: gr.Markdown, service, trace_state: gr.State, language: gr.Radio | None) -> None:
    lang = [language] if language is not None else []
    # "multiple": the trace state also starts the interventions' new_trace (tests/unit/page/test_triggers.py)
    options = {"api_visibility": "private", "show_progress": "hidden", "preprocess": False, "trigger_mode": "multiple"}
    trace_state.change(bind(show, md, service), [trace_state, *lang], [md], **options)
    if language is not None:
        language.change(bind(show, md, service), [trace_state, language], [md], **options)


__all__ = ["build", "precision_markdown", "show", "wire"]
