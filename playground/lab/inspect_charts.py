"""Figures and lines for "Look inside this step": pure functions, records in, Plotly figures or Markdown out.

- many draws: a ManyDraws record (one frozen step sampled n times) as observed frequencies beside the
  probabilities they were drawn from, and the chi-square verdict;
- logits: a StepRecord's raw logits (negative ones too, around a zero line), the raw log-probabilities
  (the same bars shifted down by log Z), and every stage's probabilities on a log axis (the tail zoom);
- cost: per step, forward / sampler / capture ms and the record's JSON bytes, with the run's totals and
  the LM head's bytes read per forward pass.
No torch, no gradio: rebuilt from kept records on a scrub or a change of language.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.step import ManyDraws, StepRecord, json_size

from ..common.colours import BLUE, GREY, INK, SKY, VERMILLION
from ..common.figures import TEXT, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import nbytes, pct, piece_hover, piece_label, show_token, show_tokens, unique_labels
from .stage_panels import FOLD_NAMES, used

ALPHA = 0.001  # the test's level: a fair sampler is rejected once in a thousand tries
STAGE_COLOURS = {"raw": INK, "temperature": SKY, "top_k": "#E69F00", "top_p": "#009E73", "min_p": "#CC79A7",
                 "final": VERMILLION, "logit_bias": "#999933", "penalties": "#882255"}
STAGE_NAMES = {**FOLD_NAMES, "final": "final"}  # as the lab's controls name them
TAIL_FLOOR = 1e-7  # where the tail zoom draws a token a stage removed (p = 0 has no place on a log axis)


def _labels(tokens, pending_hex: str, lang: str):
    shown = show_tokens(tokens, bytes.fromhex(pending_hex), lang=lang)
    return shown, unique_labels([piece_label(s) for s in shown])


# ---- many draws -----------------------------------------------------------------------------------------


def many_draws_figure(m: ManyDraws | None, lang: str = "en", height: int = 300) -> go.Figure:
    """Horizontal bars of the observed share of each top token (and of all the others), with the
    theoretical probability as a tick on each bar."""
    if m is None:
        return empty_figure(tr(lang, "inspect.many.empty"), height)
    shown, labels = _labels(m.tokens, m.pending_hex, lang)
    other = tr(lang, "inspect.many.other")
    labels, hovers = labels + [other], [piece_hover(s) for s in shown] + [other]
    observed = [c / m.n for c in m.counts] + [m.other_count / m.n]
    theory = list(m.probs) + [m.other_prob]
    counts = list(m.counts) + [m.other_count]
    rows = list(range(len(labels)))
    fig = go.Figure()
    fig.add_trace(go.Bar(
        y=rows, x=observed, orientation="h", marker_color=[BLUE] * len(m.tokens) + [GREY],
        name=tr(lang, "inspect.many.observed"), hovertemplate="%{hovertext}<extra></extra>",
        hovertext=[tr(lang, "inspect.many.hover", who=h, count=f"{c:,}", n=f"{m.n:,}", share=pct(o), p=pct(p))
                   for h, c, o, p in zip(hovers, counts, observed, theory)],
    ))
    fig.add_trace(go.Scatter(
        y=rows, x=theory, mode="markers", name=tr(lang, "inspect.many.theory"), hoverinfo="skip",
        marker=dict(symbol="line-ns", size=16, line=dict(width=3, color=VERMILLION)),
    ))
    top = max(max(observed), max(theory)) * 1.1 or 1.0
    fig.update_xaxes(range=[0, top], tickformat=".0%", gridcolor="#EEEEEE", zeroline=False, fixedrange=True,
                     title_text=tr(lang, "inspect.many.x_axis"), title_font=dict(size=TEXT))
    fig.update_yaxes(tickvals=rows, ticktext=labels, range=[len(rows) - 0.5, -0.5], fixedrange=True)
    left = min(150, 12 + 6 * max(len(label) for label in labels))
    return base_layout(fig, height, dict(l=left, r=10, t=26, b=34), showlegend=True, barmode="overlay",
                       legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", font=dict(size=TEXT)))


def many_draws_markdown(m: ManyDraws | None, lang: str = "en") -> str:
    """The verdict: n, distinct tokens, chi-square, degrees of freedom, p-value, and the time it took."""
    if m is None:
        return tr(lang, "inspect.many.intro")
    head = tr(lang, "inspect.many.summary", n=f"{m.n:,}", step=m.step + 1, distinct=f"{m.distinct:,}",
              support=f"{m.support:,}", draw_ms=f"{m.draw_ms:.1f}", forward_ms=f"{m.forward_ms:.0f}", seed=m.seed)
    if m.p_value is None:
        return head + "  \n" + tr(lang, "inspect.many.one_bin")
    verdict = "inspect.many.rejected" if m.p_value < ALPHA else "inspect.many.fits"
    p = f"{m.p_value:.3g}" if m.p_value >= 1e-4 else f"{m.p_value:.1e}"
    return head + "  \n" + tr(lang, verdict, chi2=f"{m.chi2:.1f}", dof=m.dof, p=p, alpha=ALPHA)


# ---- logits as they are ------------------------------------------------------------------------------------


def logits_figure(record: StepRecord | None, lang: str = "en", height: int = 380) -> go.Figure:
    """Three panels sharing the candidates' rows: raw logits, raw log-probabilities, every stage's
    probability on a log axis (a token a stage removed sits on the floor, marked ×)."""
    if record is None:
        return empty_figure(tr(lang, "inspect.logits.empty"), height)
    if not record.logits or not record.stages:
        return empty_figure(tr(lang, "inspect.logits.no_data"), height)
    before = bytes.fromhex(record.pending_hex)
    shown = [show_token(t, before, lang=lang) for t in record.candidates]
    labels = unique_labels([piece_label(s) for s in shown])
    rows = list(range(len(labels)))
    who = [piece_hover(s) for s in shown]
    chosen = next((i for i, t in enumerate(record.candidates) if t.id == record.token_id), None)
    colours = [VERMILLION if i == chosen else BLUE for i in rows]
    raw = record.stage("raw").probs
    log_p = [math.log(p) if p > 0 else None for p in raw]
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[tr(lang, "inspect.logits.raw"), tr(lang, "inspect.logits.log_p"),
                                        tr(lang, "inspect.logits.tail")])
    bar = dict(orientation="h", marker_color=colours, hovertemplate="%{hovertext}<extra></extra>", showlegend=False)
    fig.add_trace(go.Bar(y=rows, x=list(record.logits), hovertext=[f"{w}<br>logit = {z:.3f}" for w, z in
                                                                    zip(who, record.logits)], **bar), row=1, col=1)
    fig.add_trace(go.Bar(y=rows, x=log_p, hovertext=[f"{w}<br>ln p = {v:.3f}" if v is not None else w
                                                     for w, v in zip(who, log_p)], **bar), row=1, col=2)
    for stage in used(record.stages):
        removed = [p <= 0 for p in stage.probs]
        fig.add_trace(go.Scatter(
            y=rows, x=[TAIL_FLOOR if r else p for p, r in zip(stage.probs, removed)], mode="markers",
            name=STAGE_NAMES.get(stage.name, stage.name), marker=dict(color=STAGE_COLOURS.get(stage.name, INK), size=7,
                                         symbol=["x-thin-open" if r else "circle" for r in removed],
                                         line=dict(width=1.5, color=STAGE_COLOURS.get(stage.name, INK))),
            hovertemplate="%{hovertext}<extra></extra>",
            hovertext=[f"{w}<br>{stage.name}: " + (tr(lang, "inspect.logits.removed") if r else f"p = {p:.3g}")
                       for w, p, r in zip(who, stage.probs, removed)],
        ), row=1, col=3)
    for col in (1, 2):
        fig.update_xaxes(zeroline=True, zerolinecolor=INK, zerolinewidth=1, row=1, col=col)
    powers = range(round(math.log10(TAIL_FLOOR)) + 1, 1, 2)  # 10^-6, 10^-4, 0.01, 1: few ticks fit a phone
    fig.update_xaxes(type="log", range=[math.log10(TAIL_FLOOR) - 0.3, 0.05], tickvals=[10.0**e for e in powers],
                     ticktext=[f"{10.0**e:g}" if e >= -2 else f"10<sup>{e}</sup>" for e in powers], row=1, col=3)
    fig.update_xaxes(gridcolor="#EEEEEE", fixedrange=True, tickfont=dict(size=TEXT))
    fig.update_yaxes(tickvals=rows, ticktext=labels, range=[len(rows) - 0.5, -0.5], fixedrange=True)
    fig.update_annotations(font=dict(size=TEXT))
    left = min(150, 12 + 6 * max(len(label) for label in labels))
    return base_layout(fig, height, dict(l=left, r=10, t=34, b=24), showlegend=True,
                       legend=dict(orientation="h", x=0.7, y=-0.04, yanchor="top", font=dict(size=TEXT)))


def logits_markdown(record: StepRecord | None, lang: str = "en") -> str:
    """Under the panels: what is shown, and log Z = logit - ln p (the same for every token)."""
    if record is None or not record.logits or not record.stages:
        return tr(lang, "inspect.logits.intro")
    raw = record.stage("raw").probs
    log_z = record.logits[0] - math.log(raw[0]) if raw and raw[0] > 0 else float("nan")
    low = min(record.logits)
    return tr(lang, "inspect.logits.summary", step=record.step + 1, log_z=f"{log_z:.2f}", low=f"{low:.2f}",
              high=f"{max(record.logits):.2f}", n=len(record.logits))


# ---- the cost of a step ----------------------------------------------------------------------------------------


def step_costs(record: StepRecord) -> dict:
    """A step's costs: ms of its forward pass, of the sampler (its capture taken out), of the capture,
    and the record's JSON bytes."""
    capture = getattr(record, "capture_ms", 0.0)
    return {"forward": record.forward_ms, "sampler": max(record.sampling_ms - capture, 0.0), "capture": capture,
            "bytes": json_size(record)}


def cost_figure(records: list[StepRecord], selected: int | None = None, lang: str = "en", height: int = 190) -> go.Figure:
    """A strip under the run: stacked ms per step (forward, sampler, capture) and the record's bytes."""
    if not records:
        return empty_figure(tr(lang, "inspect.cost.empty"), height)
    costs = [step_costs(r) for r in records]
    steps = [r.step for r in records]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, row_heights=[0.62, 0.38])
    for key, colour in (("forward", BLUE), ("sampler", VERMILLION), ("capture", "#E69F00")):
        name = tr(lang, f"inspect.cost.{key}")
        fig.add_trace(go.Bar(x=steps, y=[c[key] for c in costs], name=name, marker_color=colour,
                             hovertemplate=f"{tr(lang, 'lab.run.step_axis')} %{{x}}<br>{name}: %{{y:.2f}} ms<extra></extra>"),
                      row=1, col=1)
    fig.add_trace(go.Scatter(x=steps, y=[c["bytes"] for c in costs], mode="lines+markers", marker=dict(size=3),
                             line=dict(color="#555", width=1), name=tr(lang, "inspect.cost.bytes"),
                             hovertemplate=f"{tr(lang, 'lab.run.step_axis')} %{{x}}<br>%{{y:,}} B<extra></extra>"),
                  row=2, col=1)
    fig.update_yaxes(title_text="ms", row=1, col=1)
    fig.update_yaxes(title_text=tr(lang, "inspect.cost.bytes_axis"), rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_font=dict(size=TEXT), gridcolor="#EEEEEE", zeroline=False, fixedrange=True, tickfont=dict(size=TEXT))
    fig.update_xaxes(fixedrange=True, showgrid=False, tickfont=dict(size=TEXT))
    fig.update_xaxes(title_text=tr(lang, "lab.run.step_axis"), title_font=dict(size=TEXT), row=2, col=1)
    if selected is not None:
        fig.add_vline(x=selected, line=dict(color=INK, width=1, dash="dash"))
    return base_layout(fig, height, dict(l=48, r=10, t=20, b=30), barmode="stack", showlegend=True, bargap=0.15,
                       legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", font=dict(size=TEXT), traceorder="normal"))


def cost_markdown(records: list[StepRecord], head_bytes: int = 0, selected: int | None = None,
                  lang: str = "en") -> str:
    """The selected step's costs, the run's totals, and the LM head's bytes read (per forward pass, and
    as a bandwidth over the forward time)."""
    if not records:
        return tr(lang, "inspect.cost.intro")
    i = len(records) - 1 if selected is None else selected
    one = step_costs(records[i])
    totals = {k: sum(step_costs(r)[k] for r in records) for k in ("forward", "sampler", "capture", "bytes")}
    lines = [
        tr(lang, "inspect.cost.step", step=i + 1, forward=f"{one['forward']:.1f}", sampler=f"{one['sampler']:.2f}",
           capture=f"{one['capture']:.2f}", bytes=f"{one['bytes']:,}"),
        tr(lang, "inspect.cost.total", steps=len(records), forward=f"{totals['forward']:.0f}",
           sampler=f"{totals['sampler']:.1f}", capture=f"{totals['capture']:.1f}", bytes=nbytes(totals["bytes"])),
    ]
    if head_bytes:
        rate = head_bytes / (one["forward"] / 1000) if one["forward"] > 0 else 0.0
        lines.append(tr(lang, "inspect.cost.head", head=nbytes(head_bytes), run=nbytes(head_bytes * len(records)),
                        rate=nbytes(rate) + "/s"))
    return "  \n".join(lines)
