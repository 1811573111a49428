"""The generated text as token chips coloured by how probable each chosen token was.

A learner sees at a glance where the model was sure (bright) and where the draw went out on a limb
(dark), and hovering a chip gives its id, piece, probability and rank. Plain HTML with one <style>
block (classes prefixed ntp-), so it works in gr.HTML and in a saved page alike.
"""

from __future__ import annotations

import html

from model_service.records import StepRecord

from ..common.colours import NO_DATA, css_gradient, prob_colour, text_colour
from ..common.i18n import tr
from ..common.text import WHITESPACE_MARKS, prob, quoted_piece, visible_piece

STYLE = """<style>
.ntp-chips{font-size:15px;line-height:2;word-break:break-word}
.ntp-chip{display:inline-block;padding:0 3px;margin:1px;border-radius:4px;white-space:pre;line-height:1.5}
.ntp-ws{opacity:.6}
.ntp-special{font-style:italic;box-shadow:inset 0 0 0 1px currentColor}
.ntp-selected{outline:2px solid #D55E00;outline-offset:1px}
.ntp-legend{display:flex;align-items:center;gap:6px;margin-bottom:4px;font-size:12px;opacity:.85}
.ntp-scale{display:inline-block;width:140px;height:10px;border-radius:2px}
.ntp-empty{opacity:.7;font-style:italic}
</style>"""


def chosen_prob(record: StepRecord, stage: str = "raw") -> float | None:
    """The chosen token's probability under a stage; None without stage data. Chips use "raw", the
    model's own belief: under greedy the final probability is always 1 and would say nothing."""
    by_name = {s.name: s for s in record.stages}
    return by_name[stage].chosen_prob if stage in by_name else None


def chip_title(record: StepRecord, lang: str = "en") -> str:
    """Hover text: "id 3575 · ' Paris' · p=0.77 · 0.95 after the pipeline · rank 1" (rank 1-based, raw logits)."""
    p, final = chosen_prob(record), chosen_prob(record, "final")
    parts = [tr(lang, "lab.chip.id", id=record.token_id), quoted_piece(record.piece)]
    if p is not None:
        parts.append(f"p={prob(p)}")
    if final is not None and final != p:
        parts.append(tr(lang, "lab.chip.after_pipeline", p=prob(final)))
    parts.append(tr(lang, "lab.chip.rank", rank=record.chosen_rank + 1))
    if record.stop_reason:
        parts.append(tr(lang, "lab.chip.stop", reason=record.stop_reason))
    return " · ".join(parts)


def _chip_text(record: StepRecord) -> str:
    text = html.escape(visible_piece(record.piece, record.special), quote=False)
    for mark in WHITESPACE_MARKS:
        text = text.replace(mark, f'<span class="ntp-ws">{mark}</span>')
    return text


def _chip(record: StepRecord, index: int, selected: int | None, lang: str) -> str:
    p = chosen_prob(record)
    background = prob_colour(p) if p is not None else NO_DATA
    classes = ["ntp-chip"]
    if record.special:
        classes.append("ntp-special")
    if selected is not None and index == selected:
        classes.append("ntp-selected")
    chip = (
        f'<span class="{" ".join(classes)}" data-step="{record.step}" '
        f'style="background:{background};color:{text_colour(background)}" '
        f'title="{html.escape(chip_title(record, lang), quote=True)}">{_chip_text(record)}</span>'
    )
    breaks = 0 if record.special else record.piece.count("\n")
    return chip + "<br>" * breaks


def legend_html(lang: str = "en") -> str:
    return (
        '<div class="ntp-legend"><span>0</span>'
        f'<span class="ntp-scale" style="background:{css_gradient()}"></span>'
        f"<span>1</span><span>{tr(lang, 'lab.chips.legend')}</span></div>"
    )


def chips_prefix(lang: str = "en") -> str:
    """What comes before the first chip: the style and the legend."""
    return f'{STYLE}{legend_html(lang)}<div class="ntp-chips">'


def chip_html(record: StepRecord, index: int, selected: int | None = None, lang: str = "en") -> str:
    """One step's chip (and the line breaks its newlines make)."""
    return _chip(record, index, selected, lang)


def token_chips_html(records: list[StepRecord], selected: int | None = None, lang: str = "en") -> str:
    """One chip per step, in order; `selected` is an index into records (the chip gets an outline).

    Append-only while a run streams: the style and legend come first and nothing closes after the
    chips (the parser closes the div), so each new token's HTML only extends the last one and
    Gradio sends an ~200-byte "append" instead of the whole text again (and a streaming caller can
    build it as chips_prefix() + one chip_html per token)."""
    if records:
        body = "".join(_chip(r, i, selected, lang) for i, r in enumerate(records))
    else:
        body = f'<span class="ntp-empty">{tr(lang, "lab.chips.empty")}</span>'
    return chips_prefix(lang) + body
