"""The Compare tab's views of a CompareRun: the columns' texts side by side (the first divergent step
marked), the step table (each column's token, rank, probability and the shared u) and the overlay chart.
Pure functions of the run and the page's language; every visitor text is escaped.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..common.colours import GREY, VERMILLION, prob_colour, text_colour
from ..common.figures import TEXT, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import escape_html, pct, piece_hover, piece_html, piece_label, show_steps, show_token, stop_reason
from ..lab.charts import candidate_segments
from .columns import LETTERS, CompareRun

COLOURS = qualitative.Safe  # one colour per column, readable with colour-vision deficiencies
OVERLAY_TOKENS = 8  # rows of the overlay's bar chart: the most probable tokens over all columns

STYLE = """<style>
.ntp-compare{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:8px}
.ntp-col{border:1px solid #ddd;border-radius:6px;padding:6px 8px}
.ntp-col h4{margin:0 0 4px 0;font-size:13px}
.ntp-col .ntp-set{font-size:11px;opacity:.75;margin-bottom:4px}
.ntp-ctok{display:inline-block;padding:0 3px;margin:1px;border-radius:4px;white-space:pre;font-size:14px}
.ntp-div{outline:3px solid #D55E00;outline-offset:1px}
.ntp-sel{box-shadow:0 0 0 2px #000}
.ntp-after{opacity:.55}
.ntp-cnote{font-size:12px;margin-top:4px}
</style>"""


def settings_text(settings, lang: str = "en") -> str:
    """"T 0.5 · top-k 40 · top-p 0.9 · min-p 0.05 · hf": the knobs that are on, and the order."""
    parts = [f"T {settings.temperature:g}" if not settings.greedy else tr(lang, "compare.greedy")]
    parts += [f"top-k {settings.top_k}"] if settings.top_k else []
    parts += [f"top-p {settings.top_p:g}"] if settings.top_p < 1 else []
    parts += [f"min-p {settings.min_p:g}"] if settings.min_p > 0 else []
    return " · ".join([*parts, settings.order_text])


def _chip(record, i: int, shown, divergence, selected) -> str:
    p = record.stages[0].chosen_prob if record.stages else 0.0
    bg = prob_colour(p)
    classes = ["ntp-ctok"]
    if i == divergence:
        classes.append("ntp-div")
    elif divergence is not None and i > divergence:
        classes.append("ntp-after")
    if i == selected:
        classes.append("ntp-sel")
    u = "—" if record.draw.u is None else f"{record.draw.u:.3f}"
    title = escape_html(f"{record.step + 1} · id {record.token_id} · {shown.hover} · p={pct(p)} · u={u}")
    return (f'<span class="{" ".join(classes)}" data-step="{i}" style="background:{bg};color:{text_colour(bg)}" '
            f'title="{title}">{piece_html(shown)}</span>')


def columns_html(run: CompareRun | None, lang: str = "en", selected: int | None = None, tag: str = "") -> str:
    """One card per column: its settings, then its tokens as chips coloured by the model's probability;
    the first step where the columns part is outlined, the steps after it faded."""
    if run is None or run.comparison is None:
        return f'<div class="ntp-cnote">{escape_html(tr(lang, "compare.empty"))}</div>'
    d = run.divergence
    cards = []
    for n, (request, records) in enumerate(zip(run.comparison.requests, run.columns)):
        shown = show_steps(records, lang=lang) if records else []
        chips = "".join(_chip(r, i, s, d, selected) for i, (r, s) in enumerate(zip(records, shown)))
        end = records[-1].stop_reason if records else None
        note = tr(lang, "compare.column.stopped", reason=stop_reason(end, lang), count=len(records)) if end else ""
        cards.append(
            f'<div class="ntp-col" style="border-top:4px solid {COLOURS[n]}" id="compare-col-{LETTERS[n]}">'
            f'<h4>{LETTERS[n]}</h4><div class="ntp-set">{escape_html(settings_text(request.settings, lang))}</div>'
            f'<div>{chips}</div><div class="ntp-cnote">{escape_html(note)}</div></div>'
        )
    run_tag = f' data-run="{escape_html(tag)}"' if tag else ""
    return STYLE + f'<div class="ntp-compare"{run_tag}>{"".join(cards)}</div>'


# Compare's Stop and its texts' change read the page as the lab's do (playground/lab/chips.py: STOP_JS, COUNT_JS):
# the steps of a comparison on the page are its longest column's chips; the tag is the streaming run's.
STOP_JS = """(...values) => {
  const box = document.querySelector("#compare-texts .ntp-compare");
  const tag = (box && box.dataset.run) || "";
  const steps = box ? Math.max(0, ...[...box.querySelectorAll(".ntp-col")].map(c => c.querySelectorAll(".ntp-ctok").length)) : 0;
  if (/^[0-9a-f]+$/.test(tag)) {
    let freeze = document.getElementById("ntp-compare-stop-freeze");
    if (!freeze) { freeze = document.createElement("style"); freeze.id = "ntp-compare-stop-freeze"; document.head.appendChild(freeze); }
    freeze.textContent = `#compare-texts .ntp-compare[data-run="${tag}"] .ntp-ctok:nth-of-type(n+${steps + 1}) {display: none !important}`;
  }
  values[values.length - 1] = `${tag}:${steps}`;
  return values;
}"""
COUNT_JS = """(...values) => {
  const html = String(values[values.length - 1] || "");
  const tag = (html.match(/<div class="ntp-compare" data-run="([0-9a-f]+)">/) || ["", ""])[1];
  const steps = Math.max(0, ...html.split('id="compare-col-').slice(1).map(c => (c.match(/<span class="ntp-ctok[ "]/g) || []).length));
  values[values.length - 1] = `${tag}:${steps}`;
  return values;
}"""


def status_markdown(run: CompareRun | None, lang: str = "en") -> str:
    if run is None or run.comparison is None:
        return tr(lang, "compare.status.empty")
    parts = [tr(lang, "compare.status.seed", seed=run.comparison.seed, columns=len(run.columns))]
    if run.stopped and not run.length:
        return " · ".join([*parts, tr(lang, "lab.status.stopped_before_first")])
    parts.append(tr(lang, "compare.status.steps", steps=run.length))
    if run.batch_sizes:
        parts.append(tr(lang, "compare.status.batch", rows=max(run.batch_sizes)))
    d = run.divergence
    if d is None:
        parts.append(tr(lang, "compare.status.same"))
    else:
        parts.append(tr(lang, "compare.status.diverge", step=d + 1))
    if run.stopped:
        parts.append(tr(lang, "lab.status.stopped_by_you", step=run.length))
    elif run.done:
        parts.append(tr(lang, "compare.status.done"))
    line = " · ".join(parts)
    return line + "  \n" + tr(lang, "compare.status.replayed") if run.replayed and run.done else line


def _record(column, step):
    return column[step] if 0 <= step < len(column) else None


def step_table_html(run: CompareRun | None, step: int, lang: str = "en") -> str:
    """Each column at one step: the token it chose, its rank and probability under the model and after the
    column's pipeline, and the u it drew: the same u in every column (greedy columns draw it and ignore it)."""
    if run is None or not run.columns or run.length == 0:
        return ""
    head = "".join(f"<th>{escape_html(tr(lang, k))}</th>" for k in (
        "compare.table.column", "compare.table.token", "compare.table.rank", "compare.table.raw",
        "compare.table.final", "compare.table.u"))
    rows = []
    for n, column in enumerate(run.columns):
        r = _record(column, step)
        if r is None:
            rows.append(f"<tr><td>{LETTERS[n]}</td><td colspan=5>{escape_html(tr(lang, 'compare.table.ended'))}</td></tr>")
            continue
        shown = show_steps(column, step, step + 1, lang)[0]  # read with its neighbours: a split character whole
        raw = pct(r.stages[0].chosen_prob) if r.stages else "?"
        final = pct(r.stages[-1].chosen_prob) if r.stages else "?"
        u = f"{r.draw.u:.4f}" if r.draw.u is not None else escape_html(tr(lang, "compare.table.greedy_u"))
        rows.append(f"<tr><td><b style='color:{COLOURS[n]}'>{LETTERS[n]}</b></td><td><code>{piece_html(shown)}</code>"
                    f"</td><td>{r.chosen_rank + 1}</td><td>{raw}</td><td>{final}</td><td>{u}</td></tr>")
    caption = escape_html(tr(lang, "compare.table.caption", step=step + 1))
    return (f'<div style="overflow-x:auto"><table class="ntp-steptable"><caption>{caption}</caption><thead><tr>{head}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _union_tokens(records) -> list:
    """The tokens to overlay: the most probable under any column's final distribution, most probable first."""
    best: dict[int, tuple[float, object]] = {}
    for r in records:
        final = r.stages[-1].probs if r.stages else ()
        for token, p in zip(r.candidates, final):
            if p > best.get(token.id, (-1.0,))[0]:
                best[token.id] = (p, token)
    ranked = sorted(best.values(), key=lambda pt: -pt[0])
    return [token for _, token in ranked[:OVERLAY_TOKENS]]


def overlay_figure(run: CompareRun | None, step: int, lang: str = "en", height: int = 420) -> go.Figure:
    """Top: each column's final distribution at `step`, overlaid as grouped bars over the same tokens.
    Bottom: each column's cumulative bar with the shared u on it: the same u lands on different tokens
    where the columns' distributions differ, which is why their texts part."""
    present = [(n, _record(c, step)) for n, c in enumerate(run.columns)] if run and run.columns else []
    present = [(n, r) for n, r in present if r is not None and r.stages]
    if not present:
        return empty_figure(tr(lang, "compare.overlay.empty"), height=height)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.68, 0.32], vertical_spacing=0.2)
    tokens = _union_tokens([r for _, r in present])
    before = bytes.fromhex(present[0][1].pending_hex)
    labels = [piece_label(show_token(t, before, lang=lang), 14) for t in tokens]
    for n, r in present:
        final = dict(zip((c.id for c in r.candidates), r.stages[-1].probs))
        xs = [final.get(t.id, 0.0) for t in tokens]
        fig.add_trace(go.Bar(
            x=xs, y=labels, orientation="h", name=LETTERS[n], marker_color=COLOURS[n],
            marker_line=dict(color=[VERMILLION if t.id == r.token_id else COLOURS[n] for t in tokens], width=2),
            hovertemplate=f"{LETTERS[n]} · %{{y}} · %{{x:.1%}}<extra></extra>", showlegend=True,
        ), row=1, col=1)
    u = next((r.draw.u for _, r in present if r.draw.u is not None), None)
    for n, r in present:
        _strip(fig, n, r, lang)
    if u is not None:
        fig.add_vline(x=u, line=dict(color="black", width=2), row=2, col=1)
        fig.add_annotation(text=f"u = {u:.3f}", x=u, y=1.0, xref="x2", yref="y2 domain", showarrow=False,
                           yanchor="bottom", xanchor="left" if u < 0.5 else "right", font=dict(size=TEXT))
    fig.update_yaxes(autorange="reversed", automargin=True, row=1, col=1)
    fig.update_yaxes(autorange="reversed", fixedrange=True, row=2, col=1)
    fig.update_xaxes(tickformat=".0%", title_text=tr(lang, "compare.overlay.x"), row=1, col=1, rangemode="tozero")
    fig.update_xaxes(range=[0, 1], tickformat=".2~f", fixedrange=True, row=2, col=1)
    return base_layout(fig, height, dict(l=10, r=10, t=36, b=30), barmode="group", showlegend=True,
                       legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
                       title=dict(text=tr(lang, "compare.overlay.title", step=step + 1), font=dict(size=12), x=0))


def _strip(fig: go.Figure, n: int, r, lang: str) -> None:
    """Column n's final distribution as one cumulative bar over [0, 1): its chosen token in vermilion."""
    before = bytes.fromhex(r.pending_hex)
    base, width, colour, hover = [], [], [], []
    cum = 0.0
    for token, p, start, w, c in candidate_segments(r, r.stages[-1].probs):
        base.append(start), width.append(w), colour.append(c)
        hover.append(f"{piece_hover(show_token(token, before, lang=lang))} · {pct(p)}")
        cum = start + w
    if cum < 1 - 1e-6:
        base.append(cum), width.append(1 - cum), colour.append(GREY)
        hover.append(tr(lang, "lab.draw.all_other", p=pct(1 - cum)))
    fig.add_trace(go.Bar(
        x=width, base=base, y=[LETTERS[n]] * len(width), orientation="h", width=0.8, showlegend=False, offsetgroup="strip",
        marker=dict(color=colour, line=dict(color="white", width=1)), hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
    ), row=2, col=1)
