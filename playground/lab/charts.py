"""Figures for one sampling step and for a whole run: pure functions, records in, PlainFigures (Plotly's JSON) out.

No torch, no gradio: they can be unit-tested and rebuilt from saved records (a finished run replayed
from gr.State). Each figure is re-sent whole on every update, so all use template="none", one trace
per panel and fixed axes: small to stream, and bars that do not jump from step to step.
"""

from __future__ import annotations

import copy
import functools
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.step import Stage, StepRecord

from ..common.colours import BLUE, GREEN, GREY, INK, SKY, VERMILLION
from ..common.figures import TEXT, PlainFigure, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import pct, piece_hover, piece_label, prob_text, show_steps, show_token, tick_count
from .stage_panels import PRESENT_ROWS, chosen_row, folded, stage_figure, stage_or_none, top_rows, wrapped

# the stage figure lives in stage_panels.py; its names stay importable from here
__all__ = ["BLUE", "GREY", "INK", "PRESENT_ROWS", "SKY", "VERMILLION", "candidate_segments", "draw_figure",
           "empty_figure", "folded", "run_figure", "stage_figure", "top_rows", "wrapped"]

# ---- one step: the random draw ----------------------------------------------------------------------


def _segment(segs: dict, start: float, width: float, colour: str, label: str, hover: str) -> None:
    """label: already a Plotly label (escaped)."""
    if width <= 0:
        return
    dark = colour in (BLUE, VERMILLION)
    segs["base"].append(start)
    segs["x"].append(width)
    segs["colour"].append(colour)
    segs["text_colour"].append("white" if dark else "black")
    segs["text"].append(label if width >= 0.07 else "")
    segs["hover"].append(hover)


def candidate_segments(record: StepRecord, probs):
    """The sampler's cumulative bar over the candidates, in rank order: (token, p, start, width, colour) for each
    with room left on [0, 1); the chosen token vermilion, the others alternating blue and sky."""
    cum, shade = 0.0, 0
    for token, p in zip(record.candidates, probs):
        width = min(p, 1.0 - cum)
        if width <= 0:
            continue
        if token.id == record.token_id:
            colour = VERMILLION
        else:
            colour, shade = (BLUE, SKY)[shade % 2], shade + 1
        yield token, p, cum, width, colour
        cum += width


def _draw_segments(record: StepRecord, final: Stage, lang: str) -> dict:
    """Candidates in rank order (prob > 0), then the rest: the same layout as the sampler's bar."""
    segs = {k: [] for k in ("base", "x", "colour", "text_colour", "text", "hover")}
    before = bytes.fromhex(record.pending_hex)
    cum = 0.0
    for token, p, cum, width, colour in candidate_segments(record, final.probs):
        span = f"[{cum:.3f}, {cum + width:.3f})"
        shown = show_token(token, before, lang=lang)
        _segment(segs, cum, width, colour, piece_label(shown, 10), f"{piece_hover(shown)} · {pct(p)} · {span}")
        cum += width
    rest = 1.0 - cum
    if rest <= 1e-6:
        return segs
    label = tr(lang, "lab.draw.rest")
    if chosen_row(record) is None:  # chosen from the tail: its own interval inside the rest
        low, high = min(max(record.draw.low, cum), 1.0), min(max(record.draw.high, cum), 1.0)
        _segment(segs, cum, low - cum, GREY, label, tr(lang, "lab.draw.other", p=pct(low - cum)))
        shown = show_token(record, before, lang=lang)
        _segment(segs, low, high - low, VERMILLION, piece_label(shown, 10),
                 f"{piece_hover(shown)} · {pct(high - low)} · [{low:.3f}, {high:.3f})")
        _segment(segs, high, 1.0 - high, GREY, label, tr(lang, "lab.draw.other", p=pct(1.0 - high)))
    else:
        _segment(segs, cum, rest, GREY, label, tr(lang, "lab.draw.all_other", p=pct(rest)))
    return segs


@functools.lru_cache(maxsize=16)
def _draw_layout(height: int) -> dict:
    """The draw bar's validated layout, without the u line and its note."""
    fig = go.Figure()
    fig.update_xaxes(range=[0, 1], tickvals=[0, 0.25, 0.5, 0.75, 1], tickformat=".2~f", fixedrange=True,
                     showgrid=False, zeroline=False, tickfont=dict(size=TEXT))
    fig.update_yaxes(visible=False, range=[-0.5, 0.85], fixedrange=True)
    base_layout(fig, height, dict(l=10, r=10, t=6, b=22), barmode="overlay",
                uniformtext=dict(minsize=TEXT, mode="hide"))
    return fig.layout.to_plotly_json()


def draw_figure(record: StepRecord, height: int = 120, lang: str = "en") -> PlainFigure:
    """The draw as one cumulative bar over [0, 1): u falls in exactly one token's segment. It streams with every
    step, so it is a cached, validated layout and a plain trace (plotly's validation cost ~8 ms a step)."""
    final = stage_or_none(record, "final")
    if final is None or not record.candidates:
        return empty_figure(tr(lang, "lab.draw.empty"), height)
    segs = _draw_segments(record, final, lang)
    bar = dict(type="bar", x=segs["x"], base=segs["base"], y=[0] * len(segs["x"]), orientation="h", width=0.9,
               marker=dict(color=segs["colour"], line=dict(color="white", width=1)),
               text=segs["text"], textposition="inside", insidetextanchor="middle",
               textfont=dict(size=TEXT, color=segs["text_colour"]),
               hovertext=segs["hover"], hovertemplate="%{hovertext}<extra></extra>")
    layout = copy.deepcopy(_draw_layout(height))
    u = record.draw.u
    if u is None:
        note = dict(text=tr(lang, "lab.draw.greedy"), x=0.5, xanchor="center")
    else:
        layout["shapes"] = [dict(type="line", x0=u, x1=u, y0=-0.55, y1=0.55, line=dict(color="black", width=2))]
        anchor = "left" if u < 0.12 else "right" if u > 0.88 else "center"
        note = dict(text=f"u = {u:.3f}", x=u, xanchor=anchor)
    layout["annotations"] = [dict(**note, y=0.55, yanchor="bottom", xref="x", yref="y", showarrow=False,
                                  font=dict(size=TEXT))]
    return PlainFigure([bar], layout)


# ---- the whole run ------------------------------------------------------------------------------------


def _mirostat_traces(records, steps, who, line, lang) -> list[dict]:
    """With mirostat, on the bits axis: the mu each step cut at, and the surprise -log2 p of the token it drew
    (what moves mu towards the target tau). None without mirostat."""
    mus = [next((s.applied for s in r.stages if s.name == "mirostat"), None) for r in records]
    if all(m is None for m in mus):
        return []
    surprise = [-math.log2(r.stages[-1].chosen_prob) if r.stages[-1].chosen_prob > 0 else None for r in records]
    return [
        dict(type="scatter", x=steps, y=mus, name=tr(lang, "lab.run.mu_trace"), line=dict(color=GREEN, width=1.5),
             hovertext=[f"{w}<br>μ = {m:.2f} bits" if m is not None else w for w, m in zip(who, mus)], **line),
        dict(type="scatter", x=steps, y=surprise, name=tr(lang, "lab.run.surprise_trace"),
             line=dict(color=VERMILLION, width=1, dash="dot"),
             hovertext=[f"{w}<br>{tr(lang, 'lab.run.surprise_hover', s=f'{s:.2f}')}" if s is not None else w
                        for w, s in zip(who, surprise)], **line)]


@functools.lru_cache(maxsize=16)
def _run_layout(height: int, lang: str) -> dict:
    """The run chart's validated layout: two panels on one step axis, the bottom one with a second (log) axis
    for the kept count; the ranges and ticks that follow the run are set per figure (run_figure)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, row_heights=[0.42, 0.58],
                        specs=[[{}], [{"secondary_y": True}]])
    fig.update_yaxes(range=[0, 1.05], tickvals=[0, 0.5, 1], title_text=tr(lang, "lab.run.p_axis"), row=1, col=1,
                     tickfont=dict(color=VERMILLION))
    fig.update_yaxes(title_text=tr(lang, "lab.run.bits_axis"), row=2, col=1, secondary_y=False,
                     tickfont=dict(color=BLUE))
    fig.update_yaxes(type="log", title_text=tr(lang, "lab.run.kept_axis"), row=2, col=1, secondary_y=True,
                     showgrid=False, tickfont=dict(color="#555"))
    fig.update_yaxes(title_font=dict(size=TEXT), zeroline=False, gridcolor="#EEEEEE", fixedrange=True)
    fig.update_xaxes(tick0=1, showgrid=False, zeroline=False)
    fig.update_xaxes(title_text=tr(lang, "lab.run.step_axis"), title_font=dict(size=TEXT), row=2, col=1)
    # the shown step's dashed line on both panels, moved (or dropped) per figure
    fig.add_vline(x=0, line=dict(color=INK, width=1, dash="dash"), exclude_empty_subplots=False)
    base_layout(fig, height, dict(l=44, r=44, t=22, b=34), showlegend=True,
                legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font=dict(size=TEXT)),
                hovermode="closest")
    return fig.layout.to_plotly_json()


def run_figure(records: list[StepRecord], height: int = 260, selected: int | None = None,
               lang: str = "en") -> PlainFigure:
    """Over the steps: p(chosen) under final (top panel); raw entropy in bits and the final kept
    count on a log axis (bottom panel). The two bottom axes are aligned so that a kept count of 2^H
    sits level with an entropy of H bits. Steps without stage data (capture off) are skipped.
    """
    shown = show_steps(records, lang=lang) if records else []
    rows = [(r, stage_or_none(r, "raw"), stage_or_none(r, "final"), s) for r, s in zip(records, shown)]
    rows = [(r, raw, final, s) for r, raw, final, s in rows if raw is not None and final is not None]
    if not rows:
        return empty_figure(tr(lang, "lab.run.empty" if not records else "lab.run.no_data"), height)
    who = [tr(lang, "lab.run.who", step=r.step + 1, piece=piece_hover(s)) for r, _, _, s in rows]
    rows = [(r, raw, final) for r, raw, final, _ in rows]
    steps = [r.step + 1 for r, _, _ in rows]  # counted from 1, as the status line and the scrubber count
    prob = [final.chosen_prob for _, _, final in rows]
    bits = [max(raw.entropy_bits, 0.0) for _, raw, _ in rows]
    kept = [max(final.kept_count, 1) for _, _, final in rows]

    line = dict(mode="lines+markers", marker=dict(size=4), hovertemplate="%{hovertext}<extra></extra>")
    data = [
        dict(type="scatter", x=steps, y=prob, name=tr(lang, "lab.run.p_trace"), line=dict(color=VERMILLION, width=1.5),
             hovertext=[f"{w}<br>p = {prob_text(p)}" for w, p in zip(who, prob)], **line, xaxis="x", yaxis="y"),
        dict(type="scatter", x=steps, y=bits, name=tr(lang, "lab.run.entropy_trace"),
             line=dict(color=BLUE, width=1.5), hovertext=[f"{w}<br>{tr(lang, 'lab.run.entropy_hover', h=f'{h:.2f}')}"
                                                          for w, h in zip(who, bits)], **line, xaxis="x2", yaxis="y2"),
        dict(type="scatter", x=steps, y=kept, name=tr(lang, "lab.run.kept_trace"),
             line=dict(color="#555", width=1, dash="dot"),
             hovertext=[f"{w}<br>{tr(lang, 'lab.run.kept_hover', count=f'{k:,}')}" for w, k in zip(who, kept)],
             **line, xaxis="x2", yaxis="y3")]
    mirostat = _mirostat_traces([r for r, _, _ in rows], steps, who, line, lang)
    data += [{**trace, "xaxis": "x2", "yaxis": "y2"} for trace in mirostat]
    # a shared top, in bits, for both bottom axes
    top = max(1.0, max(bits), math.log2(max(kept)), *(v for t in mirostat for v in t["y"] if v is not None)) * 1.08
    layout = copy.deepcopy(_run_layout(height, lang))
    layout["yaxis2"]["range"] = [0, top]
    decades = [10**e for e in range(int(top * math.log10(2)) + 1)]
    layout["yaxis3"].update(range=[0, top * math.log10(2)], tickvals=decades, ticktext=[tick_count(d) for d in decades])
    span = max(steps) - min(steps)
    for axis in ("xaxis", "xaxis2"):
        layout[axis].update(dtick=max(1, math.ceil((span + 1) / 12)), range=[min(steps) - 0.5, max(steps) + 0.5])
    vlines = layout.pop("shapes")
    if selected is not None and 0 <= selected < len(records):  # the step the page shows (an index into records)
        x = records[selected].step + 1
        layout["shapes"] = [{**shape, "x0": x, "x1": x} for shape in vlines]
    return PlainFigure(data, layout)
