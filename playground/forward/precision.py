"""The Forward pass tab's precision check, under the logits: what bf16, int8 or int4 weights do to the next token on
the prompt on screen, beside the same weights in float32 (the service's PrecisionEffect). When the host chose a
precision (--precision int4 on a laptop) it is shown at each trace; otherwise a learner picks one. Its components,
its text (every token escaped), its handlers and its events; no torch."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from model_service.records import validation
from model_service.records.precision import PrecisionEffect
from playground import limits

from ..common.errors import in_language
from ..common.handlers import bind
from ..common.i18n import T, catalogue, language, tr
from ..common.text import escape_html, piece_markdown, prob_text, show_token

CHOICES = ("bf16", "int8", "int4")  # what a learner may compare with float32


@dataclass(frozen=True)
class PrecisionComponents:
    pick: gr.Radio  # the precision compared (the host's when it chose one)
    md: gr.Markdown  # the comparison; hidden until there is one
    effect: gr.State  # the PrecisionEffect on screen, redrawn in another language


def build() -> PrecisionComponents:
    gr.Markdown(T("precision.heading"))
    pick = gr.Radio(list(CHOICES), value=None, label=T("precision.pick"), elem_id="fw-precision-pick")
    return PrecisionComponents(pick, gr.Markdown(visible=False, elem_id="fw-precision"), gr.State(None))


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


def chosen_by_host(service) -> str | None:
    """The precision the host chose for the room's model (--precision, other than its device's default), or None:
    float32 on a CPU, bf16 on a GPU, or still loading (the trace's own message says so)."""
    try:
        info = service.info
    except RuntimeError:
        return None
    default = limits.PRECISION_DEFAULT.get(info.device.split(":")[0], "fp32")
    return info.precision if info.precision and info.precision != default else None


def show(c: PrecisionComponents, service, trace, pick, lang: str = "en") -> dict:
    """A new trace or a pick: the comparison for the prompt on screen. The host's own choice when nothing is picked
    (shown at every trace); otherwise nothing (hidden) until a learner picks a precision."""
    auto = pick is None
    pick = chosen_by_host(service) if auto else pick
    if trace is None or pick is None:
        return {c.pick: gr.update(value=pick), c.md: gr.update(visible=False), c.effect: None}
    try:
        effect = service.precision_effect(trace.prompt, trace.chat, pick)
    except (ValueError, RuntimeError) as e:  # a check the model cannot offer hides itself unless it was asked for
        hidden = auto and isinstance(e, validation.Unavailable)
        return {c.pick: gr.update(value=pick), c.effect: None,
                c.md: gr.update(value=escape_html(in_language(e, lang)), visible=not hidden)}
    return {c.pick: gr.update(value=pick), c.effect: effect,
            c.md: gr.update(value=precision_markdown(effect, lang), visible=True)}


def redraw(c: PrecisionComponents, effect, lang: str = "en") -> dict:
    """Another language: the comparison on screen in it (nothing to compute)."""
    return {c.md: gr.update() if effect is None else precision_markdown(effect, lang)}


def wire(c: PrecisionComponents, service, trace_state: gr.State, language: gr.Radio | None) -> None:
    lang = [language] if language is not None else []
    options = {"api_visibility": "private", "preprocess": False}
    handler, inputs, outputs = bind(show, c, service), [trace_state, c.pick, *lang], [c.pick, c.md, c.effect]
    # "multiple": the trace state also starts the interventions' new_trace (tests/unit/page/test_triggers.py)
    trace_state.change(handler, inputs, outputs, show_progress="hidden", trigger_mode="multiple", **options)
    c.pick.input(handler, inputs, outputs, show_progress="minimal", trigger_mode="always_last", **options)
    if language is not None:
        language.change(bind(redraw, c), [c.effect, language], [c.md], show_progress="hidden",
                        trigger_mode="multiple", **options)


__all__ = ["CHOICES", "PrecisionComponents", "build", "chosen_by_host", "precision_markdown", "redraw", "show", "wire"]
