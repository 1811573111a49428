"""The toy-softmax lesson as Gradio components, for a host app to place inside one of its tabs.

It needs no model: five tokens and their logits come from assets/toy_vocab.json, and every slider or
table edit recomputes the pure softmax_table -> Markdown + figure. One public endpoint, /toy_softmax,
returns (Markdown, figure, the table as JSON), so the numbers are scriptable too.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..common.errors import warn
from ..common.text import escape_html
from .toy import load_toy, parse_rows, show_piece, softmax_figure, softmax_table, table_markdown

SPACE_MARK = "␣"  # how the editable table shows a token's leading space


@dataclass(frozen=True)
class SoftmaxLesson:
    """The components build_softmax_lesson created, for the host app to reference."""

    logits: gr.Dataframe
    shift: gr.Slider
    temperature: gr.Slider
    markdown: gr.Markdown
    plot: gr.Plot
    numbers: gr.JSON
    reset: gr.Button


def toy_rows(tokens, logits) -> list[list]:
    """[[token, logit], ...] for the editable table, leading spaces shown as ␣."""
    return [[show_piece(t), x] for t, x in zip(tokens, logits)]


def toy_softmax(rows, shift=0.0, temperature=1.0):
    """The event handler: edited rows + sliders -> (Markdown, figure, table dict).

    A bad edit (a logit that is not a number) never raises: it shows a warning toast, puts the
    message where the table was and leaves the last good figure on screen."""
    try:
        tokens, logits = parse_rows(rows)
        tokens = [" " + t[1:] if t.startswith(SPACE_MARK) else t for t in tokens]
        table = softmax_table(logits, shift, temperature, tokens=tokens)
    except ValueError as exc:
        message = str(exc)
        warn(message)
        return f"⚠️ **{escape_html(message[0].upper() + message[1:])}**", gr.skip(), {"error": message}
    return table_markdown(table), softmax_figure(table), table


def _intro(prompt: str, tokens, logits) -> str:
    """The lesson's sentences, with the figures computed from the asset so they stay true."""
    base = softmax_table(logits, tokens=tokens)
    top = base["top"]
    cold = softmax_table(logits, temperature=0.5, tokens=tokens)["rows"][top]["prob"]
    hot = softmax_table(logits, temperature=1.5, tokens=tokens)["rows"][top]["prob"]
    name = tokens[top].strip()
    return (
        f"**Softmax on a toy vocabulary** — prompt *“{prompt}”*. Each logit x becomes e^x (always "
        f"positive, gaps stretched), divided by the sum (**{base['exp_sum']:.1f}** here) so the "
        f"probabilities add up to 1.\n\n"
        f"Move the **shift**: every e^x and the sum change, the probabilities do not — *only differences "
        f"between logits matter*. **Temperature** divides every logit by T before the softmax: T = 0.5 "
        f"stretches the gaps ({name} {cold:.0%}), T = 1.5 squeezes them ({name} {hot:.0%}), T = 0 is greedy."
    )


def build_toy_panel(toy_path=None) -> SoftmaxLesson:
    """Create and wire the lesson's components in the current Blocks/Tab context."""
    prompt, tokens, logits = load_toy(toy_path)
    rows = toy_rows(tokens, logits)
    first_md, first_fig, first_table = toy_softmax(rows)

    gr.Markdown(_intro(prompt, tokens, logits))
    with gr.Row():
        with gr.Column(scale=2, min_width=260):
            table = gr.Dataframe(
                value=rows, headers=["token", "logit"], datatype=["str", "number"], type="array",
                interactive=True, label="Toy vocabulary: edit any logit", column_count=2,
                elem_id="toy-logits",
            )
            shift = gr.Slider(-10, 10, value=0, step=0.1, label="Shift every logit by", elem_id="toy-shift")
            temperature = gr.Slider(
                0, 2, value=1, step=0.05, label="Temperature T", info="0 = greedy (take the top token)",
                elem_id="toy-temperature",
            )
            reset = gr.Button("Reset to the lesson's numbers", size="sm")
        with gr.Column(scale=3):
            markdown = gr.Markdown(first_md, elem_id="toy-table")
    plot = gr.Plot(first_fig, show_label=False, elem_id="toy-plot")
    with gr.Accordion("The numbers (JSON)", open=False):
        numbers = gr.JSON(first_table, show_label=False)

    gr.on(
        [table.change, shift.change, temperature.change],
        toy_softmax,
        inputs=[table, shift, temperature],
        outputs=[markdown, plot, numbers],
        api_name="toy_softmax",
        show_progress="hidden",
        trigger_mode="always_last",
        concurrency_limit=None,  # pure arithmetic: no reason to queue one class behind another
    )
    reset.click(lambda: (rows, 0, 1), None, [table, shift, temperature], api_visibility="private")
    return SoftmaxLesson(table, shift, temperature, markdown, plot, numbers, reset)


__all__ = ["SoftmaxLesson", "build_toy_panel", "toy_softmax", "toy_rows"]
