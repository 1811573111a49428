"""Views of one step of the batched engine (lesson 13, "Inside an engine"): pure functions, records in,
a plotly Figure or an HTML string out, in the language `lang` ("en" by default). No torch, no gradio.

Rows keep their place in every view for the whole run (request order, finished rows stay as empty
lines), so the eye can watch the batch shrink while the layout stays still.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from model_service.records.settings import SamplingSettings
from model_service.records.step import BatchStep, StepRecord

from ..common.colours import MASS_SCALE, VERMILLION
from ..common.figures import TEXT, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import (
    escape_html,
    escape_plotly,
    pct,
    piece_hover,
    piece_html,
    piece_label,
    shorten,
    show_token,
    stop_reason,
)

CELL_CHARS = 8  # token text in a heatmap cell is cut to this
PIECE_CHARS = 10  # token text in the parameter table


def settings_label(s: SamplingSettings, lang="en") -> str:
    """A request's knobs in a few words, only those that are on: "greedy", "T 0.8 · top-p 0.95 · rep 1.2"."""
    penalties = [f"{short} {getattr(s, name):g}" for name, short, off, _ in _PENALTIES if getattr(s, name) != off]
    if s.greedy:
        parts = ["greedy"]
    else:
        parts = [] if s.temperature == 1 else [f"T {s.temperature:g}"]
        parts += [f"top-k {s.top_k}"] if s.top_k else []
        parts += [f"top-p {s.top_p:g}"] if s.top_p < 1 else []
        parts += [f"min-p {s.min_p:g}"] if s.min_p > 0 else []
        parts = parts or ([] if penalties else [tr(lang, "engine.label.plain")])
    parts += penalties
    if s.order != "hf":
        parts.append(s.order_text)
    return " · ".join(parts)


def _finished_note(record: StepRecord, lang) -> str:
    return tr(lang, "engine.heatmap.finished", step=record.step + 1, reason=stop_reason(record.stop_reason, lang))


# ---- the batch heatmap --------------------------------------------------------------------------


def _row_cells(record: StepRecord, top: int, lang):
    """(probabilities, cell texts, hover texts, chosen column) of one live row: its top tokens by raw
    rank, then one "rest" cell for the mass outside them."""
    final = record.stage("final")
    raw = record.stage("raw")
    n = min(top, len(record.candidates))
    z = [*final.probs[:n], *[None] * (top - n)]
    z.append(max(0.0, 1.0 - sum(final.probs[:n])))
    text, hover = [], []
    before = bytes.fromhex(record.pending_hex)  # each candidate is read after the row's text so far
    for k, token in enumerate(record.candidates[:n]):
        shown = show_token(token, before, lang=lang)
        text.append(piece_label(shown, CELL_CHARS))
        hover.append(tr(lang, "engine.heatmap.hover", rank=k + 1, piece=piece_hover(shown),
                        final=pct(final.probs[k]), raw=pct(raw.probs[k])))
    text += [""] * (top - n)
    hover += [""] * (top - n)
    chosen = next((k for k, t in enumerate(record.candidates[:n]) if t.id == record.token_id), None)
    if chosen is None:  # drawn from the tail: the rest cell names it and its raw rank
        chosen = top
        shown = show_token(record, before, lang=lang)
        text.append(piece_label(shown, CELL_CHARS - 3) + f" #{record.chosen_rank + 1}")
        hover.append(tr(lang, "engine.heatmap.hover_tail", top=n, piece=piece_hover(shown),
                        rank=record.chosen_rank + 1))
    else:
        text.append(pct(z[-1]) if z[-1] >= 0.01 else "")
        hover.append(tr(lang, "engine.heatmap.hover_rest", final=pct(z[-1])))
    return z, text, hover, chosen


def batch_heatmap(step: BatchStep, labels: Sequence[str] | None = None, finished: Sequence[StepRecord | None] = (),
                  top: int = 10, lang="en") -> go.Figure:
    """Requests × their top tokens, coloured by the probability after the final stage.

    Each row has its own tokens (a row's top-`top` by raw logit, most probable left), so columns are
    ranks, not tokens; the last column is the mass outside them. The chosen token is outlined.
    labels: one per request (default "row i"); finished: per request its last record, for rows that
    have left the batch (they show as an empty line with their stop reason)."""
    rows = len(step.rows)
    if rows == 0:
        return empty_figure(tr(lang, "engine.heatmap.no_requests"))
    labels = list(labels) if labels else [tr(lang, "engine.row", number=i + 1) for i in range(rows)]
    finished = list(finished) + [None] * (rows - len(finished))
    z, text, hover, shapes, notes = [], [], [], [], []
    for i, record in enumerate(step.rows):
        if record is None or not record.stages:
            z.append([None] * (top + 1))
            text.append([""] * (top + 1))
            hover.append([""] * (top + 1))
            done = finished[i]
            notes.append((i, _finished_note(done, lang) if done is not None else tr(lang, "engine.heatmap.not_in_batch")))
            shapes.append(dict(type="rect", x0=-0.5, x1=top + 0.5, y0=i - 0.45, y1=i + 0.45, layer="below",
                               fillcolor="#F2F2F2", line=dict(width=0), xref="x", yref="y"))
            continue
        row_z, row_text, row_hover, chosen = _row_cells(record, top, lang)
        z.append(row_z)
        text.append(row_text)
        hover.append(row_hover)
        shapes.append(dict(type="rect", x0=chosen - 0.5, x1=chosen + 0.5, y0=i - 0.5, y1=i + 0.5,
                           line=dict(color=VERMILLION, width=2.5), xref="x", yref="y"))
    fig = go.Figure(go.Heatmap(
        z=z, text=text, texttemplate="%{text}", textfont=dict(size=TEXT), hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>", zmin=0, zmax=1, colorscale=MASS_SCALE, xgap=1, ygap=2,
        colorbar=dict(title=dict(text=tr(lang, "engine.heatmap.colorbar"), side="top", font=dict(size=TEXT)), thickness=10,
                      len=0.9, tickvals=[0, 0.1, 0.3, 0.6, 1], ticktext=["0", ".1", ".3", ".6", "1"], tickfont=dict(size=TEXT)),
    ))
    for i, note in notes:
        fig.add_annotation(text=escape_plotly(note), x=top / 2, y=i, xref="x", yref="y", showarrow=False,
                           font=dict(size=TEXT, color="#888"))
    fig.update_layout(shapes=shapes)
    ranks = [str(k + 1) for k in range(top)] + [tr(lang, "engine.heatmap.rest")]
    fig.update_xaxes(tickvals=list(range(top + 1)), ticktext=ranks,
                     side="top", range=[-0.5, top + 0.5], fixedrange=True, showgrid=False, zeroline=False,
                     tickfont=dict(size=TEXT), ticks="",
                     title=dict(text=tr(lang, "engine.heatmap.x_title"), font=dict(size=TEXT), standoff=2))
    fig.update_yaxes(tickvals=list(range(rows)), ticktext=[escape_plotly(shorten(label, 34)) for label in labels],
                     range=[rows - 0.5, -0.5], fixedrange=True, showgrid=False, zeroline=False, automargin=True,
                     tickfont=dict(size=TEXT), ticks="", ticklabelstandoff=6)
    return base_layout(fig, 70 + 34 * rows, dict(l=6, r=6, t=46, b=8))


# ---- the parameter tensors ---------------------------------------------------------------------------

_TENSORS = (  # (key in BatchStep.params, dtype, the catalogue key of what "off" looks like)
    ("temperature", "float32", "engine.params.note.temperature"),
    ("top_k", "int64", "engine.params.note.top_k"),
    ("top_p", "float32", "engine.params.note.top_p"),
    ("min_p", "float32", "engine.params.note.min_p"),
    ("greedy", "bool", "engine.params.note.greedy"),
)


# The penalties: (SamplingSettings field, short name in a label, off, the catalogue key of what "off" looks like).
# Not among BatchStep.params (the sampler's BatchParams): read from each request's settings, and shown only when a
# row of the batch has one (the sampler then makes them per-row float32 tensors, sampling/penalties.py:penalise).
_PENALTIES = (
    ("repetition_penalty", "rep", 1.0, "engine.params.note.repetition_penalty"),
    ("frequency_penalty", "freq", 0.0, "engine.params.note.frequency_penalty"),
    ("presence_penalty", "pres", 0.0, "engine.params.note.presence_penalty"),
)


def _penalty_params(step: BatchStep, settings: Sequence[SamplingSettings] | None) -> list[tuple]:
    """(key, dtype, note, the values of the live rows) of each penalty, none where no live row has one."""
    live = [settings[i] for i in step.active] if settings else []
    if not any(s.penalised for s in live):
        return []
    return [(name, "float32", note, [getattr(s, name) for s in live]) for name, _, _, note in _PENALTIES]


def _value(value) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return f"{value:.3g}" if value else "0"
    return str(value)


def params_html(step: BatchStep, numbers: Sequence[int] | None = None, lang="en",
                settings: Sequence[SamplingSettings] | None = None) -> str:
    """The per-row tensors the sampler receives this step, one (B,) tensor per line, one column per
    batch row, and what it gives back: one token id per row. numbers: the table row of each request;
    settings: each request's, for its penalties (where a row has one)."""
    b, vocab = step.logits_shape
    numbers = list(numbers) if numbers else list(range(1, len(step.rows) + 1))
    head = "".join(f"<th>b{j}<br><small>{tr(lang, 'engine.row', number=numbers[i])}</small></th>"
                   for j, i in enumerate(step.active))
    lines = []
    tensors = [(key, dtype, note, step.params.get(key, [])) for key, dtype, note in _TENSORS]
    for key, dtype, note, values in tensors + _penalty_params(step, settings):
        cells = "".join(f"<td>{_value(v)}</td>" for v in values)
        lines.append(f"<tr><th><code>{key}</code> <small>{dtype} · {tr(lang, note)}</small></th>{cells}</tr>")
    chosen = [step.rows[i] for i in step.active]
    ids = "".join(f"<td>{r.token_id}</td>" for r in chosen)
    shown = [show_token(r, bytes.fromhex(r.pending_hex), lang=lang) for r in chosen]  # read after each row's text so far
    pieces = "".join(f'<td title="{escape_html(s.hover)}">{piece_html(s, PIECE_CHARS)}</td>' for s in shown)
    lines.append(f'<tr class="ntp-out"><th>→ <code>next_tokens</code> <small>int64</small></th>{ids}</tr>')
    lines.append(f'<tr class="ntp-out"><th>→ {tr(lang, "engine.params.as_text")}</th>{pieces}</tr>')
    caption = tr(lang, "engine.params.caption", step=step.step + 1, logits=f"<code>({b}, {vocab:,})</code>",
                 row=f"<code>({b},)</code>")
    return (f'{PARAMS_STYLE}<div class="ntp-params"><div class="ntp-caption">{caption}</div>'
            f"<table><tr><th>{tr(lang, 'engine.params.batch_row')}</th>{head}</tr>{''.join(lines)}</table></div>")


PARAMS_STYLE = """<style>
.ntp-params{font-size:13px;overflow-x:auto}
.ntp-params .ntp-caption{margin-bottom:4px}
.ntp-params table{border-collapse:collapse;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;margin:0}
.ntp-params table th,.ntp-params table td{padding:3px 10px!important;border:0!important;border-bottom:1px solid #ddd!important;
 text-align:right!important;white-space:pre;line-height:1.3}
.ntp-params table th:first-child{text-align:left!important;font-weight:normal}
.ntp-params small{opacity:.7}
.ntp-params tr.ntp-out td{font-weight:600;color:#D55E00}
.ntp-params .ntp-part{font-size:9px;font-weight:normal;color:inherit}
</style>"""


def empty_params_html(lang="en") -> str:
    return f'{PARAMS_STYLE}<div class="ntp-params ntp-caption">{tr(lang, "engine.params.empty")}</div>'


# ---- the requests' texts, side by side -----------------------------------------------------------------


def _card(number: int, label: str, prompt: str, record: StepRecord | None, running: bool, lang) -> str:
    if record is None:
        state, body = tr(lang, "engine.card.waiting" if running else "engine.card.not_run"), ""
    else:
        body = escape_html(record.text)
        if record.stop_reason:
            state = tr(lang, "engine.card.stopped", tokens=record.step + 1, reason=stop_reason(record.stop_reason, lang))
        else:
            state = tr(lang, "engine.card.generating", tokens=record.step + 1)
    done = " ntp-done" if record is not None and record.stop_reason else ""
    return (
        f'<div class="ntp-card{done}" data-row="{number}"><div class="ntp-card-head"><b>{tr(lang, "engine.card.row", number=number)}</b> · '
        f"{escape_html(label)}</div><div class=\"ntp-card-text\"><span class=\"ntp-prompt\">{escape_html(prompt)}</span>"
        f'{body}</div><div class="ntp-card-state">{state}</div></div>'
    )


def rows_html(numbers: Sequence[int], labels: Sequence[str], prompts: Sequence[str],
              latest: Sequence[StepRecord | None], running: bool = True, lang="en") -> str:
    """One card per request: its prompt (muted), the text generated so far, and its state or stop reason."""
    cards = "".join(_card(n, lab, p, r, running, lang) for n, lab, p, r in zip(numbers, labels, prompts, latest))
    return f'{ROWS_STYLE}<div class="ntp-cards">{cards}</div>'


def empty_rows_html(lang="en") -> str:
    return f'<div class="ntp-empty">{tr(lang, "engine.texts.empty")}</div>'


ROWS_STYLE = """<style>
.ntp-cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(240px,1fr));gap:8px}
.ntp-card{border:1px solid #d0d7de;border-left:4px solid #0072B2;border-radius:6px;padding:6px 8px;display:flex;flex-direction:column}
.ntp-card.ntp-done{border-left-color:#999}
.ntp-card-head{font-size:12px;margin-bottom:4px}
.ntp-card-text{font-size:14px;white-space:pre-wrap;word-break:break-word;flex:1;min-height:3em}
.ntp-prompt{opacity:.55}
.ntp-card-state{font-size:12px;margin-top:4px;opacity:.85}
</style>"""


# ---- the status line -----------------------------------------------------------------------------


def batch_sizes_summary(sizes: Sequence[int], lang="en") -> str:
    """Batch size per step as runs: [6, 6, 5, 5, 5, 2] -> "6 rows for steps 1–2 · 5 for steps 3–5 · 2 for step 6"."""
    runs: list[list[int]] = []  # [size, first step, last step], steps 1-based
    for s, size in enumerate(sizes, start=1):
        if runs and runs[-1][0] == size:
            runs[-1][2] = s
        else:
            runs.append([size, s, s])
    parts = []
    for n, (size, a, b) in enumerate(runs):
        steps = tr(lang, "engine.sizes.steps", first=a, last=b) if a != b else tr(lang, "engine.sizes.step", step=a)
        key = "engine.sizes.next" if n else "engine.sizes.first_one" if size == 1 else "engine.sizes.first"
        parts.append(tr(lang, key, size=size, steps=steps))
    return " · ".join(parts)


def status_markdown(step: BatchStep | None, sizes: Sequence[int] = (), tokens: int = 0, seconds: float = 0.0,
                    done: bool = False, lang="en") -> str:
    if step is None:
        return tr(lang, "engine.status.idle")
    b, vocab = step.logits_shape
    parts = [
        tr(lang, "engine.status.step", step=step.step + 1),
        tr(lang, "engine.status.batch", size=b, rows=len(step.rows)),
        f"logits ({b}, {vocab:,})",
        tr(lang, "engine.status.timing", forward=f"{step.forward_ms:.0f}", sampler=f"{step.sampling_ms:.1f}"),
    ]
    if seconds > 0:
        parts.append(tr(lang, "engine.status.rate", rate=f"{tokens / seconds:.1f}"))
    line = " · ".join(parts)
    if done:
        line += "  \n" + tr(lang, "engine.status.done", steps=step.step + 1, tokens=tokens,
                            sizes=batch_sizes_summary(sizes, lang))
    return line


def waiting_markdown(waiting, lang="en") -> str:
    """A request that waits for a row in the shared batch: where it stands."""
    key = "engine.waiting.one" if waiting.ahead == 1 else "engine.waiting.many"
    return tr(lang, key, ahead=waiting.ahead, waiting=waiting.queue_length)


def room_html(room, lang="en") -> str:
    """The live room: every row the model is running now, anonymised (settings and progress, never a
    prompt), the queue, and the scheduler's step counter."""
    head = tr(lang, "engine.room.head", used=len(room.rows), max_rows=room.max_rows, waiting=room.waiting,
              step=f"{room.step:,}")
    mode = tr(lang, "engine.room.invariant_on" if getattr(room, "batch_invariant", False) else "engine.room.invariant_off")
    head = f'<div class="ntp-caption">{head} {mode}</div>'
    if not room.rows:
        return f'{PARAMS_STYLE}<div class="ntp-params">{head}<div class="ntp-caption">{tr(lang, "engine.room.nobody")}</div></div>'
    cells = []
    for i, row in enumerate(room.rows, start=1):
        label = settings_label(SamplingSettings(**{**row.settings, "seed": None}), lang)
        seeded = tr(lang, "engine.room.seeded") if row.seeded else ""
        progress = (tr(lang, "engine.room.prefilling") if row.prefilling
                    else tr(lang, "engine.room.progress", step=row.step, max_tokens=row.max_new_tokens))
        cells.append(f"<tr><td>{i}</td><td>{escape_html(label)}{seeded}</td>"
                     f"<td>{tr(lang, 'engine.room.prompt_tokens', tokens=row.prompt_tokens)}</td><td>{progress}</td></tr>")
    columns = "".join(f"<th>{tr(lang, key)}</th>" for key in (
        "engine.room.col.row", "engine.room.col.settings", "engine.room.col.prompt", "engine.room.col.progress"))
    return f'{PARAMS_STYLE}<div class="ntp-params">{head}<table><tr>{columns}</tr>{"".join(cells)}</table></div>'


__all__ = [
    "room_html", "waiting_markdown",
    "batch_heatmap", "params_html", "empty_params_html", "rows_html", "status_markdown", "batch_sizes_summary",
    "settings_label",
]
