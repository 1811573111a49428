"""Figures for the forward-pass trace (lesson 10): pure functions, a Trace record in, a go.Figure out.

No torch, no gradio. Heatmaps place tokens on numeric axes with text tick labels, so a piece that
occurs twice ("the" … "the") keeps two columns. Norms grow by orders of magnitude through the blocks,
so the residual heatmaps colour log10 of the value and hover the value itself.
Titles, axes and hover text are catalogue strings (keys `forward.*`) in the language `lang`.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.trace import AttentionMap, Trace

from ..common.colours import BLUE, INK, MASKED, PROBABILITY_SCALE, SKY, VERMILLION
from ..common.figures import TEXT, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import Shown, nbytes, pct, piece_hover, piece_label, show_token, show_tokens, token_bytes

TICK_LABELS = 40  # beyond this many columns, label positions by number instead of by piece
PIECE_CHARS = 10


def label(shown: Shown, limit: int = PIECE_CHARS) -> str:
    return piece_label(shown, limit)


def positions_shown(trace: Trace, lang: str = "en") -> list[Shown]:
    """Every position's token read in the prompt, a split character completed by its neighbours."""
    return show_tokens(trace.tokens, lang=lang)


def candidates_after(trace: Trace, position: int, candidates, lang: str = "en") -> list[Shown]:
    """Candidates for the token after `position`, read after the prompt up to there (which may end
    half-way through a character that a candidate completes)."""
    before = b"".join(token_bytes(t) for t in trace.tokens[max(0, position - 3) : position + 1])
    return [show_token(c, before, lang=lang) for c in candidates]


def _position_ticks(trace: Trace, positions) -> dict:
    positions = list(positions)
    if len(positions) > TICK_LABELS:
        return dict(tickmode="auto", nticks=12)
    shown = positions_shown(trace)
    text = [label(shown[p]) for p in positions]
    return dict(tickmode="array", tickvals=positions, ticktext=text, tickangle=-45 if len(positions) > 8 else 0)


# ---- the residual stream --------------------------------------------------------------------------


def _gap(columns: int) -> int:
    """Cell borders help a few cells and drown many."""
    return 1 if columns <= TICK_LABELS else 0


def _log_heatmap(z, x, y, name: str, hover_rows, colorbar: dict | None, zrange) -> go.Heatmap:
    logz = [[math.log10(max(v, 1e-6)) for v in row] for row in z]
    return go.Heatmap(
        z=logz, x=x, y=y, customdata=z, colorscale=PROBABILITY_SCALE, zmin=zrange[0], zmax=zrange[1], showscale=colorbar is not None,
        colorbar=colorbar, xgap=_gap(len(x)), ygap=1,
        hovertemplate=f"{name} = %{{customdata:.4g}}<br>%{{text}}<extra></extra>", text=hover_rows,
    )


def residual_figure(trace: Trace, height: int | None = None, lang: str = "en") -> go.Figure:
    """Two heatmaps, blocks down × positions across: ‖stream‖ after each block (the last row: after the
    final norm, as hidden_states[L] comes back) and ‖update‖ = ‖h_k − h_{k−1}‖, what each block added."""
    r = trace.residual
    L = trace.num_layers
    pos = list(r.positions)
    norms = [list(row) for row in r.norms] + [list(r.final_norms)]
    rows = list(range(L + 2))  # 0 = embedding, k = after block k, L + 1 = final norm applied
    row_names = [tr(lang, "forward.residual.row.embedding")] + [
        tr(lang, "forward.residual.row.block", block=k) for k in range(1, L)] + [
        tr(lang, "forward.residual.row.before_norm", block=L), tr(lang, "forward.residual.row.normed", block=L)]
    shown = positions_shown(trace, lang)
    who = [[tr(lang, "forward.residual.hover", row=row_names[k], position=p, piece=piece_hover(shown[p])) for p in pos]
           for k in rows]
    values = [v for row in norms + [list(u) for u in r.updates] for v in row if v > 0] or [1.0]
    zrange = (math.floor(math.log10(min(values))), math.ceil(math.log10(max(values))))
    decades = list(range(zrange[0], zrange[1] + 1))
    bar = dict(tickvals=decades, ticktext=[f"{10**d:g}" for d in decades], thickness=10, len=0.8, title=dict(text="‖·‖", side="top"))
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=(tr(lang, "forward.residual.title.stream"), tr(lang, "forward.residual.title.update")))
    fig.add_trace(_log_heatmap(norms, pos, rows, "‖h‖", who, None, zrange), row=1, col=1)
    fig.add_trace(_log_heatmap([list(u) for u in r.updates], pos, rows[1 : L + 1], tr(lang, "forward.residual.update"),
                               who[1 : L + 1], bar, zrange), row=1, col=2)
    ticks = [0] + [k for k in range(1, L + 1) if L <= 12 or k % 5 == 0 or k == L] + [L + 1]
    names = {0: tr(lang, "forward.axis.embedding"), L + 1: tr(lang, "forward.axis.final_norm")}
    fig.update_yaxes(tickvals=ticks, ticktext=[names.get(k) or tr(lang, "forward.block", block=k) for k in ticks],
                     range=[L + 1.5, -0.5],
                     showgrid=False, zeroline=False, fixedrange=True, row=1, col=1)
    fig.update_yaxes(showgrid=False, zeroline=False, fixedrange=True, row=1, col=2)
    fig.update_xaxes(showgrid=False, zeroline=False, **_position_ticks(trace, pos))
    fig.update_annotations(font=dict(size=TEXT, color=INK))
    return base_layout(fig, height or max(260, 12 * (L + 2) + 110), dict(l=90, r=10, t=36, b=60))


# ---- attention ---------------------------------------------------------------------------------------


def _attention_cells(a: AttentionMap, head: int, shown: list[Shown], lang: str):
    """z (None where masked), hover text, x values: the window's keys, plus an 'earlier' column at -1
    holding the weight on every key before the window when the window is cut."""
    start = a.positions[0]
    cut = start > 0
    z, text = [], []
    for i, q in enumerate(a.positions):
        row = [a.earlier[head][i]] if cut else []
        hover = [tr(lang, "forward.attention.hover.earlier", last=start - 1, weight=a.earlier[head][i])] if cut else []
        for j, k in enumerate(a.positions):
            visible = k <= q and (a.sliding_window is None or q - k < a.sliding_window)
            w = a.weights[head][i][j]
            row.append(w if visible else None)
            hover.append(f"{label(shown[i])} → {label(shown[j])}: {w:.3f}" if visible
                         else tr(lang, "forward.attention.hover.masked"))
        z.append(row)
        text.append(hover)
    x = ([start - 1] if cut else []) + list(a.positions)
    return z, text, x


def attention_figure(a: AttentionMap | None, head: int | None = None, note: str = "", lang: str = "en",
                     tokens=None) -> go.Figure:
    """One block's attention: a grid of every head (head=None) or one head large. Rows are queries,
    columns keys; grey cells are the causal mask (a position never looks ahead). tokens: the whole
    prompt's (Trace.tokens), so that a window that starts inside a character still reads it."""
    if a is None:
        return empty_figure(note or tr(lang, "forward.attention.none"), 220)
    shown = show_tokens(tokens, lang=lang)[a.positions[0] :] if tokens else show_tokens(a.pieces, lang=lang)
    heads = list(range(a.num_heads)) if head is None else [min(max(int(head), 0), a.num_heads - 1)]
    cols = math.ceil(math.sqrt(len(heads)))
    nrows = math.ceil(len(heads) / cols)
    group = a.num_heads // max(a.num_kv_heads, 1)
    titles = [tr(lang, "forward.head.kv", head=h + 1, kv=h // group + 1) if group > 1 else tr(lang, "forward.head", head=h + 1)
              for h in heads]
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=titles, horizontal_spacing=0.3 / cols, vertical_spacing=0.4 / max(nrows, 2))
    show_labels = len(heads) == 1 or len(a.positions) <= 12
    cut = a.positions[0] > 0
    for n, h in enumerate(heads):
        z, text, x = _attention_cells(a, h, shown, lang)
        r, c = n // cols + 1, n % cols + 1
        fig.add_trace(go.Heatmap(z=z, x=x, y=list(a.positions), text=text, colorscale=PROBABILITY_SCALE, zmin=0, zmax=1,
                                 showscale=n == 0, colorbar=dict(thickness=10, len=0.6, title=dict(text=tr(lang, "forward.attention.weight"), side="top")),
                                 hovertemplate="%{text}<extra>" + titles[n] + "</extra>", xgap=_gap(len(x)),
                                 ygap=_gap(len(x))), row=r, col=c)
    pieces = [label(s) for s in shown]
    if show_labels and len(a.positions) <= TICK_LABELS:
        xs = dict(tickvals=([a.positions[0] - 1] if cut else []) + list(a.positions), ticktext=([tr(lang, "forward.attention.earlier")] if cut else []) + pieces)
        ys = dict(tickvals=list(a.positions), ticktext=pieces)
    elif len(heads) == 1:  # too many pieces to print: number the positions
        xs = ys = dict(tickmode="auto", nticks=12)
    else:
        xs = ys = dict(showticklabels=False)
    fig.update_xaxes(showgrid=False, zeroline=False, fixedrange=True, tickangle=-45, side="bottom", **xs)
    fig.update_yaxes(showgrid=False, zeroline=False, fixedrange=True, autorange="reversed", **ys)
    fig.update_annotations(font=dict(size=TEXT, color=INK))
    per = 420 if len(heads) == 1 else (190 if show_labels else 200)
    return base_layout(fig, per * nrows + 60, dict(l=70 if show_labels else 10, r=10, t=30, b=60 if show_labels else 10),
                   plot_bgcolor=MASKED)


# ---- output: logits at every position -------------------------------------------------------------


def predictions_figure(trace: Trace, lang: str = "en") -> go.Figure:
    """Rows: positions (the token read there). Columns: the top-N next tokens of that position's logits
    row, then the token that really comes next with its rank. The last row is the only one generation
    uses; it is outlined."""
    preds = trace.predictions
    if not preds:
        return empty_figure(tr(lang, "forward.predictions.none"))
    n = len(preds[0].top)
    z, text, hover = [], [], []
    at = positions_shown(trace, lang)
    for p in preds:
        top = candidates_after(trace, p.position, p.top, lang)
        nxt = at[p.position + 1] if p.next is not None else None  # the prompt's own next token, read in the prompt
        z.append([c.prob for c in p.top] + [p.next_prob if p.next is not None else None])
        text.append([f"{label(s)}<br>{pct(c.prob)}" for s, c in zip(top, p.top)] + (
            [f"{label(nxt)}<br>#{p.next_rank + 1} · {pct(p.next_prob)}"] if nxt is not None
            else [tr(lang, "forward.predictions.starts")]))
        after = piece_hover(at[p.position])
        hover.append([tr(lang, "forward.predictions.hover", token=after, piece=piece_hover(s), prob=pct(c.prob))
                      for s, c in zip(top, p.top)] + (
            [tr(lang, "forward.predictions.hover_next", piece=piece_hover(nxt), rank=p.next_rank + 1,
                prob=pct(p.next_prob))] if nxt is not None else [tr(lang, "forward.predictions.hover_none")]))
    ys = [p.position for p in preds]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n + 1)), y=ys, text=text, customdata=hover, texttemplate="%{text}", textfont=dict(size=TEXT),
        colorscale=PROBABILITY_SCALE, zmin=0, zmax=1, xgap=2, ygap=2, hovertemplate="%{customdata}<extra></extra>",
        colorbar=dict(thickness=10, len=0.8, title=dict(text="p", side="top")),
    ))
    last = ys[-1]
    fig.add_shape(type="rect", x0=-0.5, x1=n + 0.5, y0=last - 0.5, y1=last + 0.5, line=dict(color=VERMILLION, width=3))
    fig.add_annotation(x=n + 0.5, y=last, xanchor="left", text=tr(lang, "forward.predictions.note"), showarrow=False,
                       font=dict(color=VERMILLION, size=TEXT), xshift=6)
    fig.update_xaxes(tickvals=list(range(n + 1)), ticktext=[f"#{i + 1}" for i in range(n)] + [tr(lang, "forward.predictions.actual")], side="top",
                     showgrid=False, zeroline=False, fixedrange=True)
    fig.update_yaxes(tickvals=ys, ticktext=[f"{p.position}: {label(at[p.position])}" for p in preds],
                     autorange="reversed", showgrid=False, zeroline=False, fixedrange=True)
    return base_layout(fig, 34 * len(preds) + 70, dict(l=110, r=130, t=34, b=10))


def teacher_figure(trace: Trace, height: int = 170, lang: str = "en") -> go.Figure:
    """For every position: the probability the model gave to the prompt's actual next token."""
    t = trace.teacher
    if not t.probs:
        return empty_figure(tr(lang, "forward.teacher.none"), height)
    x = list(range(len(t.probs)))  # bar i: position i's logits row, scored on token i + 1
    at = positions_shown(trace, lang)
    hover = [tr(lang, "forward.teacher.hover", position=i, token=piece_hover(at[i]), next=piece_hover(at[i + 1]),
                prob=pct(p), rank=r + 1)
             for i, (p, r) in enumerate(zip(t.probs, t.ranks))]
    fig = go.Figure(go.Bar(x=x, y=list(t.probs), marker_color=[VERMILLION if r == 0 else BLUE for r in t.ranks],
                           hovertext=hover, hoverinfo="text"))
    fig.update_yaxes(range=[0, 1], tickformat=".0%", title_text=tr(lang, "forward.teacher.y"), fixedrange=True, gridcolor="#EEE")
    ticks = _position_ticks(trace, [i + 1 for i in x])
    if "tickvals" in ticks:
        ticks["tickvals"] = x
    fig.update_xaxes(title_text=tr(lang, "forward.teacher.x"), fixedrange=True, **ticks)
    return base_layout(fig, height, dict(l=50, r=10, t=10, b=50), bargap=0.15)


def cost_figure(trace: Trace, height: int = 280, lang: str = "en") -> go.Figure:
    """Logits kept for every position grow as T × V × bytes; logits_to_keep=1 stays at V × bytes."""
    c = trace.cost
    fig = go.Figure()
    per_length = tr(lang, "forward.cost.hover", tokens="%{x}", size="%{customdata}")
    for ys, dtype, colour in ((c.bytes_fp32, "float32", VERMILLION), (c.bytes_bf16, "bf16", SKY)):
        name = tr(lang, "forward.cost.all", dtype=dtype)
        fig.add_trace(go.Scatter(x=list(c.lengths), y=list(ys), name=name, mode="lines", line=dict(color=colour, width=2),
                                 hovertemplate=per_length + "<extra>" + name + "</extra>",
                                 customdata=[nbytes(v) for v in ys]))
    for v, name, dash in ((c.keep_one_fp32, "logits_to_keep=1, float32", "dash"), (c.keep_one_bf16, "logits_to_keep=1, bf16", "dot")):
        fig.add_trace(go.Scatter(x=[c.lengths[0], c.lengths[-1]], y=[v, v], name=name, mode="lines",
                                 line=dict(color=INK, width=1.5, dash=dash),
                                 hovertemplate=tr(lang, "forward.cost.hover_keep", size=nbytes(v)) + f"<extra>{name}</extra>"))
    here = c.tokens * c.vocab_size * 4
    fig.add_trace(go.Scatter(x=[c.tokens], y=[here], mode="markers", marker=dict(color=VERMILLION, size=10),
                             name=tr(lang, "forward.cost.this_prompt"), hovertemplate=tr(
                                 lang, "forward.cost.hover_here", tokens=c.tokens, vocab=c.vocab_size, size=nbytes(here))
                             + "<extra></extra>"))
    fig.add_annotation(x=math.log10(c.tokens), y=math.log10(here), text=tr(lang, "forward.cost.here", size=nbytes(here)), showarrow=True,
                       arrowhead=0, ax=40, ay=-28, font=dict(size=TEXT, color=VERMILLION))
    lo, hi = min(c.keep_one_bf16, c.bytes_bf16[0]), max(c.bytes_fp32)
    decades = list(range(int(math.floor(math.log10(lo))), int(math.ceil(math.log10(hi))) + 1))
    fig.update_yaxes(type="log", tickvals=[10**d for d in decades], ticktext=[nbytes(10**d) for d in decades],
                     title_text=tr(lang, "forward.cost.y"), gridcolor="#EEE", fixedrange=True)
    top = math.log10(c.lengths[-1])
    fig.update_xaxes(type="log", title_text=tr(lang, "forward.cost.x"), gridcolor="#EEE", fixedrange=True,
                     tickvals=[4**k for k in range(int(top / math.log10(4)) + 1)], range=[-0.05, top + 0.05])
    return base_layout(fig, height, dict(l=70, r=10, t=10, b=46), showlegend=True,
                   legend=dict(x=0.01, y=0.99, bgcolor="rgba(255,255,255,0.8)", font=dict(size=TEXT)))


# ---- the logit lens ------------------------------------------------------------------------------------


def lens_figure(trace: Trace, lang: str = "en") -> go.Figure:
    """Layers down: the top-N tokens when the final norm and the head read each snapshot of the last
    position (left), and the probability of the model's final answer at each layer (right)."""
    lens = trace.lens
    layers = lens.layers
    n = len(layers[0].top)
    L = len(layers) - 1
    ks = [layer.index for layer in layers]
    last = len(trace.tokens) - 1  # the lens reads the last position: its candidates follow the whole prompt
    (target,) = candidates_after(trace, last, [lens.target], lang)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.7, 0.3], horizontal_spacing=0.03,
                        subplot_titles=(tr(lang, "forward.lens.title.top", n=n),
                                        tr(lang, "forward.lens.title.target", piece=label(target, 16))))
    z = [[c.prob for c in layer.top] for layer in layers]
    shown = [candidates_after(trace, last, layer.top, lang) for layer in layers]
    text = [[label(s) for s in row] for row in shown]
    hover = [[tr(lang, "forward.lens.hover", layer=k, piece=piece_hover(s), prob=pct(c.prob)) for s, c in zip(row, layer.top)]
             for k, layer, row in zip(ks, layers, shown)]
    fig.add_trace(go.Heatmap(z=z, x=list(range(n)), y=ks, text=text, customdata=hover, texttemplate="%{text}",
                             textfont=dict(size=TEXT), colorscale=PROBABILITY_SCALE, zmin=0, zmax=1, xgap=2, ygap=1, showscale=False,
                             hovertemplate="%{customdata}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=[layer.target_prob for layer in layers], y=ks, orientation="h",
                         marker_color=[VERMILLION if layer.target_rank == 0 else BLUE for layer in layers],
                         text=[f"#{layer.target_rank + 1}" for layer in layers], textposition="outside", cliponaxis=False,
                         textfont=dict(size=TEXT),
                         hovertext=[tr(lang, "forward.lens.hover_target", layer=k, prob=pct(layer.target_prob),
                                       rank=layer.target_rank + 1) for k, layer in zip(ks, layers)],
                         hoverinfo="text"), row=1, col=2)
    ticks = [k for k in ks if L <= 12 or k % 5 == 0 or k == L]
    fig.update_yaxes(tickvals=ticks, ticktext=[tr(lang, "forward.axis.embedding") if k == 0 else tr(lang, "forward.block", block=k)
                                               for k in ticks],
                     range=[L + 0.5, -0.5], showgrid=False, zeroline=False, fixedrange=True)
    fig.update_xaxes(tickvals=list(range(n)), ticktext=[f"#{i + 1}" for i in range(n)], showgrid=False,
                     zeroline=False, fixedrange=True, row=1, col=1)
    fig.update_xaxes(range=[0, 1.18], tickvals=[0, 0.5, 1], tickformat=".0%", gridcolor="#EEE", fixedrange=True, row=1, col=2)
    fig.update_annotations(font=dict(size=TEXT, color=INK))
    return base_layout(fig, max(260, 17 * (L + 1) + 90), dict(l=80, r=20, t=36, b=30), bargap=0.2)


__all__ = [
    "attention_figure", "cost_figure", "label", "lens_figure", "nbytes", "predictions_figure", "residual_figure",
    "teacher_figure",
]
