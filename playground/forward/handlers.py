"""The "Forward pass" tab's event handlers, and the views of a trace they return.

Each handler takes the tab's components (a ForwardComponents, from `components`) and the service first,
then the values of its event's inputs by name, and returns {component: value}: a component left out is
not redrawn. `tab` binds the first arguments with common/handlers.py:bind, so an event's function keeps the handler's
name (Gradio names an event's endpoint after it). The handlers of public endpoints (run_trace,
change_block, sample_from_here) have no docstring, as before: Gradio would show it as the endpoint's
description.
"""

from __future__ import annotations

import weakref

import gradio as gr

from model_service.records import validation
from playground import limits

from ..common.errors import unchanged, user_error
from ..common.figures import empty_figure
from ..common.i18n import LESSON_PROMPTS, swapped_default, tr
from . import charts as tc
from . import text as tt
from .components import ALL_HEADS, ForwardComponents
from .lesson_numbers import lesson_markdown


def status_line(trace, lang: str = "en") -> str:
    return tr(lang, "forward.status.traced", tokens=len(trace.tokens), blocks=trace.shapes.num_layers,
              model=tt.escape_html(trace.model), forward_ms=trace.forward_ms, trace_ms=trace.trace_ms)


def head_choices(lang: str, num_heads: int = 0) -> list:
    return [(tr(lang, "forward.head.all"), ALL_HEADS)] + [(tr(lang, "forward.head", head=h + 1), h) for h in range(num_heads)]


# ---- the views of a trace -----------------------------------------------------------------------------------


def attention_views(c: ForwardComponents, trace, chosen_head, lang) -> dict:
    try:
        h = validation.number("head", chosen_head, integer=True, low=ALL_HEADS, high=10_000, blank=ALL_HEADS)
    except ValueError as e:
        raise user_error(e, lang) from None
    h = None if h == ALL_HEADS else h
    return {c.attention_md: tt.attention_markdown(trace.attention, trace.attention_note, lang),
            c.attention_plot: tc.attention_figure(trace.attention, h, trace.attention_note, lang, trace.tokens)}


def head_update(trace, chosen_head, lang):
    a = trace.attention
    if a is None:
        return gr.update(choices=head_choices(lang), value=ALL_HEADS)
    keep = chosen_head is not None and -1 <= chosen_head < a.num_heads
    return gr.update(choices=head_choices(lang, a.num_heads), value=chosen_head if keep else ALL_HEADS)


def render(c: ForwardComponents, trace, chosen_head=ALL_HEADS, lang="en") -> dict:
    """Every view of a trace."""
    a = trace.attention
    return {
        c.state: trace, c.status: status_line(trace, lang), c.tokens: tt.tokens_html(trace, lang),
        c.input_md: tt.input_markdown(trace, lang), c.shapes_md: tt.shapes_markdown(trace, lang),
        c.embedding_md: tt.embedding_markdown(trace, lang=lang), c.stream_md: tt.stream_markdown(trace, lang),
        c.residual_plot: tc.residual_figure(trace, lang=lang),
        c.block: gr.update(maximum=trace.num_layers, value=a.block if a else 1, interactive=a is not None),
        c.head: head_update(trace, chosen_head, lang), **attention_views(c, trace, chosen_head, lang),
        c.output_md: tt.output_markdown(trace, lang), c.predictions_plot: tc.predictions_figure(trace, lang),
        c.teacher_plot: tc.teacher_figure(trace, lang=lang), c.cost_md: tt.cost_markdown(trace, lang),
        c.cost_plot: tc.cost_figure(trace, lang=lang), c.lens_md: tt.lens_markdown(trace, lang),
        c.lens_plot: tc.lens_figure(trace, lang),
    }


def placeholders(c: ForwardComponents, lang) -> dict:
    """The views before the first trace, in `lang`."""
    return {
        c.status: tr(lang, "forward.status.ready"), c.head: gr.update(choices=head_choices(lang)),
        c.input_md: tr(lang, "forward.lesson.input"), c.embedding_md: tr(lang, "forward.lesson.embedding"),
        c.stream_md: tr(lang, "forward.lesson.blocks"), c.attention_md: tr(lang, "forward.lesson.attention"),
        c.output_md: tr(lang, "forward.lesson.output"), c.cost_md: tr(lang, "forward.lesson.cost"),
        c.lens_md: tr(lang, "forward.lesson.lens"),
        c.residual_plot: empty_figure(tr(lang, "forward.empty.residual"), 260),
        c.attention_plot: empty_figure(tr(lang, "forward.empty.attention"), 260),
        c.predictions_plot: empty_figure(tr(lang, "forward.empty.predictions")),
        c.teacher_plot: empty_figure(tr(lang, "forward.empty.teacher"), 170),
        c.cost_plot: empty_figure(tr(lang, "forward.empty.cost")), c.lens_plot: empty_figure(tr(lang, "forward.empty.lens")),
    }


def lesson_table(c: ForwardComponents, lang, known) -> dict:
    """The lesson-numbers table in `lang`, once the watcher drew it (it knows the model's numbers)."""
    return {} if known is None else {c.lesson_md: lesson_markdown(*known, lang)}


def stale(service, current) -> bool:
    """A trace of another model than the one serving now (the host switched it)."""
    try:
        return current.model != service.info.name
    except RuntimeError:  # loading: keep what is shown
        return False


# ---- the trace a page has last made ---------------------------------------------------------------------------

# by the page's session: a language redraw that read the tab's State before a trace of the same page ended draws
# that trace, not the placeholders over it (a page opening the tab as it sets its language: clean run 58). Held
# weakly: the page's State keeps its trace alive, and nothing here outlives it.
_LAST_TRACE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def remember(request, trace):
    session = getattr(request, "session_hash", None)
    if session:
        _LAST_TRACE[session] = trace
    return trace


def last_trace(request, service):
    """The page's last trace, if it is of the model serving now (None: none, another model's, or no page)."""
    session = getattr(request, "session_hash", None)
    trace = _LAST_TRACE.get(session) if session else None
    return None if trace is None or (service is not None and stale(service, trace)) else trace


# ---- the handlers -------------------------------------------------------------------------------------------


def new_model(c: ForwardComponents, service, info, first: bool, lang="en") -> dict:
    """The room's model changed (or the page just learnt which it is): its depth sets the block
    slider's range, its sizes the lesson table; an old trace is dropped and the views go back to
    what they show before a trace, in the page's language."""
    L, ids = info.num_layers, len(service.encode(limits.LESSON_PROMPT))
    out = {c.block: gr.update(maximum=L, value=(L + 1) // 2), c.lesson_md: lesson_markdown(info, ids, lang),
           c.numbers: (info, ids)}
    if not first:
        out |= placeholders(c, lang) | {
            c.state: None, c.tokens: "", c.shapes_md: "",
            c.head: gr.update(choices=head_choices(lang), value=ALL_HEADS),
            c.status: tr(lang, "forward.status.new_model", model=tt.escape_html(info.name))}
    return out


def run_trace(c: ForwardComponents, service, text, use_chat, chosen_block, chosen_head, lang="en",
              request: gr.Request = None):
    try:
        text = validation.text("prompt", text)
        use_chat = validation.boolean("chat template", use_chat)
        n = service.info.num_layers
        chosen_block = validation.number("block", chosen_block, integer=True, low=1, high=n, blank=(n + 1) // 2)
        chosen_head = validation.number("head", chosen_head, integer=True, low=ALL_HEADS, high=10_000, blank=ALL_HEADS)
        trace = remember(request, service.trace(text, use_chat, block=chosen_block))
    except (ValueError, RuntimeError) as e:
        raise user_error(e, lang) from None
    return render(c, trace, chosen_head, lang)


def trace_if_new(c: ForwardComponents, service, text, use_chat, chosen_block, chosen_head, current, lang="en",
                 request: gr.Request = None):
    """For a tab-select event: trace only if the shown trace is not of this prompt (and model) already.
    The box may still hold the other language's lesson prompt (the language's redraw can reach the
    server after this event): the page's language decides, as change_language would."""
    swapped = swapped_default(text, lang, LESSON_PROMPTS)
    text = swapped or text
    if current is not None and (current.prompt, current.chat) == (text, bool(use_chat)) and not stale(service, current):
        return unchanged(c.state) | ({c.prompt: swapped} if swapped else {})
    try:  # the slider may still show another model's block (its new range is on its way): the middle one then
        validation.number("block", chosen_block, integer=True, low=1, high=service.info.num_layers)
    except (ValueError, RuntimeError):
        chosen_block = None
    traced = run_trace(c, service, text, use_chat, chosen_block, chosen_head, lang, request)
    return traced | ({c.prompt: swapped} if swapped else {})


def change_block(c: ForwardComponents, service, current, chosen_block, chosen_head, lang="en"):
    if current is None:
        return unchanged(c.state)
    if stale(service, current):  # the page learns of the new model within a tick; until then, say so
        raise user_error(tr(lang, "forward.status.stale"))
    try:
        chosen_block = validation.number("block", chosen_block, integer=True, low=1, high=current.num_layers)
        attention = service.trace_attention(current.prompt, current.chat, chosen_block)
    except (ValueError, RuntimeError) as e:
        raise user_error(e, lang) from None
    trace = current.with_attention(attention)
    return {c.state: trace, **attention_views(c, trace, chosen_head, lang)}


def change_head(c: ForwardComponents, current, chosen_head, lang="en"):
    if current is None:
        return unchanged(c.attention_md)
    return attention_views(c, current, chosen_head, lang)


def change_language(c: ForwardComponents, service, lang, current, chosen_head, known=None, current_prompt=None,
                    request: gr.Request = None):
    """Redraw every view in the new language from the trace (and numbers) already made: no model work;
    the lesson prompt in the box becomes the new language's, unless the learner typed another. With no trace in
    the State it read, the page's trace made meanwhile (last_trace), else the placeholders."""
    swapped = swapped_default(current_prompt, lang, LESSON_PROMPTS)
    out = lesson_table(c, lang, known) | ({c.prompt: swapped} if swapped is not None else {})
    current = current if current is not None else last_trace(request, service)
    if current is None:
        return placeholders(c, lang) | out
    views = render(c, current, chosen_head, lang)
    del views[c.state], views[c.block]  # the same trace and slider: nothing to send
    return views | out


def sample_from_here(lab_prompt, lab_chat, tabs, lab_tab_id, text, use_chat):
    # the lab's prompt and chat box take this prompt; with the page's tabs given, the lab's tab opens
    out = {lab_prompt: text, lab_chat: bool(use_chat)}
    return out | ({tabs: gr.Tabs(selected=lab_tab_id)} if tabs is not None else {})
