"""Figures for one sampling step and for a whole run: pure functions, records in, plotly Figures out.

No torch, no gradio: they can be unit-tested and rebuilt from saved records (a finished run replayed
from gr.State). Each figure is re-sent whole on every update, so all use template="none", one trace
per panel and fixed axes: small to stream, and bars that do not jump from step to step.
"""

from __future__ import annotations

import copy
import functools
import html
import math
import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.step import Stage, StepRecord

from ..common.colours import BLUE, GREY, INK, SKY, VERMILLION
from ..common.figures import base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import Shown, pct, piece_hover, piece_label, prob_text, show_steps, show_token, tick_count

STAGE_TITLES = {"top_k": "lab.stage.top_k", "top_p": "lab.stage.top_p", "min_p": "lab.stage.min_p"}  # filters' panels
FILTER_NAMES = {"top_k": "top-k", "top_p": "top-p", "min_p": "min-p", "final": "argmax"}
FOLD_NAMES = {"temperature": "temperature", "top_k": "top-k", "top_p": "top-p", "min_p": "min-p"}


# ---- one step: every stage side by side -----------------------------------------------------------


def _stage_or_none(record: StepRecord, name: str) -> Stage | None:
    return next((s for s in record.stages if s.name == name), None)


def _chosen_row(record: StepRecord) -> int | None:
    return next((i for i, t in enumerate(record.candidates) if t.id == record.token_id), None)


def _stage_title(stage: Stage, greedy: bool, lang: str) -> str:
    count = f"{stage.kept_count:,}"
    if stage.name == "raw":
        return tr(lang, "lab.stage.raw", count=count)
    if stage.name == "temperature":
        return tr(lang, "lab.stage.temperature", count=count)
    if stage.name == "final":
        return tr(lang, "lab.stage.final_greedy" if greedy else "lab.stage.final_sampled", count=count)
    return tr(lang, STAGE_TITLES[stage.name], count=count, mass=f"{stage.kept_mass:.2f}")


def _row_probs(stage: Stage, extra: bool) -> list[float]:
    """The stage's probs per y row; the off-list chosen token, when shown, is the last row."""
    return [*stage.probs, stage.chosen_prob] if extra else list(stage.probs)


def _shown_rows(record: StepRecord, extra: bool, lang: str = "en") -> list[Shown]:
    """The candidates (and an off-list chosen token), each read as the next token after the text so far."""
    before = bytes.fromhex(record.pending_hex)
    return ([show_token(t, before, lang=lang) for t in record.candidates]
            + ([show_token(record, before, lang=lang)] if extra else []))


def _stage_bars(record, stage, prev, removed_by, chosen, extra, greedy, lang, shown: list[Shown]) -> dict:
    """One panel: kept bars blue (chosen vermillion), bars this stage cut grey at their old height."""
    probs, before = _row_probs(stage, extra), (_row_probs(prev, extra) if prev else None)
    can_remove = stage.name in FILTER_NAMES and (stage.name != "final" or greedy)
    x, colours, hover, text = [], [], [], []
    for i, p in enumerate(probs):
        who = piece_hover(shown[i])
        if p > 0:
            x.append(p)
            colours.append(VERMILLION if i == chosen else BLUE)
            hover.append(f"{who} · {pct(p)}")
            text.append(pct(p) if p >= 0.01 else "")
            continue
        if can_remove and before is not None and before[i] > 0:
            removed_by[i] = FILTER_NAMES[stage.name]
            x.append(before[i])
            colours.append(GREY)
            hover.append(tr(lang, "lab.bar.removed_had", who=who, filter=removed_by[i], p=pct(before[i])))
        else:
            x.append(0.0)
            colours.append(BLUE)
            hover.append(tr(lang, "lab.bar.removed", who=who, filter=removed_by[i]) if i in removed_by else f"{who} · 0%")
        text.append("")
    return dict(
        type="bar",
        x=x,
        y=list(range(len(probs))),
        orientation="h",
        marker=dict(color=colours, line=dict(width=0)),
        text=text,
        textposition=["inside" if v >= 0.3 else "outside" for v in x],
        insidetextanchor="end",
        textfont=dict(size=9, color=["white" if v >= 0.3 else INK for v in x]),
        cliponaxis=False,
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
    )


def _y_labels(record: StepRecord, chosen: int | None, shown: list[Shown]) -> list[str]:
    labels = [piece_label(s) for s in shown[: len(record.candidates)]]
    if chosen is None:  # drawn from outside the top-N: give it its own row, marked with its rank
        labels.append(piece_label(shown[-1], 10) + f" #{record.chosen_rank + 1}")
        chosen = len(labels) - 1
    labels[chosen] = f"<b>{labels[chosen]}</b>"
    return labels


def folded(stages) -> tuple[list[Stage], list[str]]:
    """(the stages worth a panel, the names of those that change nothing): a stage whose probabilities equal
    the stage before's (a filter that is off, temperature 1) is one note instead of a copy of its neighbour.
    Raw and final always keep their panels."""
    kept, same = [], []
    for i, stage in enumerate(stages):
        before = stages[i - 1] if i else None
        if before is not None and stage.name != "final" and (stage.probs, stage.kept_count) == (
                before.probs, before.kept_count):
            same.append(stage.name)
        else:
            kept.append(stage)
    return kept, same


def stage_figure(record: StepRecord, height: int = 360, lang: str = "en", fold: bool = False,
                 log: bool = False) -> go.Figure:
    """One horizontal-bar panel per pipeline stage (raw … final), sharing one y axis of candidates.

    Rows are the raw top-N, most probable at the top, in the same order in every panel, so the eye
    can follow a token from stage to stage. If the chosen token is not among them it gets an extra
    last row (its label ends with its 1-based raw rank).

    This figure streams during a run, so it is assembled from a cached, already validated layout and
    plain trace dicts: plotly's per-property validation of six subplots cost ~80 ms a step.

    fold: panels equal to the one before become one note (the presenter view); log: a log x axis from
    0.01 %, so that the tail a filter cuts is visible (bars under 1 % are hair-thin on a linear one).
    """
    if not record.stages or not record.candidates:
        return empty_figure(tr(lang, "lab.stage.empty"), height)
    chosen = _chosen_row(record)
    extra = chosen is None
    greedy = record.draw.u is None
    shown = _shown_rows(record, extra, lang)
    labels = _y_labels(record, chosen, shown)
    stages, same = folded(record.stages) if fold else (record.stages, [])
    rows = len(labels)
    layout = copy.deepcopy(_stage_layout(len(stages), rows, height, lang, log))
    for annotation, stage in zip(layout["annotations"], stages):  # the first annotations are the subplot titles
        # folded (presenter) titles take a line per fact: a wide line would run into its neighbour's
        annotation["text"] = _stage_title(stage, greedy, lang).replace(" · ", "<br>") if fold else _stage_title(
            stage, greedy, lang)
    if same:
        names = ", ".join(FOLD_NAMES.get(name, name) for name in same)
        layout["annotations"].append(dict(
            text=tr(lang, "lab.stage.folded", names=names), x=0, y=0, xref="paper", yref="paper", xanchor="left",
            yanchor="top", yshift=-36, showarrow=False, font=dict(size=9, color="#555")))  # a line under the key
        layout["margin"]["b"] += 18
    for col in range(1, len(stages) + 1):
        layout[f"yaxis{col if col > 1 else ''}"]["ticktext"] = labels
    # a fixed left margin sized to the labels: automargin would make the browser measure every redraw
    layout["margin"]["l"] = min(150, 12 + 6 * max(len(_plain(label)) for label in labels))
    removed_by: dict[int, str] = {}
    data = []
    for col, stage in enumerate(stages, start=1):
        prev = stages[col - 2] if col > 1 else None
        bars = _stage_bars(record, stage, prev, removed_by, rows - 1 if extra else chosen, extra, greedy, lang, shown)
        data.append({**bars, "xaxis": f"x{col if col > 1 else ''}", "yaxis": f"y{col if col > 1 else ''}"})
    return go.Figure(data=data, layout=layout, _validate=False)


def _plain(label: str) -> str:
    """A label as it reads: no tags (bold, the subscript of a split character), no entities."""
    return html.unescape(re.sub(r"<[^>]*>", "", label))


@functools.lru_cache(maxsize=64)
def _stage_layout(cols: int, rows: int, height: int, lang: str = "en", log: bool = False) -> dict:
    """The validated layout of a stage figure with `cols` panels and `rows` bars, titles blank, key in `lang`;
    `log`: the x axes on a log scale from 0.01 % to 100 %."""
    fig = make_subplots(rows=1, cols=cols, shared_yaxes=True, horizontal_spacing=0.028, subplot_titles=[" "] * cols)
    fig.update_xaxes(
        range=[0, 1], tickvals=[0, 0.5, 1], ticktext=["0", "50%", "100%"], showgrid=True, gridcolor="#EEEEEE",
        zeroline=False, fixedrange=True, tickfont=dict(size=9), ticks="",
    )
    if log:
        # two labels a panel: the outer ones (0.01 %, 100 %) would run into the next panel's
        fig.update_xaxes(type="log", range=[-4, 0.02], tickvals=[1e-3, 0.1], ticktext=["0.1%", "10%"])
    fig.update_yaxes(
        tickvals=list(range(rows)), range=[rows - 0.5, -0.5], fixedrange=True,
        showgrid=False, zeroline=False, ticks="", tickfont=dict(size=10),
    )
    fig.update_annotations(font=dict(size=10, color=INK))  # the subplot titles
    _key(fig, lang)
    base_layout(fig, height, dict(l=6, r=16, t=36, b=34), bargap=0.18, uniformtext=dict(minsize=9, mode="show"))
    return fig.layout.to_plotly_json()


def _key(fig: go.Figure, lang: str) -> None:
    """A one-line colour key under the panels, instead of a legend box."""
    swatch = '<span style="color:{}">■</span> {}'
    words = (tr(lang, "lab.key.kept"), tr(lang, "lab.key.removed"), tr(lang, "lab.key.chosen"))
    text = "   ".join(swatch.format(c, t) for c, t in zip((BLUE, GREY, VERMILLION), words))
    fig.add_annotation(
        text=text, x=1, y=0, xref="paper", yref="paper", xanchor="right", yanchor="top", yshift=-18,
        showarrow=False, font=dict(size=9, color="#555"),
    )


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
    if _chosen_row(record) is None:  # chosen from the tail: its own interval inside the rest
        low, high = min(max(record.draw.low, cum), 1.0), min(max(record.draw.high, cum), 1.0)
        _segment(segs, cum, low - cum, GREY, label, tr(lang, "lab.draw.other", p=pct(low - cum)))
        shown = show_token(record, before, lang=lang)
        _segment(segs, low, high - low, VERMILLION, piece_label(shown, 10),
                 f"{piece_hover(shown)} · {pct(high - low)} · [{low:.3f}, {high:.3f})")
        _segment(segs, high, 1.0 - high, GREY, label, tr(lang, "lab.draw.other", p=pct(1.0 - high)))
    else:
        _segment(segs, cum, rest, GREY, label, tr(lang, "lab.draw.all_other", p=pct(rest)))
    return segs


def draw_figure(record: StepRecord, height: int = 120, lang: str = "en") -> go.Figure:
    """The draw as one cumulative bar over [0, 1): u falls in exactly one token's segment."""
    final = _stage_or_none(record, "final")
    if final is None or not record.candidates:
        return empty_figure(tr(lang, "lab.draw.empty"), height)
    segs = _draw_segments(record, final, lang)
    fig = go.Figure(
        go.Bar(
            x=segs["x"], base=segs["base"], y=[0] * len(segs["x"]), orientation="h", width=0.9,
            marker=dict(color=segs["colour"], line=dict(color="white", width=1)),
            text=segs["text"], textposition="inside", insidetextanchor="middle",
            textfont=dict(size=10, color=segs["text_colour"]),
            hovertext=segs["hover"], hovertemplate="%{hovertext}<extra></extra>",
        )
    )
    u = record.draw.u
    if u is None:
        note = dict(text=tr(lang, "lab.draw.greedy"), x=0.5, xanchor="center")
    else:
        fig.add_shape(type="line", x0=u, x1=u, y0=-0.55, y1=0.55, line=dict(color="black", width=2))
        anchor = "left" if u < 0.12 else "right" if u > 0.88 else "center"
        note = dict(text=f"u = {u:.3f}", x=u, xanchor=anchor)
    fig.add_annotation(**note, y=0.55, yanchor="bottom", xref="x", yref="y", showarrow=False, font=dict(size=11))
    fig.update_xaxes(range=[0, 1], tickvals=[0, 0.25, 0.5, 0.75, 1], tickformat=".2~f", fixedrange=True,
                     showgrid=False, zeroline=False, tickfont=dict(size=9))
    fig.update_yaxes(visible=False, range=[-0.5, 0.85], fixedrange=True)
    return base_layout(fig, height, dict(l=10, r=10, t=6, b=22), barmode="overlay",
                        uniformtext=dict(minsize=8, mode="hide"))


# ---- the whole run ------------------------------------------------------------------------------------


def run_figure(records: list[StepRecord], height: int = 260, selected: int | None = None,
               lang: str = "en") -> go.Figure:
    """Over the steps: p(chosen) under final (top panel); raw entropy in bits and the final kept
    count on a log axis (bottom panel). The two bottom axes are aligned so that a kept count of 2^H
    sits level with an entropy of H bits. Steps without stage data (capture off) are skipped.
    """
    shown = show_steps(records, lang=lang) if records else []
    rows = [(r, _stage_or_none(r, "raw"), _stage_or_none(r, "final"), s) for r, s in zip(records, shown)]
    rows = [(r, raw, final, s) for r, raw, final, s in rows if raw is not None and final is not None]
    if not rows:
        return empty_figure(tr(lang, "lab.run.empty" if not records else "lab.run.no_data"), height)
    who = [tr(lang, "lab.run.who", step=r.step + 1, piece=piece_hover(s)) for r, _, _, s in rows]
    rows = [(r, raw, final) for r, raw, final, _ in rows]
    steps = [r.step + 1 for r, _, _ in rows]  # counted from 1, as the status line and the scrubber count
    prob = [final.chosen_prob for _, _, final in rows]
    bits = [max(raw.entropy_bits, 0.0) for _, raw, _ in rows]
    kept = [max(final.kept_count, 1) for _, _, final in rows]

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, row_heights=[0.42, 0.58],
                        specs=[[{}], [{"secondary_y": True}]])
    line = dict(mode="lines+markers", marker=dict(size=4), hovertemplate="%{hovertext}<extra></extra>")
    fig.add_trace(go.Scatter(x=steps, y=prob, name=tr(lang, "lab.run.p_trace"), line=dict(color=VERMILLION, width=1.5),
                             hovertext=[f"{w}<br>p = {prob_text(p)}" for w, p in zip(who, prob)], **line), row=1, col=1)
    fig.add_trace(go.Scatter(x=steps, y=bits, name=tr(lang, "lab.run.entropy_trace"), line=dict(color=BLUE, width=1.5),
                             hovertext=[f"{w}<br>{tr(lang, 'lab.run.entropy_hover', h=f'{h:.2f}')}"
                                        for w, h in zip(who, bits)], **line),
                  row=2, col=1, secondary_y=False)
    fig.add_trace(go.Scatter(x=steps, y=kept, name=tr(lang, "lab.run.kept_trace"),
                             line=dict(color="#555", width=1, dash="dot"),
                             hovertext=[f"{w}<br>{tr(lang, 'lab.run.kept_hover', count=f'{k:,}')}"
                                        for w, k in zip(who, kept)], **line),
                  row=2, col=1, secondary_y=True)

    top = max(1.0, max(bits), math.log2(max(kept))) * 1.08  # shared top, in bits
    fig.update_yaxes(range=[0, 1.05], tickvals=[0, 0.5, 1], title_text=tr(lang, "lab.run.p_axis"), row=1, col=1,
                     tickfont=dict(color=VERMILLION))
    fig.update_yaxes(range=[0, top], title_text=tr(lang, "lab.run.bits_axis"), row=2, col=1, secondary_y=False, tickfont=dict(color=BLUE))
    decades = [10**e for e in range(int(top * math.log10(2)) + 1)]
    fig.update_yaxes(type="log", range=[0, top * math.log10(2)], title_text=tr(lang, "lab.run.kept_axis"), row=2, col=1, secondary_y=True,
                     showgrid=False, tickfont=dict(color="#555"),
                     tickvals=decades, ticktext=[tick_count(d) for d in decades])
    fig.update_yaxes(title_font=dict(size=9), zeroline=False, gridcolor="#EEEEEE", fixedrange=True)
    span = max(steps) - min(steps)
    fig.update_xaxes(tick0=1, dtick=max(1, math.ceil((span + 1) / 12)), range=[min(steps) - 0.5, max(steps) + 0.5],
                     showgrid=False, zeroline=False)
    fig.update_xaxes(title_text=tr(lang, "lab.run.step_axis"), title_font=dict(size=9), row=2, col=1)
    if selected is not None and 0 <= selected < len(records):  # the step the page shows (an index into records)
        fig.add_vline(x=records[selected].step + 1, line=dict(color=INK, width=1, dash="dash"))
    return base_layout(fig, height, dict(l=44, r=44, t=22, b=34), showlegend=True,
                        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font=dict(size=9)),
                        hovermode="closest")
