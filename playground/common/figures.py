"""The base of every figure: one font, white background, template "none" (small to stream), and
the placeholder shown before there is anything to draw."""

from __future__ import annotations

import plotly.graph_objects as go

from .colours import INK
from .text import escape_plotly

FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=10, color=INK)


def base_layout(fig: go.Figure, height: int, margin: dict, **extra) -> go.Figure:
    extra.setdefault("showlegend", False)
    extra.setdefault("plot_bgcolor", "white")
    extra.setdefault("font", FONT)
    fig.update_layout(
        template="none", height=height, margin=margin, paper_bgcolor="white", hoverlabel=dict(font_size=11), **extra,
    )
    return fig


def empty_figure(message: str, height: int = 200) -> go.Figure:
    """A blank placeholder with a centred message (before any run, or when there is nothing to draw)."""
    fig = go.Figure()
    fig.add_annotation(
        text=escape_plotly(message), x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
        font=dict(size=13, color="#777"),
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, height, dict(l=10, r=10, t=10, b=10))
