"""Figures for the interventions: who pushed the next token up, and the next token before and after a knock-out.
Pure functions, records in, go.Figures out (drawn on a click, not streamed). No torch, no gradio."""

from __future__ import annotations

import itertools

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.intervention import Attribution, KnockoutResult, PatchResult

from ..common.colours import BLUE, GREY, INK, PROBABILITY_SCALE, SKY, VERMILLION
from ..common.figures import TEXT, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import pct, piece_hover, piece_label, show_token

TOP = 8  # tokens in the before / after chart
BLANK = "rgba(128,128,128,0.14)"  # a patching grid's cell not patched yet (on a light or a dark page)


def token_text(token, lang: str, limit: int = 12) -> str:
    """A token as a chart's label (escaped for Plotly)."""
    return piece_label(show_token(token, lang=lang), limit)


def attribution_figure(a: Attribution | None, lang: str = "en", height: int = 420) -> go.Figure:
    """Top: per block, what its attention and its MLP added to logit(candidate) - logit(rival) (bars, in logits), the
    running total from the embedding on (a line that ends at the model's own difference), and the logit lens's
    difference after each block (dotted, its own axis: it normalises each stream by that stream's own scale). Bottom:
    one block's attention by head."""
    if a is None:
        return empty_figure(tr(lang, "intervene.empty.attribution"), height)
    blocks = list(range(1, len(a.attention) + 1))
    fig = make_subplots(rows=2, cols=1, row_heights=[0.66, 0.34], vertical_spacing=0.26,
                        subplot_titles=[tr(lang, "intervene.chart.blocks"),
                                        tr(lang, "intervene.chart.heads", block=a.head_block)])
    hover = "%{customdata}<extra></extra>"
    for values, colour, key in ((a.attention, BLUE, "intervene.chart.attention"), (a.mlp, SKY, "intervene.chart.mlp")):
        name = tr(lang, key)
        fig.add_trace(go.Bar(x=blocks, y=list(values), name=name, marker_color=colour, hovertemplate=hover,
                             customdata=[tr(lang, "intervene.chart.bar", part=name, block=b, value=f"{v:+.3f}")
                                         for b, v in zip(blocks, values)]), row=1, col=1)
    running = list(itertools.accumulate([a.embedding, *(x + y for x, y in zip(a.attention, a.mlp))]))
    fig.add_trace(go.Scatter(x=[0, *blocks], y=running, name=tr(lang, "intervene.chart.running"), mode="lines+markers",
                             line=dict(color=INK, width=1.5), marker=dict(size=4), hovertemplate=hover,
                             customdata=[tr(lang, "intervene.chart.running_hover", block=b, value=f"{v:+.3f}")
                                         for b, v in zip([0, *blocks], running)]), row=1, col=1)
    # the lens normalises each block's stream by its own scale, not the last one's: its own axis, dotted
    fig.add_trace(go.Scatter(x=blocks, y=list(a.lens), name=tr(lang, "intervene.chart.lens"), mode="lines",
                             line=dict(color=GREY, width=1.5, dash="dot"), yaxis="y3", hovertemplate=hover,
                             customdata=[tr(lang, "intervene.chart.lens_hover", block=b, value=f"{v:+.3f}")
                                         for b, v in zip(blocks, a.lens)]))
    if a.heads:
        heads = list(range(1, len(a.heads) + 1))
        fig.add_trace(go.Bar(x=heads, y=list(a.heads), marker_color=[VERMILLION if v > 0 else GREY for v in a.heads],
                             showlegend=False, hovertemplate=hover,
                             customdata=[tr(lang, "intervene.chart.head_hover", head=h, value=f"{v:+.3f}")
                                         for h, v in zip(heads, a.heads)]), row=2, col=1)
        fig.update_xaxes(tickvals=heads, title_text=tr(lang, "intervene.chart.head_axis"), row=2, col=1)
    ticks = blocks[4::5] if len(blocks) > 12 else blocks  # every fifth block on a deep model
    fig.update_xaxes(tickvals=[0, *ticks], ticktext=[tr(lang, "intervene.chart.embedding_tick"), *map(str, ticks)],
                     title_text=tr(lang, "intervene.chart.block_axis"), row=1, col=1)
    fig.update_yaxes(title_text=tr(lang, "intervene.chart.logit_axis"), zeroline=True, zerolinecolor="#999",
                     gridcolor="#EEEEEE", row=1, col=1)
    fig.update_yaxes(zeroline=True, zerolinecolor="#999", gridcolor="#EEEEEE", row=2, col=1)
    fig.update_annotations(font=dict(size=TEXT, color=INK))
    fig.update_layout(yaxis3=dict(overlaying="y", side="right", showgrid=False, zeroline=False, tickfont=dict(color="#777"),
                                  title=dict(text=tr(lang, "intervene.chart.lens_axis"), font=dict(size=TEXT, color="#777"))))
    return base_layout(fig, height, dict(l=56, r=56, t=30, b=44), showlegend=True, barmode="group",
                       legend=dict(orientation="h", x=0, y=1.08, yanchor="bottom", font=dict(size=TEXT)))


def knockout_figure(r: KnockoutResult | None, lang: str = "en", height: int = 320) -> go.Figure:
    """The most probable next tokens (softmax of the logits, T = 1) before and after the knock-out, side by side:
    the candidate followed in bold."""
    if r is None:
        return empty_figure(tr(lang, "intervene.empty.knockout"), height)
    before = {t.id: (t, p) for t, p in zip(r.before.candidates, r.before.stage("raw").probs)}
    after = {t.id: (t, p) for t, p in zip(r.after.candidates, r.after.stage("raw").probs)}
    ids = sorted(set(list(before)[:TOP]) | set(list(after)[:TOP]),
                 key=lambda i: -max(before.get(i, (None, 0.0))[1], after.get(i, (None, 0.0))[1]))[:TOP]
    tokens = [(before.get(i) or after.get(i))[0] for i in ids]
    labels = [f"<b>{token_text(t, lang)}</b>" if t.id == r.candidate.id else token_text(t, lang) for t in tokens]
    fig = go.Figure()
    for source, name, colour in ((before, tr(lang, "intervene.chart.before"), GREY),
                                 (after, tr(lang, "intervene.chart.after"), BLUE)):
        # a token outside this side's top-N: its probability is at most the smallest one kept there
        floor = min(p for _, p in source.values())
        probs = [source[i][1] if i in source else 0.0 for i in ids]
        said = [pct(source[i][1]) if i in source else f"≤ {pct(floor)}" for i in ids]
        fig.add_trace(go.Bar(y=labels, x=probs, orientation="h", name=name, marker_color=colour, text=said,
                             textposition="outside", cliponaxis=False, hovertemplate="%{customdata}<extra></extra>",
                             customdata=[f"{piece_hover(show_token(t, lang=lang))} · {name} · {p}"
                                         for t, p in zip(tokens, said)]))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=TEXT))
    fig.update_xaxes(range=[0, 1.15], tickformat=".0%", gridcolor="#EEEEEE", title_text=tr(lang, "intervene.chart.p_axis"))
    return base_layout(fig, height, dict(l=110, r=16, t=30, b=40), showlegend=True, barmode="group",
                       legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font=dict(size=TEXT)))


def patch_figure(r: PatchResult | None, tokens=(), lang: str = "en", height: int = 300, grid=(),
                 picked: tuple[int, int] | None = None) -> go.Figure:
    """Positions (rows, the prompt's tokens) by blocks (columns): p(the source's answer) at the last position once
    that cell's stream is copied from the source prompt, on the probability scale. `grid`: every (position, block)
    of the prompt, those not patched yet drawn blank, each a click away (the page sends a click: plot_clicks.py);
    `picked`: the cell last patched, outlined. Every cell carries [its hover, position, block]."""
    cells = {(c.position, c.block): c for c in r.cells if c.position is not None} if r is not None else {}
    grid = set(grid) | set(cells)
    if not grid:
        return empty_figure(tr(lang, "intervene.empty.patch"), height)
    positions, blocks = sorted({p for p, _ in grid}), sorted({b for _, b in grid})
    labels = [f"{p} {token_text(tokens[p], lang)}" if p < len(tokens) else str(p) for p in positions]
    z = [[cells[(p, b)].source_answer if (p, b) in cells else None for b in blocks] for p in positions]
    data = [[[_cell_hover(r, cells.get((p, b)), p, b, lang), p, b] for b in blocks] for p in positions]
    # the scale shown from the start, so the first patched cell does not narrow the columns under the cursor
    answer = token_text(r.source_answer, lang) if r is not None else tr(lang, "intervene.patch.answer")
    colorbar = dict(title=dict(text=f"p({answer})", font=dict(size=TEXT)), thickness=12)
    hover = "%{customdata[0]}<extra></extra>"
    # the cells not patched yet: a faint layer of their own (Plotly neither hovers nor clicks a heatmap's gaps when it
    # has no value at all), under the patched cells' values
    blank = [[None if (p, b) in cells else 0 for b in blocks] for p in positions]
    fig = go.Figure([go.Heatmap(z=blank, x=blocks, y=labels, colorscale=[[0, BLANK], [1, BLANK]], showscale=False,
                                customdata=data, hovertemplate=hover, hoverongaps=False, xgap=1, ygap=1),
                     go.Heatmap(z=z, x=blocks, y=labels, zmin=0, zmax=max(r.source[1], 1e-6) if r is not None else 1,
                                colorscale=PROBABILITY_SCALE, customdata=data, hovertemplate=hover, hoverongaps=False,
                                xgap=1, ygap=1, showscale=True, colorbar=colorbar)])
    if picked in grid:  # (a category axis places a shape by the row's index)
        row, column = positions.index(picked[0]), picked[1]
        fig.add_shape(type="rect", x0=column - 0.5, x1=column + 0.5, y0=row - 0.5, y1=row + 0.5,
                      line=dict(color=INK, width=2.5))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=TEXT), type="category")
    fig.update_xaxes(title_text=tr(lang, "intervene.chart.block_axis"), dtick=5 if len(blocks) > 12 else 1)
    # room for the scale from the start (a blank grid has none yet): the columns keep their place at the first click
    return base_layout(fig, max(height, 90 + 26 * len(positions)), dict(l=120, r=116, t=16, b=44))


def _cell_hover(r: PatchResult | None, cell, position: int, block: int, lang: str) -> str:
    if cell is None:
        return tr(lang, "intervene.patch.hover_blank", position=position, block=block)
    answer, own = token_text(r.source_answer, lang), token_text(r.candidate, lang)
    return tr(lang, "intervene.patch.hover", position=position, block=block, answer=answer, own=own,
              p_answer=pct(cell.source_answer), p_own=pct(cell.candidate), top=token_text(cell.top, lang),
              p_top=pct(cell.top_prob))


__all__ = ["attribution_figure", "knockout_figure", "patch_figure", "token_text"]
