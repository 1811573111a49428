"""Lesson 13's toy softmax, as numbers a class can watch move.

The lesson makes three points with five tokens after "The capital of France is": e^x makes every
score positive and stretches the gaps, dividing by the sum (200.9) makes them add up to 1, and adding
the same number to every logit changes e^x and the sum but not one probability. Temperature divides
the logits before the softmax: T = 0.5 stretches the gaps (Paris 96%), T = 1.5 squeezes them (57%).

So the table shows the *raw* e^x values the lesson shows, while the probabilities are computed the
safe way (subtract the max first), which is itself the lesson's point made executable. Everything is
plain Python: no torch, no components; numbers in, a JSON-able dict out, then Markdown and a figure, their
words in the page's language (`lang`, from the catalogues; English by default).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.validation import InputError, is_blank, number
from playground import limits

from ..common.errors import in_language
from ..common.figures import FONT, base_layout
from ..common.i18n import tr
from ..common.tables import table_cells
from ..common.text import escape_markdown_cell, escape_plotly, unique_labels

TOY_PATH = Path(__file__).resolve().parents[2] / "assets" / "toy_vocab.json"
MAX_EXP_ARG = 709.0  # e^709.78 is the largest float64; beyond it e^x is shown via its exponent only
MAX_ABS_LOGIT = limits.TOY_MAX_ABS_LOGIT
ACCENT, MUTED = "#D55E00", "#0072B2"  # Okabe-Ito vermillion and blue, as in charts.py


# ----------------------------------------------------------------------------- inputs


def load_toy(path: str | Path | None = None) -> tuple[str, list[str], list[float]]:
    """The toy vocabulary from assets: (prompt, tokens, logits)."""
    data = json.loads(Path(path or TOY_PATH).read_text(encoding="utf-8"))
    tokens = [row["token"] for row in data["tokens"]]
    return data["prompt"], tokens, parse_logits(tokens, [row["logit"] for row in data["tokens"]])


def parse_logit(token: str, value, lang: str = "en") -> float:
    """One user-typed logit -> float, or a ValueError in `lang` naming the token ("5", " -2,5", "−1" all work)."""
    label = tr(lang, "softmax.toy.error.logit_of", token=repr(show_piece(token)))
    if isinstance(value, bool):
        raise ValueError(tr(lang, "error.number", field=label, got=repr(value)))
    if isinstance(value, str):
        text = value.strip().replace("\u2212", "-").replace(" ", "")
        if text.count(",") == 1 and "." not in text:
            text = text.replace(",", ".")  # a decimal comma
        if not text:
            raise ValueError(tr(lang, "softmax.toy.error.empty", label=label))
        value = text
    try:
        return number(label, value, low=-MAX_ABS_LOGIT, high=MAX_ABS_LOGIT)
    except InputError as e:
        raise ValueError(in_language(e, lang)) from None


def parse_logits(tokens: Sequence[str], values: Sequence, lang: str = "en") -> list[float]:
    return [parse_logit(t, v, lang) for t, v in zip(tokens, values, strict=True)]


def parse_rows(rows, lang: str = "en") -> tuple[list[str], list[float]]:
    """Rows of an edited table ([token, logit] pairs, or a pandas DataFrame) -> (tokens, logits).

    Blank rows are dropped; a missing token name becomes "token N" so the error can still point at it.
    """
    try:
        rows = table_cells(rows)  # a list of rows, a DataFrame, or the table's raw {"data": ...}
    except ValueError:
        raise ValueError(tr(lang, "softmax.toy.error.not_table", got=type(rows).__name__)) from None
    tokens, values = [], []
    for n, row in enumerate(rows, start=1):
        row = row + [None, None]
        token, value = row[0], row[1]
        if is_blank(token) and is_blank(value):
            continue
        tokens.append(f"token {n}" if is_blank(token) else str(token))
        values.append("" if value is None else value)
    if not tokens:
        raise ValueError(tr(lang, "softmax.toy.error.empty_table"))
    return tokens, parse_logits(tokens, values, lang)


# ----------------------------------------------------------------------------- the softmax


def softmax_table(
    logits: Sequence[float] | Mapping[str, float],
    shift: float = 0.0,
    temperature: float = 1.0,
    tokens: Sequence[str] | None = None,
    lang: str = "en",
) -> dict:
    """Every intermediate of softmax((x + shift) / T), one row per token, JSON-able.

    rows[i]: token, logit x, shifted x + shift, scaled (x + shift)/T, exp e^scaled (None when it
    overflows a float; the exponent `scaled` still says how big it is), prob. exp_sum is Σ e^scaled
    (None on overflow; log_exp_sum is always finite). T = 0 is greedy: scaled/exp are None and the top
    logit (first one on a tie, like argmax) gets probability 1. `note` (the row of prose under the
    table) and the messages of bad logits are in `lang`.
    """
    if isinstance(logits, Mapping):
        tokens, logits = list(logits), list(logits.values())
    tokens = list(tokens) if tokens is not None else [f"token {i + 1}" for i in range(len(logits))]
    if len(tokens) != len(logits):
        raise ValueError(f"{len(tokens)} tokens but {len(logits)} logits")
    if not tokens:
        raise ValueError(tr(lang, "softmax.toy.error.no_tokens"))
    xs = parse_logits(tokens, logits, lang)
    shift = number("shift", shift, low=-MAX_ABS_LOGIT, high=MAX_ABS_LOGIT)
    temperature = number("temperature", temperature, low=0, high=limits.MAX_TEMPERATURE)

    shifted = [x + shift for x in xs]
    top = max(range(len(xs)), key=lambda i: (shifted[i], -i))  # argmax, first on a tie
    greedy = temperature == 0
    if greedy:
        scaled, exps, probs, lse = [None] * len(xs), [None] * len(xs), [float(i == top) for i in range(len(xs))], None
    else:
        scaled = [s / temperature for s in shifted]
        m = max(scaled)
        rel = [math.exp(s - m) for s in scaled]  # e^(s - max) <= 1: never overflows
        total = sum(rel)
        probs = [r / total for r in rel]
        lse = m + math.log(total)  # log Σ e^s, finite even when Σ e^s is not
        exps = [_exp(s) for s in scaled]
    return {
        "tokens": tokens,
        "shift": shift,
        "temperature": temperature,
        "greedy": greedy,
        "top": top,
        "rows": [
            {"token": t, "logit": x, "shifted": s, "scaled": c, "exp": e, "prob": p}
            for t, x, s, c, e, p in zip(tokens, xs, shifted, scaled, exps, probs)
        ],
        "exp_sum": None if lse is None else _exp(lse),
        "log_exp_sum": lse,
        "overflow": (not greedy) and any(e is None for e in exps),
        "note": _note(greedy, shift, temperature, lang),
    }


def _exp(x: float) -> float | None:
    return math.exp(x) if x <= MAX_EXP_ARG else None


def _note(greedy: bool, shift: float, temperature: float, lang: str) -> str:
    if greedy:
        return tr(lang, "softmax.toy.note.greedy")
    parts = []
    if shift:
        parts.append(tr(lang, "softmax.toy.note.shift"))
    if temperature < 1:
        parts.append(tr(lang, "softmax.toy.note.cold", t=f"{temperature:g}"))
    elif temperature > 1:
        parts.append(tr(lang, "softmax.toy.note.hot", t=f"{temperature:g}"))
    if not parts:
        return tr(lang, "softmax.toy.note.plain")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


# ----------------------------------------------------------------------------- formatting


def show_piece(token: str) -> str:
    """A token as it reads on a slide: a leading space shown as ␣ (" Paris" -> "␣Paris")."""
    return "␣" + token[1:] if token.startswith(" ") else token


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt_num(x: float | None) -> str:
    """A logit-like number: at most 2 decimals, at least 1 ("5.0", "−2.25"); "—" for None."""
    if x is None:
        return "—"
    text = f"{x:.2f}"
    text = text[:-1] if text.endswith("0") else text
    if text in ("-0.0", "-0.00"):
        return "0.0"
    return text.replace("-", "\u2212")  # a real minus sign: readable from the back of the room


def fmt_exp(x: float) -> str:
    """e^x for a projector, from the exponent x itself (so it works past float overflow).

    200.9, 24.5, 4.06, 0.368, then 4.5 × 10⁻⁵ / 2.7 × 10⁴³ once it stops fitting in a few digits."""
    digits = x / math.log(10)  # log10(e^x)
    if -3 <= digits < 6:
        v = math.exp(x)
        return f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3g}"
    power = math.floor(digits)
    mantissa = 10 ** (digits - power)
    if mantissa >= 9.95:  # 9.97 would print as 10.0 × 10^k
        mantissa, power = 1.0, power + 1
    return f"{mantissa:.1f} × 10{str(power).translate(_SUPERSCRIPT)}"


def fmt_prob(p: float) -> str:
    """Whole percent from 10% up (96%, 57%: as the lesson says them), one decimal below."""
    if p == 0:
        return "0%"
    if p >= 0.095:
        return f"{100 * p:.0f}%"
    if p >= 0.0005:
        return f"{100 * p:.1f}%"
    return "<0.1%"


def table_markdown(table: dict, lang: str = "en") -> str:
    """The table as compact Markdown: token, x, [x + shift], [/ T], e^…, probability, and the sum.

    The shift and temperature columns appear only when they do something, so the default view is
    exactly the lesson's table (token, logit, e^x, probability, Σ 200.9)."""
    shift, temp, greedy = table["shift"], table["temperature"], table["greedy"]
    arg = "x" if not shift else f"x {'+' if shift > 0 else '−'} {abs(shift):g}"
    heads, cells = ["token", "logit x"], [lambda r: fmt_num(r["logit"])]
    if shift:
        heads.append(arg)
        cells.append(lambda r: fmt_num(r["shifted"]))
    if temp != 1 and not greedy:
        arg = f"({arg}) / {temp:g}" if shift else f"x / {temp:g}"
        heads.append(arg)
        cells.append(lambda r: fmt_num(r["scaled"]))
    if not greedy:
        heads.append(f"e^{arg}" if arg == "x" else f"e^({arg})")
        cells.append(lambda r: fmt_exp(r["scaled"]))
    heads.append(tr(lang, "softmax.toy.col.probability"))  # "token", "logit x": the same in every language
    cells.append(lambda r: fmt_prob(r["prob"]))

    lines = ["| " + " | ".join(heads) + " |", "|:--" + "|--:" * (len(heads) - 1) + "|"]
    for i, r in enumerate(table["rows"]):
        row = [escape_markdown_cell(show_piece(r["token"]))] + [cell(r) for cell in cells]
        if i == table["top"]:
            row = [f"**{c}**" for c in row]
        lines.append("| " + " | ".join(row) + " |")
    total = [] if greedy else [f"**{fmt_exp(table['log_exp_sum'])}**"]
    lines.append("| " + " | ".join(["**Σ**"] + [""] * (len(heads) - 2 - len(total)) + total + ["**100%**"]) + " |")
    lines += ["", f"*{table['note']}*"]
    if table["overflow"]:
        lines += ["", f"*{tr(lang, 'softmax.toy.overflow')}*"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the figure


def softmax_figure(table: dict, height: int = 360, lang: str = "en") -> go.Figure:
    """Two panels: e^… bars with Σ annotated (left), probabilities on a fixed 0–1 axis (right)."""
    rows = table["rows"]
    labels = unique_labels([escape_plotly(show_piece(r["token"])) for r in rows])
    colours = [ACCENT if i == table["top"] else MUTED for i in range(len(rows))]
    if table["greedy"]:
        left_title = tr(lang, "softmax.toy.fig.exp_greedy")
    elif table["overflow"]:
        left_title = tr(lang, "softmax.toy.fig.exp_overflow")
    else:
        left_title = "e^(x / T)" if not table["shift"] else tr(lang, "softmax.toy.fig.exp_shifted")
    titles = (left_title, tr(lang, "softmax.toy.fig.probability"))
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.12)
    fig.update_annotations(font_size=14)  # Plotly's 16 px titles touch each other on a 390 px phone

    if table["greedy"]:
        fig.add_annotation(
            text=tr(lang, "softmax.toy.fig.greedy"), x=0.5, y=0.5, xref="x domain", yref="y domain",
            showarrow=False, font=dict(size=16), row=1, col=1,
        )
    else:
        if table["overflow"]:
            m = max(r["scaled"] for r in rows)
            values = [math.exp(r["scaled"] - m) for r in rows]
            texts = [f"{v:.3g}" for v in values]
        else:
            values = [r["exp"] for r in rows]
            texts = [fmt_exp(r["scaled"]) for r in rows]
        fig.add_trace(
            go.Bar(x=labels, y=values, text=texts, textposition="outside", marker_color=colours,
                   cliponaxis=False, hovertemplate="%{x}: %{text}<extra></extra>"),
            row=1, col=1,
        )
        fig.update_yaxes(range=[0, max(values) * 1.2 or 1], row=1, col=1)
        fig.add_annotation(
            text=f"Σ = {fmt_exp(table['log_exp_sum'])}", x=0.98, y=0.98, xref="x domain", yref="y domain",
            xanchor="right", yanchor="top", showarrow=False, font=dict(size=18), row=1, col=1,
        )

    probs = [r["prob"] for r in rows]
    fig.add_trace(
        go.Bar(x=labels, y=probs, text=[fmt_prob(p) for p in probs], textposition="outside", marker_color=colours,
               cliponaxis=False, hovertemplate="%{x}: %{text}<extra></extra>",
               customdata=[[r["token"], r["logit"]] for r in rows]),  # what the page redraws from (toy_live.py)
        row=1, col=2,
    )
    fig.update_yaxes(range=[0, 1.12], tickformat=".0%", row=1, col=2)
    return base_layout(fig, height, dict(l=50, r=20, t=40, b=40), font={**FONT, "size": 15}, bargap=0.3)


__all__ = [
    "TOY_PATH", "load_toy", "parse_logit", "parse_logits", "parse_rows", "softmax_table",
    "table_markdown", "softmax_figure", "show_piece", "fmt_num", "fmt_exp", "fmt_prob",
]
