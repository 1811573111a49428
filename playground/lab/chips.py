"""The generated text as token chips coloured by how probable each chosen token was.

A learner sees at a glance where the model was sure (bright) and where the draw went out on a limb
(dark), and hovering a chip gives its id, piece, probability and rank. Plain HTML with one <style>
block (classes prefixed ntp-), so it works in gr.HTML and in a saved page alike.

A token that holds part of a character (byte-level BPE writes "ủ" as two tokens) shows the
character, with a subscript for the bytes it holds ("ủ" 1–2/3, then "ủ" 3/3) and its bytes in the
title. Each chip is read with its neighbours, so a streaming run sends a chip once the next tokens
have finished its character (the same hold-back as the text: model_service/engine/text_stream.py).

A streaming handler's chips carry its stream's tag (`data-run`): the page says how many of a stream's chips it
has (COUNT_JS), so that the handler keeps at most run.PAGE_AHEAD updates ahead of it; Stop's js (STOP_JS) counts
the chips on the page, tells the server whose they were, and hides any chip of that stream still on its way.
"""

from __future__ import annotations

import html
import math

from model_service.records.step import StepRecord
from model_service.records.utf8 import incomplete_tail

from ..common.colours import NO_DATA, css_gradient, prob_colour, text_colour
from ..common.i18n import tr
from ..common.text import WHITESPACE_MARKS, Shown, piece_html, prob, show_steps, show_token, token_bytes

STYLE = """<style>
.ntp-chips{font-size:15px;line-height:2;word-break:break-word}
.ntp-chip{display:inline-block;padding:0 3px;margin:1px;border-radius:4px;white-space:pre;line-height:1.5}
.ntp-ws{opacity:.9;font-weight:700}  /* the ␣ mark must read on the darkest chip too */
.ntp-chips .ntp-part{font-size:9px;vertical-align:baseline;position:relative;top:2px;margin-left:1px;color:inherit}
.ntp-special{font-style:italic;box-shadow:inset 0 0 0 1px currentColor}
.ntp-selected{outline:2px solid #D55E00;outline-offset:1px}
.ntp-legend{display:flex;align-items:center;gap:6px;margin-bottom:4px;font-size:12px;opacity:.85}
.ntp-scale{display:inline-block;width:140px;height:10px;border-radius:2px}
.ntp-empty{opacity:.7;font-style:italic}
.ntp-hit{text-decoration:underline wavy #D55E00 2px;text-underline-offset:3px}
.ntp-final-probs .ntp-chip{background:var(--ntp-final)!important;color:var(--ntp-final-ink)!important}
.ntp-when-final,.ntp-final-probs .ntp-when-raw{display:none}
.ntp-final-probs .ntp-when-final{display:inline}
</style>"""

# The chips' colour follows the raw or the final probability (the toggle under them, PROBS_JS): each chip carries
# both colours, and a class on the page picks one, at once and for a streaming run too.
PROBS_JS = """(mode) => { document.body.classList.toggle("ntp-final-probs", mode === "final"); return []; }"""


def chosen_prob(record: StepRecord, stage: str = "raw") -> float | None:
    """The chosen token's probability under a stage; None without stage data. Chips use "raw", the
    model's own belief: under greedy the final probability is always 1 and would say nothing."""
    by_name = {s.name: s for s in record.stages}
    return by_name[stage].chosen_prob if stage in by_name else None


def chip_title(record: StepRecord, lang: str = "en", shown: Shown | None = None, moved: float | None = None) -> str:
    """Hover text: "id 3575 · ' Paris' · p=0.77 (log p −0.26) · 0.95 after the pipeline (log p −0.05) · rank 1"
    (rank 1-based, raw logits): the log-probabilities are what an API's logprobs give, raw (vLLM's raw_logprobs) or
    final (after the sampler); a split character's piece says which bytes it holds: "'ủ' · bytes 1–2 of 3 of ủ:
    \\xe1\\xbb". moved: how far the selected step's bias, penalties and DRY moved this token's logit (-inf: a ban
    removed it)."""
    shown = shown or show_token(record, bytes.fromhex(record.pending_hex), lang=lang)
    p, final = chosen_prob(record), chosen_prob(record, "final")
    parts = [tr(lang, "lab.chip.id", id=record.token_id), shown.hover]
    if p is not None:
        parts.append(f"p={prob(p)} ({_logprob(p)})")
    if final is not None and final != p:
        parts.append(tr(lang, "lab.chip.after_pipeline", p=f"{prob(final)} ({_logprob(final)})"))
    parts.append(tr(lang, "lab.chip.rank", rank=record.chosen_rank + 1))
    if record.stop_reason:
        parts.append(tr(lang, "lab.chip.stop", reason=record.stop_reason))
    if moved == -math.inf:
        parts.append(tr(lang, "lab.chip.banned"))
    elif moved is not None:
        parts.append(tr(lang, "lab.chip.hit", delta=f"{moved:+.3g}"))
    return " · ".join(parts)


def _logprob(p: float) -> str:
    return f"log p {math.log(p):.2f}" if p > 0 else "log p −∞"


def _chip_text(shown: Shown) -> str:
    text = piece_html(shown)
    for mark in WHITESPACE_MARKS:
        text = text.replace(mark, f'<span class="ntp-ws">{mark}</span>')
    return text


def _chip(record: StepRecord, index: int, selected: int | None, shown: Shown, lang: str,
          moved: dict[int, float] | None = None) -> str:
    """One chip; `moved`: the selected step's moved logits (token id -> how much), for the chips before it."""
    p, final = chosen_prob(record), chosen_prob(record, "final")
    background = prob_colour(p) if p is not None else NO_DATA
    final_background = prob_colour(final) if final is not None else NO_DATA
    classes = ["ntp-chip"]
    if record.special:
        classes.append("ntp-special")
    if selected is not None and index == selected:
        classes.append("ntp-selected")
    hit = moved.get(record.token_id) if moved else None
    if hit is not None:
        classes.append("ntp-hit")
    chip = (
        f'<span class="{" ".join(classes)}" data-step="{record.step}" '
        f'style="background:{background};color:{text_colour(background)};--ntp-final:{final_background};'
        f'--ntp-final-ink:{text_colour(final_background)}" '
        f'title="{html.escape(chip_title(record, lang, shown, hit), quote=True)}">{_chip_text(shown)}</span>'
    )
    breaks = 0 if record.special else record.piece.count("\n")
    return chip + "<br>" * breaks


def legend_html(lang: str = "en", hits: bool = False) -> str:
    """The colour scale, saying which probability colours the chips; `hits`: and what an underline means."""
    note = f'<span class="ntp-hit">{tr(lang, "lab.chips.hits")}</span>' if hits else ""
    return (
        '<div class="ntp-legend"><span>0</span>'
        f'<span class="ntp-scale" style="background:{css_gradient()}"></span>'
        f"<span>1</span><span><span class=\"ntp-when-raw\">{tr(lang, 'lab.chips.legend')}</span>"
        f"<span class=\"ntp-when-final\">{tr(lang, 'lab.chips.legend_final')}</span></span>{note}</div>"
    )


def chips_prefix(lang: str = "en", tag: str = "", hits: bool = False) -> str:
    """What comes before the first chip: the style and the legend; `tag`: the streaming handler's (new_tag)."""
    run = f' data-run="{html.escape(tag, quote=True)}"' if tag else ""
    return f'{STYLE}{legend_html(lang, hits)}<div class="ntp-chips"{run}>'


# Stop's js (its click's `js=`, the last input being the box it fills): the page's chips now, as "tag:count" for
# run.parse_seen, and a rule that hides the rest of that stream's chips, which may still be in the page's
# queue of updates (Gradio's client renders every update it has received, even of an event cancelled since).
STOP_JS = """(...values) => {
  const box = document.querySelector("#chips .ntp-chips");
  const tag = (box && box.dataset.run) || "", count = box ? box.querySelectorAll(":scope > .ntp-chip").length : 0;
  if (/^[0-9a-f]+$/.test(tag)) {
    let freeze = document.getElementById("ntp-stop-freeze");
    if (!freeze) { freeze = document.createElement("style"); freeze.id = "ntp-stop-freeze"; document.head.appendChild(freeze); }
    const later = `#chips .ntp-chips[data-run="${tag}"] > .ntp-chip:nth-of-type(n+${count + 1})`;
    freeze.textContent = `${later}, ${later} ~ br {display: none !important}`;
  }
  values[values.length - 1] = `${tag}:${count}`;
  return values;
}"""

# The chips' change's js (its last input being the chips): which stream's chips the page now has, and how many,
# as "tag:count", read from the value itself (the page renders it next), for run.Pace.
COUNT_JS = """(...values) => {
  const html = String(values[values.length - 1] || "");
  const tag = (html.match(/<div class="ntp-chips" data-run="([0-9a-f]+)">/) || ["", ""])[1];
  values[values.length - 1] = `${tag}:${(html.match(/<span class="ntp-chip[ "]/g) || []).length}`;
  return values;
}"""


def new_chips(records: list[StepRecord], start: int, final: bool = False, lang: str = "en") -> tuple[str, int]:
    """The chips of records[start:] that can be shown now, and where the next call starts.

    A token that leaves a character unfinished waits (with the tokens after it) until a later one
    finishes it, so that its chip can show the character; `final` (the run ended) sends the rest."""
    end = len(records)
    if not final and records and incomplete_tail(bytes.fromhex(records[-1].pending_hex) + token_bytes(records[-1])):
        # hold back from the last token that began on a character boundary
        end = max(start, next(i for i in range(end - 1, -1, -1) if i == 0 or not records[i].pending_hex))
    shown = show_steps(records, start, end, lang)
    chips = "".join(_chip(r, i, None, s, lang) for i, (r, s) in enumerate(zip(records[start:end], shown), start))
    return chips, end


def token_chips_html(records: list[StepRecord], selected: int | None = None, lang: str = "en", tag: str = "") -> str:
    """One chip per step, in order; `selected` is an index into records (the chip gets an outline).

    Append-only while a run streams: the style and legend come first and nothing closes after the
    chips (the parser closes the div), so each new token's HTML only extends the last one and
    Gradio sends an ~200-byte "append" instead of the whole text again (and a streaming caller can
    build it as chips_prefix() + what new_chips gives after each token)."""
    if not records:
        return chips_prefix(lang, tag) + f'<span class="ntp-empty">{tr(lang, "lab.chips.empty")}</span>'
    at = len(records) - 1 if selected is None else selected
    # what the selected step's bias, penalties and DRY moved, by token id (-inf: what a ban removed)
    moved = {t: -math.inf if d is None else d for t, d in records[at].adjusted}
    shown = show_steps(records, lang=lang)
    body = "".join(_chip(r, i, selected, s, lang, moved if i < at else None) for i, (r, s) in enumerate(zip(records, shown)))
    hits = any(r.token_id in moved for r in records[:at])
    return chips_prefix(lang, tag, hits) + body


# On a phone (body.ntp-narrow, presenter.READ_PAGE_JS) the run's chips stand under every control: a press of Generate,
# Step or Continue brings them into view, where the tokens come (the presenter view keeps them near the top already).
SHOW_RUN_JS = """() => {
  const body = document.body;
  if (!body.classList.contains("ntp-narrow") || body.classList.contains("ntp-present")) return;
  const chips = document.getElementById("chips");
  if (chips) chips.scrollIntoView({block: "start", behavior: "smooth"});
}"""
