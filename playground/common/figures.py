"""The base of every figure: one font, white background, template "none" (small to stream), the placeholder
shown before there is anything to draw, and PlainFigure, the form of the charts that are redrawn on every streamed
step and every knob move."""

from __future__ import annotations

import copy
import functools

import orjson
import plotly.graph_objects as go

from .colours import INK
from .text import escape_plotly

TEXT = 12  # px: the smallest text of any chart, read at 1280x720 (the presenter view's is BIG_TEXT)
FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=TEXT, color=INK)


def base_layout(fig: go.Figure, height: int, margin: dict, **extra) -> go.Figure:
    extra.setdefault("showlegend", False)
    extra.setdefault("plot_bgcolor", "white")
    extra.setdefault("font", FONT)
    fig.update_layout(
        template="none", height=height, margin=margin, paper_bgcolor="white", hoverlabel=dict(font_size=TEXT + 1), **extra,
    )
    return fig


class PlainFigure:
    """A figure held as the JSON Plotly.js reads: plain dicts and lists, from layouts validated once (cached) and
    plain traces. The step charts are rebuilt on every streamed step and every knob move, and a go.Figure made from
    the same dicts cost ~5 ms a chart before it reached the wire (its graph objects built, deep-copied, walked again
    to serialise): in a room of streaming pages that was most of the web process's chart time. This one costs a dump.

    Gradio's Plot takes it as it takes a go.Figure (it calls to_json). `.data` and `.layout` read it as graph
    objects, validated when first read: the tests read figures so, and that validates what the fast path skips."""

    __slots__ = ("_spec", "_validated")

    def __init__(self, data: list[dict] | None = None, layout: dict | None = None):
        self._spec = {"data": data or [], "layout": layout or {}}
        self._validated: go.Figure | None = None

    def to_json(self) -> str:
        return orjson.dumps(self._spec, option=orjson.OPT_SERIALIZE_NUMPY).decode()

    def to_plotly_json(self) -> dict:
        """A copy of the figure's JSON (as go.Figure.to_plotly_json gives one), for a caller to change."""
        return orjson.loads(orjson.dumps(self._spec, option=orjson.OPT_SERIALIZE_NUMPY))

    def update_layout(self, **top_level) -> PlainFigure:
        """Sets top-level layout properties (meta, height...) in place, and returns the figure, as go.Figure does;
        unlike it, a dict value replaces the property whole (no magic underscores, no merging)."""
        self._spec["layout"].update(top_level)
        self._validated = None
        return self

    def figure(self) -> go.Figure:
        """The figure as a validated go.Figure (plotly raises on a property it does not know)."""
        if self._validated is None:
            self._validated = go.Figure(self.to_plotly_json())
        return self._validated

    @property
    def data(self):
        return self.figure().data

    @property
    def layout(self):
        return self.figure().layout


def empty_figure(message: str, height: int = 200) -> PlainFigure:
    """A blank placeholder with a centred message (before any run, or when there is nothing to draw); every new
    run hands the page three of them, so each is validated once and then copied."""
    return PlainFigure(layout=copy.deepcopy(_empty_layout(message, height)))


@functools.lru_cache(maxsize=256)
def _empty_layout(message: str, height: int) -> dict:
    fig = go.Figure()
    fig.add_annotation(
        text=escape_plotly(message), x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
        font=dict(size=13, color="#777"),
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, height, dict(l=10, r=10, t=10, b=10)).layout.to_plotly_json()


# ---- the presenter view and the dark theme ---------------------------------------------------------------

BIG_TEXT = 14  # px: the smallest text of a chart in the presenter view, read from the back of a room
BIG_HEIGHT = 1.45  # charts grow by this much in the presenter view
DARK_INK, DARK_MUTED, DARK_GRID, DARK_GAP = "#E5E7EB", "#C0C4CC", "#374151", "#1F2937"
_TO_DARK = {"#333333": DARK_INK, "black": DARK_INK, "#555": DARK_MUTED, "#777": DARK_MUTED, "#EEEEEE": DARK_GRID}


def for_view(fig: go.Figure | PlainFigure, big: bool = False, dark: bool = False,
             grow: bool = True) -> go.Figure | PlainFigure:
    """A chart as the page shows it: `big` (presenter view) raises every font to BIG_TEXT px and, with `grow`,
    the chart's height and label margin with it (a figure made for big text keeps its own); `dark` (the page's
    dark theme) lets the page's background through and turns ink and grid light, so no chart is a white box on a
    dark page. Walks the figure's JSON once, so any chart builder's figure works, without re-validating it."""
    if not big and not dark:
        return fig
    spec = fig.to_plotly_json()
    _walk(spec, big, dark, "")
    layout = spec["layout"]
    if big and grow:
        layout["height"] = round(layout.get("height", 300) * BIG_HEIGHT)
        margin = layout.setdefault("margin", {})
        for side, grow in (("l", BIG_TEXT / 9), ("t", 1.6), ("b", 1.6), ("r", 1.2)):
            if side in margin:
                margin[side] = round(margin[side] * grow)
    if dark:
        layout["paper_bgcolor"] = layout["plot_bgcolor"] = "rgba(0,0,0,0)"
    return PlainFigure(spec["data"], layout)


def _walk(node, big: bool, dark: bool, key: str) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, big, dark, key)
        return
    if not isinstance(node, dict):
        return
    for name, value in node.items():
        if big and name == "size" and key.endswith("font"):  # font, tickfont, textfont, title font...
            node[name] = [max(v, BIG_TEXT) for v in value] if isinstance(value, list) else max(value, BIG_TEXT)
        elif big and name == "minsize":  # uniformtext: bar labels smaller than this are shown anyway
            node[name] = max(value, BIG_TEXT)
        elif dark and name in ("color", "gridcolor", "linecolor", "bordercolor"):
            if key == "line" and value == "white":  # the gaps between a bar's segments
                node[name] = DARK_GAP
            elif key == "textfont":  # text inside a light bar stays black; text beside a bar (ink) turns light
                node[name] = [DARK_INK if v == INK else v for v in value] if isinstance(value, list) else (
                    DARK_INK if value == INK else value)
            elif isinstance(value, list):
                node[name] = [_TO_DARK.get(v, v) if isinstance(v, str) else v for v in value]
            elif isinstance(value, str):
                node[name] = _TO_DARK.get(value, value)
        else:
            _walk(value, big, dark, name)
