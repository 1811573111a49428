"""The "Forward pass" tab: lesson 10 on the live model, laid out as the lesson's journey.

Input (token chips with ids) → Embedding (lookup rows) → the blocks (residual stream, updates,
attention) → Output (logits at every position, their memory cost) → Logit lens → Sample from here.
Layout and wiring only: the service returns a Trace record, `text` and `charts` draw it.
The record stays in gr.State, so picking another head redraws without touching the model; picking
another block asks the service for that block's attention only.
"""

from __future__ import annotations

import gradio as gr

from model_service import limits, validation

from ..common.errors import unchanged, user_error
from ..common.figures import empty_figure
from . import charts as tc
from . import text as tt

ALL_HEADS = -1
DEFAULT_BLOCKS = 30  # the slider's range until the first trace tells the real depth

INTRO = (
    "## The forward pass, traced\n"
    "Every generated token is one forward pass: tensors in, tensors out. `model.generate()` is a convenience "
    "loop around it; here the model is called directly with `output_hidden_states=True`, and three things "
    "come back: the token ids, the hidden states and the logits. Press **Trace** and follow one prompt "
    "from ids to logits."
)


def status_line(trace) -> str:
    s = trace.shapes
    return (f"Traced **{len(trace.tokens)} tokens** through {s.num_layers} blocks of {tt.escape_html(trace.model)}: "
            f"forward {trace.forward_ms:.0f} ms, trace {trace.trace_ms:.0f} ms.")


def build_forward_tab(service, lab: dict | None = None, tabs: gr.Tabs | None = None, lab_tab_id: str = "lab",
                      language: gr.Radio | None = None) -> dict:
    """Create and wire the tab's components in the current Blocks/Tab context.

    lab: the dict of build_lab (its "prompt" and "chat" receive "Sample from here").
    tabs: the page's gr.Tabs; when given, "Sample from here" also switches to the tab `lab_tab_id`.
    """
    state = gr.State(None)
    gr.Markdown(INTRO)
    with gr.Row(equal_height=False):
        prompt = gr.Textbox(limits.LESSON_PROMPT, label="Prompt", lines=2, scale=4, elem_id="fw-prompt")
        with gr.Column(scale=1, min_width=220):
            chat = gr.Checkbox(False, label="Chat template", elem_id="fw-chat")
            trace_btn = gr.Button("Trace the forward pass", variant="primary", elem_id="fw-trace")
    status = gr.Markdown("Press **Trace the forward pass**.", elem_id="fw-status")

    gr.Markdown("### 1 · Input: token ids")
    tokens = gr.HTML(elem_id="fw-tokens")
    input_md = gr.Markdown(tt.LESSON["input"], elem_id="fw-input")
    shapes_md = gr.Markdown(elem_id="fw-shapes")

    gr.Markdown("### 2 · Embedding: one row per id")
    embedding_md = gr.Markdown(tt.LESSON["embedding"], elem_id="fw-embedding")

    gr.Markdown("### 3 · Through the blocks: read, then add")
    stream_md = gr.Markdown(tt.LESSON["blocks"], elem_id="fw-stream")
    residual_plot = gr.Plot(empty_figure("The residual stream's norms appear here.", 260), show_label=False, elem_id="fw-residual")
    attention_md = gr.Markdown(tt.LESSON["attention"], elem_id="fw-attention-text")
    with gr.Row():
        block = gr.Slider(1, DEFAULT_BLOCKS, (DEFAULT_BLOCKS + 1) // 2, step=1, label="Block", elem_id="fw-block", scale=3)
        head = gr.Dropdown([("all heads", ALL_HEADS)], value=ALL_HEADS, label="Head", elem_id="fw-head", scale=1)
    attention_plot = gr.Plot(empty_figure("One block's attention appears here.", 260), show_label=False, elem_id="fw-attention")

    gr.Markdown("### 4 · Output: logits at every position")
    output_md = gr.Markdown(tt.LESSON["output"], elem_id="fw-output")
    predictions_plot = gr.Plot(empty_figure("The top tokens of every position appear here."), show_label=False, elem_id="fw-predictions")
    teacher_plot = gr.Plot(empty_figure("How likely the prompt's own next tokens were.", 170), show_label=False, elem_id="fw-teacher")
    cost_md = gr.Markdown(tt.LESSON["cost"], elem_id="fw-cost-text")
    cost_plot = gr.Plot(empty_figure("The memory cost of all those logits appears here."), show_label=False, elem_id="fw-cost")

    gr.Markdown("### 5 · Logit lens: the answer forming, block by block")
    lens_md = gr.Markdown(tt.LESSON["lens"], elem_id="fw-lens-text")
    lens_plot = gr.Plot(empty_figure("The logit lens appears here."), show_label=False, elem_id="fw-lens")

    gr.Markdown("### 6 · " + tt.LESSON["sample"])
    sample_btn = gr.Button("Sample from here", elem_id="fw-sample")

    def attention_views(trace, chosen_head) -> dict:
        try:
            h = validation.number("head", chosen_head, integer=True, low=ALL_HEADS, high=10_000, blank=ALL_HEADS)
        except ValueError as e:
            raise user_error(e) from None
        h = None if h == ALL_HEADS else h
        return {attention_md: tt.attention_markdown(trace.attention, trace.attention_note),
                attention_plot: tc.attention_figure(trace.attention, h, trace.attention_note)}

    def head_update(trace, chosen_head):
        a = trace.attention
        if a is None:
            return gr.update(choices=[("all heads", ALL_HEADS)], value=ALL_HEADS)
        choices = [("all heads", ALL_HEADS)] + [(f"head {h + 1}", h) for h in range(a.num_heads)]
        keep = chosen_head is not None and -1 <= chosen_head < a.num_heads
        return gr.update(choices=choices, value=chosen_head if keep else ALL_HEADS)

    def render(trace, chosen_head=ALL_HEADS) -> dict:
        """Every view of a trace."""
        a = trace.attention
        return {
            state: trace, status: status_line(trace),
            tokens: tt.tokens_html(trace), input_md: tt.input_markdown(trace), shapes_md: tt.shapes_markdown(trace),
            embedding_md: tt.embedding_markdown(trace), stream_md: tt.stream_markdown(trace),
            residual_plot: tc.residual_figure(trace),
            block: gr.update(maximum=trace.num_layers, value=a.block if a else 1, interactive=a is not None),
            head: head_update(trace, chosen_head), **attention_views(trace, chosen_head),
            output_md: tt.output_markdown(trace), predictions_plot: tc.predictions_figure(trace),
            teacher_plot: tc.teacher_figure(trace), cost_md: tt.cost_markdown(trace), cost_plot: tc.cost_figure(trace),
            lens_md: tt.lens_markdown(trace), lens_plot: tc.lens_figure(trace),
        }

    outputs = [state, status, tokens, input_md, shapes_md, embedding_md, stream_md, residual_plot, block, head,
               attention_md, attention_plot, output_md, predictions_plot, teacher_plot, cost_md, cost_plot, lens_md,
               lens_plot]

    def run_trace(text, use_chat, chosen_block, chosen_head):
        try:
            text = validation.text("prompt", text)
            use_chat = validation.boolean("chat template", use_chat)
            n = service.info.num_layers
            chosen_block = validation.number("block", chosen_block, integer=True, low=1, high=n, blank=(n + 1) // 2)
            chosen_head = validation.number("head", chosen_head, integer=True, low=ALL_HEADS, high=10_000, blank=ALL_HEADS)
            trace = service.trace(text, use_chat, block=chosen_block)
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None
        return render(trace, chosen_head)

    def trace_if_new(text, use_chat, chosen_block, chosen_head, current):
        """For a tab-select event: trace only if the shown trace is not of this prompt already."""
        if current is not None and (current.prompt, current.chat) == (text, bool(use_chat)):
            return unchanged(state)
        return run_trace(text, use_chat, chosen_block, chosen_head)

    def change_block(current, chosen_block, chosen_head):
        if current is None:
            return unchanged(state)
        try:
            chosen_block = validation.number("block", chosen_block, integer=True, low=1, high=current.num_layers)
            attention = service.trace_attention(current.prompt, current.chat, chosen_block)
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None
        trace = current.with_attention(attention)
        return {state: trace, **attention_views(trace, chosen_head)}

    def change_head(current, chosen_head):
        if current is None:
            return unchanged(attention_md)
        return attention_views(current, chosen_head)

    inputs = [prompt, chat, block, head]
    # preprocess=False: run_trace's validators name the field before Gradio's component checks can
    trace_btn.click(run_trace, inputs, outputs, api_name="trace", preprocess=False)
    prompt.submit(run_trace, inputs, outputs, api_visibility="private", preprocess=False)
    # release (mouse), and change from the keyboard: arrow keys and Enter pick the block at once
    gr.on([block.release, block.input], change_block, [state, block, head], [state, attention_md, attention_plot],
          api_name="trace_block", show_progress="minimal", trigger_mode="always_last", preprocess=False)
    head.input(change_head, [state, head], [attention_md, attention_plot], api_visibility="private", show_progress="hidden")

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
        "trace_if_new": trace_if_new, "select_inputs": [*inputs, state], "select_outputs": outputs,
    }


__all__ = ["build_forward_tab"]
