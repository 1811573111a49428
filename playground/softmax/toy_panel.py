"""The toy-softmax lesson as Gradio components, for a host app to place inside one of its tabs.

It needs no model: five tokens and their logits come from assets/toy_vocab.json, and every slider or
table edit recomputes the pure softmax_table -> Markdown + figure; while a slider moves, the page redraws them
itself first (toy_live.py: no round trip between a drag and the bars). One public endpoint, /toy_softmax,
returns (Markdown, figure, the table as JSON), so the numbers are scriptable too. A change of the page's
language recomputes the same arithmetic in the new language (it is cheap: no model, no queue).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..common.errors import warn
from ..common.i18n import T, tr
from ..common.tables import parsed_by_us
from ..common.text import escape_html
from .toy import load_toy, parse_rows, show_piece, softmax_figure, softmax_table, table_markdown
from .toy_live import toy_js

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


def toy_views(rows, shift=0.0, temperature=1.0, lang="en"):
    """Edited rows + sliders -> (Markdown, figure, table dict, error message or None), in `lang`.

    A bad edit (a logit that is not a number) never raises: the message goes where the table was, the
    figure is gr.skip() (the last good one stays on screen) and the dict is {"error": message}."""
    try:
        tokens, logits = parse_rows(rows, lang)
        tokens = [" " + t[1:] if t.startswith(SPACE_MARK) else t for t in tokens]
        table = softmax_table(logits, shift, temperature, tokens=tokens, lang=lang)
    except ValueError as exc:
        message = str(exc)
        return f"⚠️ **{escape_html(message[0].upper() + message[1:])}**", gr.skip(), {"error": message}, message
    return table_markdown(table, lang), softmax_figure(table, lang=lang), table, None


_REMEMBERED: dict[str, tuple] = {}  # repr of the inputs -> views that succeeded
REMEMBER_AT_MOST = 256


def remembered_views(rows, shift=0.0, temperature=1.0, lang="en"):
    """toy_views, remembered when it succeeds: in a Vietnamese room every page load redraws the same
    lesson (~0.1 s of CPU, mostly the figure), and a class tries the same few settings. Nothing mutates
    the result (Gradio serialises the figure with to_json), so one copy serves every learner. The key is
    the inputs' repr, so True and 1 (equal as dict keys, not as logits) stay apart."""
    key = repr((rows, shift, temperature, lang))
    views = _REMEMBERED.get(key)
    if views is None:
        views = toy_views(rows, shift, temperature, lang)
        if views[3] is None and len(key) <= 4096:  # a bad edit is said afresh; a huge table is not kept
            if len(_REMEMBERED) >= REMEMBER_AT_MOST:
                _REMEMBERED.clear()  # crude, thread-safe bound: the lesson's few settings come back at once
            _REMEMBERED[key] = views
    return views


def toy_softmax(rows, shift=0.0, temperature=1.0, lang="en"):
    """The event handler's work: toy_views, plus a warning toast for a bad edit -> (Markdown, figure, dict)."""
    markdown, figure, table, error = remembered_views(rows, shift, temperature, lang)
    if error:
        warn(error)
    return markdown, figure, table


def _intro(prompt: str, tokens, logits, lang="en") -> str:
    """The lesson's sentences, with the figures computed from the asset so they stay true."""
    base = softmax_table(logits, tokens=tokens)
    top = base["top"]
    cold = softmax_table(logits, temperature=0.5, tokens=tokens)["rows"][top]["prob"]
    hot = softmax_table(logits, temperature=1.5, tokens=tokens)["rows"][top]["prob"]
    return tr(lang, "softmax.toy.intro", prompt=prompt, sum=f"{base['exp_sum']:.1f}", name=tokens[top].strip(),
              cold=f"{cold:.0%}", hot=f"{hot:.0%}")


def build_toy_panel(toy_path=None, language: gr.Radio | None = None) -> SoftmaxLesson:
    """Create and wire the lesson's components in the current Blocks/Tab context. `language`: the page's
    language picker (None: English only, e.g. the tab on its own)."""
    prompt, tokens, logits = load_toy(toy_path)
    rows = toy_rows(tokens, logits)
    first_md, first_fig, first_table = toy_softmax(rows)

    intro = gr.Markdown(_intro(prompt, tokens, logits), elem_id="toy-intro")
    with gr.Row():
        with gr.Column(scale=2, min_width=260):
            table = gr.Dataframe(
                value=rows, headers=["token", "logit"], datatype=["str", "number"], type="array",
                interactive=True, label=T("softmax.toy.table.label"), column_count=2,
                elem_id="toy-logits",
            )  # the headers are the lesson's terms, the same in both languages
            parsed_by_us(table)  # a script's malformed table is named by parse_rows, not Gradio's bare error
            shift = gr.Slider(-10, 10, value=0, step=0.1, label=T("softmax.toy.shift.label"), elem_id="toy-shift")
            temperature = gr.Slider(
                0, 2, value=1, step=0.05, label=T("softmax.toy.temperature.label"),
                info=T("softmax.toy.temperature.info"), elem_id="toy-temperature",
            )
            reset = gr.Button(T("softmax.toy.reset"), size="sm")
        with gr.Column(scale=3):
            markdown = gr.Markdown(first_md, elem_id="toy-table")
    plot = gr.Plot(first_fig, show_label=False, elem_id="toy-plot")
    with gr.Accordion(T("softmax.toy.numbers"), open=False):
        numbers = gr.JSON(first_table, show_label=False)

    lang_input = [] if language is None else [language]

    def recompute(rows, shift, temperature, lang="en"):
        md, fig, table_dict = toy_softmax(rows, shift, temperature, lang)
        return {markdown: md, plot: fig, numbers: table_dict}

    gr.on(
        [table.change, shift.change, temperature.change],
        recompute,
        inputs=[table, shift, temperature, *lang_input],
        outputs=[markdown, plot, numbers],
        api_name="toy_softmax",
        show_progress="hidden",
        trigger_mode="always_last",
        concurrency_limit=None,  # pure arithmetic: no reason to queue one class behind another
        preprocess=False,  # the table's raw rows (parse_rows reads them), the sliders' numbers (softmax_table checks them)
    )
    # while a slider moves, the page redraws the bars and the table itself (toy_live.py); the server's answer follows
    for slider in (shift, temperature):
        slider.input(None, [shift, temperature], None, js=toy_js(), api_visibility="private", show_progress="hidden",
                     queue=False)
    reset.click(lambda: (rows, 0, 1), None, [table, shift, temperature], api_visibility="private")

    if language is not None:
        def rerender(lang, rows, shift, temperature):
            md, fig, table_dict, _ = remembered_views(rows, shift, temperature, lang)  # no toast: nothing was edited
            return {intro: _intro(prompt, tokens, logits, lang), markdown: md, plot: fig, numbers: table_dict}

        language.change(rerender, [language, table, shift, temperature], [intro, markdown, plot, numbers],
                        api_visibility="private", show_progress="hidden", concurrency_limit=None, preprocess=False,
                        trigger_mode="multiple")
    return SoftmaxLesson(table, shift, temperature, markdown, plot, numbers, reset)


__all__ = ["SoftmaxLesson", "build_toy_panel", "toy_softmax", "toy_views", "toy_rows"]
