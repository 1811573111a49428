"""The lesson "why the same seed can give another token in a busy room": a BatchEffect record as a figure and a
table. Pure functions, records in, Plotly figures or Markdown out (no torch, no gradio).

The figure has two parts: on top, the step's cumulative bar as the draw reads it (the candidates' final
probabilities side by side, u as a line, the token where the room changed the logits most marked); below, how
much the room changed each candidate's logit, in the default arithmetic and in the batch-invariant mode (zero,
exactly, for every token).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.batch_effect import ArithmeticCheck, BatchEffect
from playground import limits

from ..common.colours import BLUE, GREY, INK, SKY, VERMILLION
from ..common.figures import TEXT, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import piece_hover, piece_label, piece_markdown, show_token, show_tokens, unique_labels

SHOWN = 10  # candidates in the figure


def _sci(x: float) -> str:
    """A round-off-sized number: 0 exactly, else three significant digits in scientific notation."""
    return "0" if x == 0 else f"{x:.2e}"


def _token(token, lang: str) -> str:
    return piece_markdown(show_token(token, lang=lang))


def batch_effect_figure(effect: BatchEffect | None, lang: str = "en", height: int = 400) -> go.Figure:
    if effect is None:
        return empty_figure(tr(lang, "batch.empty"), 200)
    n = min(SHOWN, len(effect.candidates))
    shown = show_tokens(effect.candidates[:n], lang=lang)
    labels = unique_labels([piece_label(s) for s in shown])
    fig = make_subplots(rows=2, cols=1, row_heights=[0.3, 0.7], vertical_spacing=0.14,
                        subplot_titles=(tr(lang, "batch.bar_title"), tr(lang, "batch.delta_title")))
    _bar(fig, effect, labels, [piece_hover(s) for s in shown], lang)
    rows = list(range(n))
    modes = [(effect.default, VERMILLION, "batch.default")]
    if effect.invariant is not None:
        modes.append((effect.invariant, BLUE, "batch.invariant"))
    for check, colour, key in modes:
        name = tr(lang, key) + f" (max |Δ| {_sci(check.max_delta)})"
        fig.add_trace(go.Bar(
            y=rows, x=list(check.deltas[:n]), orientation="h", marker_color=colour, name=name,
            hovertemplate="%{y}: Δ = %{x:.3e}<extra>" + tr(lang, key) + "</extra>", showlegend=True,
        ), row=2, col=1)
        if check.max_delta == 0:  # bars of length 0 are invisible: mark "exactly 0" on the axis
            fig.add_trace(go.Scatter(y=rows, x=[0] * n, mode="markers", marker=dict(symbol="diamond", size=8,
                                     color=colour), hoverinfo="skip", showlegend=False), row=2, col=1)
    reach = max([abs(d) for check, _, _ in modes for d in check.deltas[:n]] + [1e-9]) * 1.15
    fig.update_xaxes(range=[-reach, reach], exponentformat="e", tickformat=".1e", nticks=5, gridcolor="#EEEEEE",
                     zeroline=True, zerolinecolor=INK, fixedrange=True, title_text=tr(lang, "batch.delta_axis"),
                     title_font=dict(size=TEXT), row=2, col=1)
    fig.update_yaxes(tickvals=rows, ticktext=labels, range=[n - 0.5, -0.5], fixedrange=True, row=2, col=1)
    left = min(150, 12 + 6 * max(len(label) for label in labels))
    return base_layout(fig, height, dict(l=left, r=14, t=28, b=40), showlegend=True, barmode="group",
                       legend=dict(orientation="h", x=0, y=-0.2, yanchor="top", font=dict(size=TEXT)))


def _bar(fig: go.Figure, effect: BatchEffect, labels: list[str], hovers: list[str], lang: str) -> None:
    """The cumulative bar (alone) of the shown candidates, then the rest; u as a line, max |Δ|'s token marked."""
    start = 0.0
    for i, (p, label, hover) in enumerate(zip(effect.probs, labels, hovers)):
        fig.add_trace(go.Bar(x=[p], y=[0], base=[start], orientation="h", width=0.8, showlegend=False,
                             marker=dict(color=SKY if i % 2 else BLUE, line=dict(color="white", width=1)),
                             text=label if p > 0.06 else "", textposition="inside", insidetextanchor="middle",
                             hovertemplate=f"{hover}: [{start:.4f}, {start + p:.4f})<extra></extra>"), row=1, col=1)
        start += p
    if start < 1:
        fig.add_trace(go.Bar(x=[1 - start], y=[0], base=[start], orientation="h", width=0.8, showlegend=False,
                             marker_color=GREY, hovertemplate=tr(lang, "batch.rest") + "<extra></extra>"), row=1, col=1)
    check = effect.default
    mid = (check.delta_low + check.delta_high) / 2
    side = "left" if mid > 0.6 else "right"  # the label stays inside the chart at either end of the bar
    fig.add_trace(go.Scatter(x=[mid], y=[0.62], mode="markers+text", marker=dict(symbol="triangle-down", size=11,
                             color=VERMILLION), text=[tr(lang, "batch.max_here")], textposition=f"middle {side}",
                             textfont=dict(size=TEXT, color=VERMILLION), showlegend=False, hoverinfo="skip"), row=1, col=1)
    if effect.u is not None:
        fig.add_shape(type="line", x0=effect.u, x1=effect.u, y0=-0.55, y1=0.45, line=dict(color=INK, width=2),
                      row=1, col=1)
        fig.add_annotation(x=effect.u, y=-0.55, yanchor="top", text=f"u = {effect.u:.4f}", showarrow=False,
                           font=dict(size=TEXT), row=1, col=1)
    fig.update_xaxes(range=[0, 1], showticklabels=False, showgrid=False, fixedrange=True, row=1, col=1)
    fig.update_yaxes(visible=False, range=[-1.3, 0.9], fixedrange=True, row=1, col=1)


def _verdict(check: ArithmeticCheck, greedy: bool, lang: str) -> str:
    if check.max_delta == 0:
        return tr(lang, "batch.verdict.identical")
    if check.flips:
        return tr(lang, "batch.verdict.flips", alone=_token(check.alone, lang), room=_token(check.room, lang))
    if greedy:
        gap = check.alone_draw.logit_gap or 0.0
        return tr(lang, "batch.verdict.greedy_safe", gap=_sci(gap), delta=_sci(check.max_delta))
    margin = check.alone_draw.margin or 0.0
    if check.edge_shift == 0:
        return tr(lang, "batch.verdict.safe_still", margin=_sci(margin))
    return tr(lang, "batch.verdict.safe", margin=_sci(margin), shift=_sci(check.edge_shift),
              times=f"{margin / check.edge_shift:,.0f}")


def batch_effect_markdown(effect: BatchEffect | None, lang: str = "en", vocab: int | None = None) -> str:
    """The two arithmetics side by side, and what the live room runs."""
    if effect is None:
        return tr(lang, "batch.intro")
    greedy = effect.u is None
    head = tr(lang, "batch.head", step=effect.step + 1, rows=effect.rows, strangers=effect.rows - 1,
              joined=effect.joined_after, seed=effect.seed, ms=f"{effect.forward_ms:,.0f}")
    head += " " + (tr(lang, "batch.head_greedy") if greedy else tr(lang, "batch.head_u", u=f"{effect.u:.6f}"))
    checks = [effect.default] + ([effect.invariant] if effect.invariant is not None else [])
    titles = [tr(lang, "batch.default")] + ([tr(lang, "batch.invariant")] if effect.invariant is not None else [])
    total = f"{vocab:,}" if vocab else "V"
    lines = [
        "| | " + " | ".join(titles) + " |",
        "|---|" + "---|" * len(checks),
        _row(tr(lang, "batch.row.changed"), [f"{c.changed:,} / {total}" for c in checks]),
        _row(tr(lang, "batch.row.max"), [_sci(c.max_delta) for c in checks]),
        _row(tr(lang, "batch.row.bar"), [_where(c, lang) for c in checks]),
        _row(tr(lang, "batch.row.drawn"), [f"{_token(c.alone, lang)} → {_token(c.room, lang)}" for c in checks]),
    ]
    if greedy:
        lines.append(_row(tr(lang, "batch.row.gap"), [_sci(c.alone_draw.logit_gap or 0.0) for c in checks]))
    else:
        lines.append(_row(tr(lang, "batch.row.margin"), [_sci(c.alone_draw.margin or 0.0) for c in checks]))
        lines.append(_row(tr(lang, "batch.row.shift"), [_sci(c.edge_shift) for c in checks]))
    lines.append(_row(tr(lang, "batch.row.verdict"), [_verdict(c, greedy, lang) for c in checks]))
    mode = "on" if effect.room_invariant else "native" if effect.room_native else "off"
    notes = [tr(lang, f"batch.room_mode.{mode}")]
    if effect.invariant is None:
        notes.append(tr(lang, "batch.unavailable", why=effect.invariant_unavailable))
    knife = effect.default.alone_draw.margin
    if knife is not None and knife < limits.KNIFE_EDGE_MARGIN:
        notes.append(tr(lang, "batch.knife"))
    return head + "\n\n" + "\n".join(lines) + "\n\n" + "  \n".join(notes)


def _row(title: str, cells: list[str]) -> str:
    return f"| {title} | " + " | ".join(cells) + " |"


def _where(check: ArithmeticCheck, lang: str) -> str:
    if check.bar_delta == 0:
        return "0"
    return tr(lang, "batch.where", delta=_sci(check.bar_delta), token=_token(check.delta_token, lang),
              rank=check.delta_rank + 1, low=f"{check.delta_low:.4f}", high=f"{check.delta_high:.4f}")


__all__ = ["batch_effect_figure", "batch_effect_markdown"]
