"""The "Forward pass" tab's components: ForwardComponents names them, build_components lays them out.

Top to bottom, as the lesson's journey: the prompt and its chips, the embedding, the blocks (residual
stream, one block's attention), the output (logits, their cost, what the precision does: precision.py), the logit lens, the interventions (intervene.py),
"Sample from here".
A component whose value the server replaces starts from tr(DEFAULT, ...), never T() (see `tab`).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from playground import limits

from ..common.figures import empty_figure
from ..common.i18n import DEFAULT, T, tr
from .intervene import InterveneComponents
from .intervene import build as build_intervene
from .intervene_files import FilesComponents, build_files
from .precision import PrecisionComponents
from .precision import build as build_precision

ALL_HEADS = -1  # the head picker's "every head"
DEFAULT_BLOCKS = limits.FORWARD_DEFAULT_BLOCKS


@dataclass(frozen=True)
class ForwardComponents:
    """The tab's components, by name: the handlers key their {component: value} dicts on these."""

    state: gr.State  # the Trace on screen
    prompt: gr.Textbox
    chat: gr.Checkbox
    trace_btn: gr.Button
    status: gr.Markdown
    tokens: gr.HTML
    input_md: gr.Markdown
    shapes_md: gr.Markdown
    lesson_md: gr.Markdown
    numbers: gr.State  # (ModelInfo, the lesson prompt's id count): the table redrawn in another language
    embedding_md: gr.Markdown
    stream_md: gr.Markdown
    residual_plot: gr.Plot
    attention_md: gr.Markdown
    block: gr.Slider
    head: gr.Dropdown
    attention_plot: gr.Plot
    output_md: gr.Markdown
    predictions_plot: gr.Plot
    teacher_plot: gr.Plot
    cost_md: gr.Markdown
    cost_plot: gr.Plot
    precision: PrecisionComponents  # what bf16, int8 or int4 do to the next token (precision.py)
    lens_md: gr.Markdown
    lens_plot: gr.Plot
    intervene: InterveneComponents
    files: FilesComponents  # the Intervene section's results saved and loaded (intervene_files.py)
    sample_btn: gr.Button

    @property
    def views(self) -> list:
        """What a trace redraws (its State and the block slider too), in the trace events' outputs order."""
        return [self.state, self.status, self.tokens, self.input_md, self.shapes_md, self.embedding_md,
                self.stream_md, self.residual_plot, self.block, self.head, self.attention_md, self.attention_plot,
                self.output_md, self.predictions_plot, self.teacher_plot, self.cost_md, self.cost_plot,
                self.lens_md, self.lens_plot]


def build_components() -> ForwardComponents:
    """Create the tab's components in the current Blocks/Tab context, top to bottom."""
    state = gr.State(None)
    gr.Markdown(T("forward.intro"))
    with gr.Row(equal_height=False):
        prompt = gr.Textbox(limits.LESSON_PROMPT, label=T("forward.prompt"), lines=2, scale=4, elem_id="fw-prompt")
        with gr.Column(scale=1, min_width=220):
            chat = gr.Checkbox(False, label=T("forward.chat"), elem_id="fw-chat")
            trace_btn = gr.Button(T("forward.trace"), variant="primary", elem_id="fw-trace", interactive=False)
    status = gr.Markdown(tr(DEFAULT, "forward.status.ready"), elem_id="fw-status")

    gr.Markdown(T("forward.section.input"))
    tokens = gr.HTML(elem_id="fw-tokens")
    input_md = gr.Markdown(tr(DEFAULT, "forward.lesson.input"), elem_id="fw-input")
    shapes_md = gr.Markdown(elem_id="fw-shapes")
    lesson_md = gr.Markdown(elem_id="fw-lesson-numbers")
    numbers = gr.State(None)

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
    precision = build_precision()

    gr.Markdown(T("forward.section.lens"))
    lens_md = gr.Markdown(tr(DEFAULT, "forward.lesson.lens"), elem_id="fw-lens-text")
    lens_plot = gr.Plot(empty_figure(tr(DEFAULT, "forward.empty.lens")), show_label=False, elem_id="fw-lens")

    intervene = build_intervene(DEFAULT_BLOCKS)
    files = build_files(intervene.results)  # at the end of the Intervene section

    gr.Markdown(T("forward.section.sample"))
    sample_btn = gr.Button(T("forward.sample"), elem_id="fw-sample", interactive=False)
    return ForwardComponents(
        state=state, prompt=prompt, chat=chat, trace_btn=trace_btn, status=status, tokens=tokens, input_md=input_md,
        shapes_md=shapes_md, lesson_md=lesson_md, numbers=numbers, embedding_md=embedding_md, stream_md=stream_md,
        residual_plot=residual_plot, attention_md=attention_md, block=block, head=head, attention_plot=attention_plot,
        output_md=output_md, predictions_plot=predictions_plot, teacher_plot=teacher_plot, cost_md=cost_md,
        cost_plot=cost_plot, precision=precision, lens_md=lens_md, lens_plot=lens_plot, intervene=intervene, files=files, sample_btn=sample_btn,
    )
