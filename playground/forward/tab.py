"""The "Forward pass" tab: lesson 10 on the live model, laid out as the lesson's journey.

Input (token chips with ids) → Embedding (lookup rows) → the blocks (residual stream, updates,
attention) → Output (logits at every position, their memory cost) → Logit lens → Sample from here.
Layout and wiring only: the service returns a Trace record, `text` and `charts` draw it.
The record stays in gr.State, so picking another head redraws without touching the model; picking
another block asks the service for that block's attention only. Static text is `T(key)`; every view
built here takes the header's language, and a change of language redraws the views from the State.
A component whose value the server replaces starts from tr(DEFAULT, ...), never T(): Gradio's frontend
translates a T() value again at every switch of language, over whatever the server has put there since
(its set_data keeps the key), so a redrawn trace would lose the race to the bare lesson text.
"""

from __future__ import annotations

import gradio as gr

from model_service import limits
from model_service.records import validation

from ..common.errors import unchanged, user_error
from ..common.figures import empty_figure
from ..common.i18n import DEFAULT, LESSON_PROMPTS, T, swapped_default, tr
from . import charts as tc
from . import text as tt
from .lesson_numbers import lesson_markdown

ALL_HEADS = -1
DEFAULT_BLOCKS = 30  # the slider's range until the first trace tells the real depth



def status_line(trace, lang: str = "en") -> str:
    return tr(lang, "forward.status.traced", tokens=len(trace.tokens), blocks=trace.shapes.num_layers,
              model=tt.escape_html(trace.model), forward_ms=trace.forward_ms, trace_ms=trace.trace_ms)


def head_choices(lang: str, num_heads: int = 0) -> list:
    return [(tr(lang, "forward.head.all"), ALL_HEADS)] + [(tr(lang, "forward.head", head=h + 1), h) for h in range(num_heads)]


def build_forward_tab(service, lab: dict | None = None, tabs: gr.Tabs | None = None, lab_tab_id: str = "lab",
                      language: gr.Radio | None = None) -> dict:
    """Create and wire the tab's components in the current Blocks/Tab context.

    lab: the dict of build_lab (its "prompt" and "chat" receive "Sample from here").
    tabs: the page's gr.Tabs; when given, "Sample from here" also switches to the tab `lab_tab_id`.
    language: the header's language picker (its value "en" or "vi"); without it the views are English.
    """
    state = gr.State(None)
    gr.Markdown(T("forward.intro"))
    with gr.Row(equal_height=False):
        prompt = gr.Textbox(limits.LESSON_PROMPT, label=T("forward.prompt"), lines=2, scale=4, elem_id="fw-prompt")
        with gr.Column(scale=1, min_width=220):
            chat = gr.Checkbox(False, label=T("forward.chat"), elem_id="fw-chat")
            trace_btn = gr.Button(T("forward.trace"), variant="primary", elem_id="fw-trace")
    status = gr.Markdown(tr(DEFAULT, "forward.status.ready"), elem_id="fw-status")

    gr.Markdown(T("forward.section.input"))
    tokens = gr.HTML(elem_id="fw-tokens")
    input_md = gr.Markdown(tr(DEFAULT, "forward.lesson.input"), elem_id="fw-input")
    shapes_md = gr.Markdown(elem_id="fw-shapes")
    lesson_md = gr.Markdown(elem_id="fw-lesson-numbers")
    numbers = gr.State(None)  # (ModelInfo, the lesson prompt's id count): the table redrawn in another language

    gr.Markdown(T("forward.section.embedding"))
    embedding_md = gr.Markdown(tr(DEFAULT, "forward.lesson.embedding"), elem_id="fw-embedding")

    gr.Markdown(T("forward.section.blocks"))
    stream_md = gr.Markdown(tr(DEFAULT, "forward.lesson.blocks"), elem_id="fw-stream")
    residual_plot = gr.Plot(empty_figure(tr(DEFAULT, "forward.empty.residual"), 260), show_label=False, elem_id="fw-residual")
    attention_md = gr.Markdown(tr(DEFAULT, "forward.lesson.attention"), elem_id="fw-attention-text")
    with gr.Row():
        block = gr.Slider(1, DEFAULT_BLOCKS, (DEFAULT_BLOCKS + 1) // 2, step=1, label=T("forward.block.label"),
                          elem_id="fw-block", scale=3)
        head = gr.Dropdown([(T("forward.head.all"), ALL_HEADS)], value=ALL_HEADS, label=T("forward.head.label"),
                           elem_id="fw-head", scale=1)
    attention_plot = gr.Plot(empty_figure(tr(DEFAULT, "forward.empty.attention"), 260), show_label=False, elem_id="fw-attention")

    gr.Markdown(T("forward.section.output"))
    output_md = gr.Markdown(tr(DEFAULT, "forward.lesson.output"), elem_id="fw-output")
    predictions_plot = gr.Plot(empty_figure(tr(DEFAULT, "forward.empty.predictions")), show_label=False, elem_id="fw-predictions")
    teacher_plot = gr.Plot(empty_figure(tr(DEFAULT, "forward.empty.teacher"), 170), show_label=False, elem_id="fw-teacher")
    cost_md = gr.Markdown(tr(DEFAULT, "forward.lesson.cost"), elem_id="fw-cost-text")
    cost_plot = gr.Plot(empty_figure(tr(DEFAULT, "forward.empty.cost")), show_label=False, elem_id="fw-cost")

    gr.Markdown(T("forward.section.lens"))
    lens_md = gr.Markdown(tr(DEFAULT, "forward.lesson.lens"), elem_id="fw-lens-text")
    lens_plot = gr.Plot(empty_figure(tr(DEFAULT, "forward.empty.lens")), show_label=False, elem_id="fw-lens")

    gr.Markdown(T("forward.section.sample"))
    sample_btn = gr.Button(T("forward.sample"), elem_id="fw-sample")

    def attention_views(trace, chosen_head, lang) -> dict:
        try:
            h = validation.number("head", chosen_head, integer=True, low=ALL_HEADS, high=10_000, blank=ALL_HEADS)
        except ValueError as e:
            raise user_error(e, lang) from None
        h = None if h == ALL_HEADS else h
        return {attention_md: tt.attention_markdown(trace.attention, trace.attention_note, lang),
                attention_plot: tc.attention_figure(trace.attention, h, trace.attention_note, lang, trace.tokens)}

    def head_update(trace, chosen_head, lang):
        a = trace.attention
        if a is None:
            return gr.update(choices=head_choices(lang), value=ALL_HEADS)
        keep = chosen_head is not None and -1 <= chosen_head < a.num_heads
        return gr.update(choices=head_choices(lang, a.num_heads), value=chosen_head if keep else ALL_HEADS)

    def render(trace, chosen_head=ALL_HEADS, lang="en") -> dict:
        """Every view of a trace."""
        a = trace.attention
        return {
            state: trace, status: status_line(trace, lang), tokens: tt.tokens_html(trace, lang),
            input_md: tt.input_markdown(trace, lang), shapes_md: tt.shapes_markdown(trace, lang),
            embedding_md: tt.embedding_markdown(trace, lang=lang), stream_md: tt.stream_markdown(trace, lang),
            residual_plot: tc.residual_figure(trace, lang=lang),
            block: gr.update(maximum=trace.num_layers, value=a.block if a else 1, interactive=a is not None),
            head: head_update(trace, chosen_head, lang), **attention_views(trace, chosen_head, lang),
            output_md: tt.output_markdown(trace, lang), predictions_plot: tc.predictions_figure(trace, lang),
            teacher_plot: tc.teacher_figure(trace, lang=lang), cost_md: tt.cost_markdown(trace, lang),
            cost_plot: tc.cost_figure(trace, lang=lang), lens_md: tt.lens_markdown(trace, lang),
            lens_plot: tc.lens_figure(trace, lang),
        }

    def placeholders(lang) -> dict:
        """The views before the first trace, in `lang`."""
        return {
            status: tr(lang, "forward.status.ready"), head: gr.update(choices=head_choices(lang)),
            input_md: tr(lang, "forward.lesson.input"), embedding_md: tr(lang, "forward.lesson.embedding"),
            stream_md: tr(lang, "forward.lesson.blocks"), attention_md: tr(lang, "forward.lesson.attention"),
            output_md: tr(lang, "forward.lesson.output"), cost_md: tr(lang, "forward.lesson.cost"),
            lens_md: tr(lang, "forward.lesson.lens"),
            residual_plot: empty_figure(tr(lang, "forward.empty.residual"), 260),
            attention_plot: empty_figure(tr(lang, "forward.empty.attention"), 260),
            predictions_plot: empty_figure(tr(lang, "forward.empty.predictions")),
            teacher_plot: empty_figure(tr(lang, "forward.empty.teacher"), 170),
            cost_plot: empty_figure(tr(lang, "forward.empty.cost")), lens_plot: empty_figure(tr(lang, "forward.empty.lens")),
        }

    outputs = [state, status, tokens, input_md, shapes_md, embedding_md, stream_md, residual_plot, block, head,
               attention_md, attention_plot, output_md, predictions_plot, teacher_plot, cost_md, cost_plot, lens_md,
               lens_plot]
    lang_input = [language] if language is not None else []


    def new_model(info, first: bool, lang="en") -> dict:
        """The room's model changed (or the page just learnt which it is): its depth sets the block
        slider's range, its sizes the lesson table; an old trace is dropped and the views go back to
        what they show before a trace, in the page's language."""
        L, ids = info.num_layers, len(service.encode(limits.LESSON_PROMPT))
        out = {block: gr.update(maximum=L, value=(L + 1) // 2), lesson_md: lesson_markdown(info, ids, lang),
               numbers: (info, ids)}
        if not first:
            out |= placeholders(lang) | {
                state: None, tokens: "", shapes_md: "", head: gr.update(choices=head_choices(lang), value=ALL_HEADS),
                status: tr(lang, "forward.status.new_model", model=tt.escape_html(info.name))}
        return out

    def run_trace(text, use_chat, chosen_block, chosen_head, lang="en"):
        try:
            text = validation.text("prompt", text)
            use_chat = validation.boolean("chat template", use_chat)
            n = service.info.num_layers
            chosen_block = validation.number("block", chosen_block, integer=True, low=1, high=n, blank=(n + 1) // 2)
            chosen_head = validation.number("head", chosen_head, integer=True, low=ALL_HEADS, high=10_000, blank=ALL_HEADS)
            trace = service.trace(text, use_chat, block=chosen_block)
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang) from None
        return render(trace, chosen_head, lang)

    def stale(current) -> bool:
        """A trace of another model than the one serving now (the host switched it)."""
        try:
            return current.model != service.info.name
        except RuntimeError:  # loading: keep what is shown
            return False

    def trace_if_new(text, use_chat, chosen_block, chosen_head, current, lang="en"):
        """For a tab-select event: trace only if the shown trace is not of this prompt (and model) already.
        The box may still hold the other language's lesson prompt (the language's redraw can reach the
        server after this event): the page's language decides, as change_language would."""
        swapped = swapped_default(text, lang, LESSON_PROMPTS)
        text = swapped or text
        if current is not None and (current.prompt, current.chat) == (text, bool(use_chat)) and not stale(current):
            return unchanged(state) | ({prompt: swapped} if swapped else {})
        try:  # the slider may still show another model's block (its new range is on its way): the middle one then
            validation.number("block", chosen_block, integer=True, low=1, high=service.info.num_layers)
        except (ValueError, RuntimeError):
            chosen_block = None
        return run_trace(text, use_chat, chosen_block, chosen_head, lang) | ({prompt: swapped} if swapped else {})

    def change_block(current, chosen_block, chosen_head, lang="en"):
        if current is None:
            return unchanged(state)
        if stale(current):  # the page learns of the new model within a tick; until then, say so
            raise user_error(tr(lang, "forward.status.stale"))
        try:
            chosen_block = validation.number("block", chosen_block, integer=True, low=1, high=current.num_layers)
            attention = service.trace_attention(current.prompt, current.chat, chosen_block)
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang) from None
        trace = current.with_attention(attention)
        return {state: trace, **attention_views(trace, chosen_head, lang)}

    def change_head(current, chosen_head, lang="en"):
        if current is None:
            return unchanged(attention_md)
        return attention_views(current, chosen_head, lang)

    def lesson_table(lang, known) -> dict:
        """The lesson-numbers table in `lang`, once the watcher drew it (it knows the model's numbers)."""
        return {} if known is None else {lesson_md: lesson_markdown(*known, lang)}

    def change_language(lang, current, chosen_head, known=None, current_prompt=None):
        """Redraw every view in the new language from the trace (and numbers) already made: no model work;
        the lesson prompt in the box becomes the new language's, unless the learner typed another."""
        swapped = swapped_default(current_prompt, lang, LESSON_PROMPTS)
        out = lesson_table(lang, known) | ({prompt: swapped} if swapped is not None else {})
        if current is None:
            return placeholders(lang) | out
        views = render(current, chosen_head, lang)
        del views[state], views[block]  # the same trace and slider: nothing to send
        return views | out

    inputs = [prompt, chat, block, head, *lang_input]
    # preprocess=False: run_trace's validators name the field before Gradio's component checks can
    trace_btn.click(run_trace, inputs, outputs, api_name="trace", preprocess=False)
    prompt.submit(run_trace, inputs, outputs, api_visibility="private", preprocess=False)
    # release (mouse), and change from the keyboard: arrow keys and Enter pick the block at once
    gr.on([block.release, block.input], change_block, [state, block, head, *lang_input], [state, attention_md, attention_plot],
          api_name="trace_block", show_progress="minimal", trigger_mode="always_last", preprocess=False)
    head.input(change_head, [state, head, *lang_input], [attention_md, attention_plot], api_visibility="private",
               show_progress="hidden")
    if language is not None:
        redrawn = [o for o in outputs if o not in (state, block)] + [lesson_md, prompt]
        language.change(change_language, [language, state, head, numbers, prompt], redrawn, api_visibility="private",
                        show_progress="hidden", preprocess=False)

    if lab is not None:
        targets = [lab["prompt"], lab["chat"]] + ([tabs] if tabs is not None else [])

        def sample_from_here(text, use_chat):
            out = {lab["prompt"]: text, lab["chat"]: bool(use_chat)}
            return out | ({tabs: gr.Tabs(selected=lab_tab_id)} if tabs is not None else {})

        sample_btn.click(sample_from_here, [prompt, chat], targets, api_name="sample_from_here", queue=False)

    return {
        "state": state, "prompt": prompt, "chat": chat, "trace_button": trace_btn, "sample_button": sample_btn,
        "block": block, "head": head, "status": status,
        # for a tab.select(...) that shows the lesson's trace when the tab is opened:
        "trace_if_new": trace_if_new, "select_inputs": [prompt, chat, block, head, state, *lang_input],
        "select_outputs": [*outputs, prompt], "lesson_numbers": lesson_md, "watch": (outputs + [lesson_md, numbers], new_model),
    }


__all__ = ["build_forward_tab"]
