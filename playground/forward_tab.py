"""The "Forward pass" tab: lesson 10 on the live model, laid out as the lesson's journey.

Input (token chips with ids) → Embedding (lookup rows) → the blocks (residual stream, updates,
attention) → Output (logits at every position, their memory cost) → Logit lens → Sample from here.
Layout and wiring only: the service returns a Trace record, trace_text and trace_charts draw it.
The record stays in gr.State, so picking another head redraws without touching the model; picking
another block asks the service for that block's attention only.
"""

from __future__ import annotations

import gradio as gr

from . import trace_charts as tc
from . import trace_text as tt
from .charts import empty_figure

LESSON_PROMPT = "The capital of France is"
ALL_HEADS = -1
DEFAULT_BLOCKS = 30  # the slider's range until the first trace tells the real depth

INTRO = (
    "## The forward pass, traced\n"
    "Every generated token is one forward pass: tensors in, tensors out. `model.generate()` is a convenience "
    "loop around it; here the model is called directly with `output_hidden_states=True`, and three things "
    "come back: the token ids, the hidden states and the logits. Press **Trace** and follow one prompt "
    "from ids to logits."
)


def _fail(e: Exception):
    raise gr.Error(str(e)) from None


def _head_update(trace, head):
    a = trace.attention
    if a is None:
        return gr.update(choices=[("all heads", ALL_HEADS)], value=ALL_HEADS)
    choices = [("all heads", ALL_HEADS)] + [(f"head {h + 1}", h) for h in range(a.num_heads)]
    return gr.update(choices=choices, value=head if head is not None and -1 <= head < a.num_heads else ALL_HEADS)


def _attention_views(trace, head):
    head = None if head in (None, ALL_HEADS) else int(head)
    return tt.attention_markdown(trace.attention, trace.attention_note), tc.attention_figure(trace.attention, head, trace.attention_note)


def render(trace, head=ALL_HEADS) -> tuple:
    """Every view of a trace, in the order of `build_forward_tab`'s outputs (after state and status)."""
    a = trace.attention
    block = gr.update(maximum=trace.num_layers, value=a.block if a else 1, interactive=a is not None)
    return (
        tt.tokens_html(trace), tt.input_markdown(trace), tt.shapes_markdown(trace), tt.embedding_markdown(trace),
        tt.stream_markdown(trace), tc.residual_figure(trace),
        block, _head_update(trace, head), *_attention_views(trace, head),
        tt.output_markdown(trace), tc.predictions_figure(trace), tc.teacher_figure(trace),
        tt.cost_markdown(trace), tc.cost_figure(trace), tt.lens_markdown(trace), tc.lens_figure(trace),
    )


def status_line(trace) -> str:
    s = trace.shapes
    return (f"Traced **{len(trace.tokens)} tokens** through {s.num_layers} blocks of {trace.model}: "
            f"forward {trace.forward_ms:.0f} ms, trace {trace.trace_ms:.0f} ms.")


def build_forward_tab(service, lab: dict | None = None, tabs: gr.Tabs | None = None, lab_tab_id: str = "lab") -> dict:
    """Create and wire the tab's components in the current Blocks/Tab context.

    lab: the dict of build_sampling_lab (its "prompt" and "chat" receive "Sample from here").
    tabs: the page's gr.Tabs; when given, "Sample from here" also switches to the tab `lab_tab_id`.
    """
    state = gr.State(None)
    gr.Markdown(INTRO)
    with gr.Row(equal_height=False):
        prompt = gr.Textbox(LESSON_PROMPT, label="Prompt", lines=2, scale=4, elem_id="fw-prompt")
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

    views = [tokens, input_md, shapes_md, embedding_md, stream_md, residual_plot, block, head, attention_md,
             attention_plot, output_md, predictions_plot, teacher_plot, cost_md, cost_plot, lens_md, lens_plot]

    def run_trace(text, use_chat, chosen_block, chosen_head):
        try:
            n = service.info.num_layers
            trace = service.trace(text, bool(use_chat), block=min(max(int(chosen_block or 1), 1), n))
        except (ValueError, RuntimeError) as e:
            _fail(e)
        return (trace, status_line(trace), *render(trace, chosen_head))

    def trace_if_new(text, use_chat, chosen_block, chosen_head, current):
        """For a tab-select event: trace only if the shown trace is not of this prompt already."""
        if current is not None and (current.prompt, current.chat) == (text, bool(use_chat)):
            return (gr.skip(),) * (2 + len(views))
        return run_trace(text, use_chat, chosen_block, chosen_head)

    def change_block(current, chosen_block, chosen_head):
        if current is None:
            return gr.skip(), gr.skip(), gr.skip()
        try:
            attention = service.trace_attention(current.prompt, current.chat, int(chosen_block))
        except (ValueError, RuntimeError) as e:
            _fail(e)
        trace = current.with_attention(attention)
        return (trace, *_attention_views(trace, chosen_head))

    def change_head(current, chosen_head):
        if current is None:
            return gr.skip(), gr.skip()
        return _attention_views(current, chosen_head)

    inputs = [prompt, chat, block, head]
    trace_btn.click(run_trace, inputs, [state, status, *views], api_name="trace", concurrency_id="model")
    prompt.submit(run_trace, inputs, [state, status, *views], api_visibility="private", concurrency_id="model")
    block.release(change_block, [state, block, head], [state, attention_md, attention_plot], api_name="trace_block",
                  concurrency_id="model", show_progress="minimal")
    head.input(change_head, [state, head], [attention_md, attention_plot], api_visibility="private", show_progress="hidden")

    def trace_record(prompt: str, chat: bool = False, block: int | None = None, top_n: int = 5) -> dict:
        """The forward-pass trace as JSON: shapes, embedding rows, residual norms and updates, one block's
        attention, the top-N at every position with teacher forcing, the logits' memory cost, the logit lens."""
        try:
            return service.trace(prompt, chat, block=block, top_n=top_n).to_dict()
        except (ValueError, RuntimeError) as e:
            _fail(e)

    gr.api(trace_record, api_name="trace_record", concurrency_id="model")

    if lab is not None:
        targets = [lab["prompt"], lab["chat"]] + ([tabs] if tabs is not None else [])

        def sample_from_here(text, use_chat):
            return (text, bool(use_chat)) + ((gr.Tabs(selected=lab_tab_id),) if tabs is not None else ())

        sample_btn.click(sample_from_here, [prompt, chat], targets, api_name="sample_from_here", queue=False)

    return {
        "state": state, "prompt": prompt, "chat": chat, "trace_button": trace_btn, "sample_button": sample_btn,
        "block": block, "head": head, "status": status,
        # for a tab.select(...) that shows the lesson's trace when the tab is opened:
        "trace_if_new": trace_if_new, "select_inputs": [*inputs, state], "select_outputs": [state, status, *views],
    }


__all__ = ["build_forward_tab", "render", "LESSON_PROMPT"]
