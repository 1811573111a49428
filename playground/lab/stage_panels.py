"""The stage figure: one step's distribution after every stage of the pipeline, panels side by side.

A pure function, records in, a plotly Figure out (no torch, no gradio). Two geometries: the lab's (20 rows,
small text, the figure's height given) and the presenter view's (`present`: fewer rows, text made for 14 px,
a height that follows from the rows and the lines of text), so that a step fits one projector screen. Either may
be `stacked`: the panels one under another, each as wide as a phone, the height following from the panels.
"""

from __future__ import annotations

import copy
import functools
import html
import re
from dataclasses import replace

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.knobs import MOVERS, STAGES
from model_service.records.settings import ADJUSTERS, BANS, LESSON_STAGES
from model_service.records.step import Stage, StepRecord

from ..common.colours import BLUE, GREY, INK, VERMILLION
from ..common.figures import TEXT, PlainFigure, base_layout, empty_figure
from ..common.i18n import tr
from ..common.text import Shown, pct, piece_hover, piece_label, show_token

# the filters' names, as the controls say them in every language (the stage panels' titles and the grey bars' hover)
# (records/knobs.py STAGES: every stage but those that move logits rather than remove them; the final's, greedy's)
FILTER_NAMES = {**{name: label for name, (label, _) in STAGES.items() if name not in (*MOVERS, "temperature")},
                "final": "argmax"}
FOLD_NAMES = {**FILTER_NAMES, **{name: label for name, (label, _) in STAGES.items()}}

STAGE_HEIGHT = 360  # px, the lab's stage figure (the presenter's and a phone's follow from their rows)
PRESENT_ROWS = 10  # candidate rows in the presenter view: the step fits a screen with the chips and the draw
WIDE_TITLES_UP_TO = 4  # panels whose titles keep "kept 20 · mass 0.93" on one line in the lab (more: a line per fact)
PRESENT_TEXT = 14  # px, every text of the presenter view's figure (playground/common/figures.py BIG_TEXT)
ROW_PX = 20  # one candidate's row in the presenter view: a 14 px label and the bar's 14 px percentage
LINE_PX = 18  # one line of 14 px text (titles, the key, the note)
TICKS_PX = 22  # the x axes' tick labels under the panels, in the presenter view
# a stacked figure (a phone): one candidate's row, the space over a panel for its title and under it for its x ticks
STACK_ROW_PX = {False: 17, True: 20}  # by `present`: 12 px text, 14 px text
STACK_GAP_PX = {False: 46, True: 52}
STACK_NOTE_CHARS = 40  # a phone's ~350 px
# the folded stages' note wraps at this many characters, which the narrowest view holds on a line: the lab's
# note starts at its plot area (a figure at least 720 px wide), the presenter's at the figure's left edge, on a
# phone too (a 980 px figure that scrolls sideways, of which the first ~350 px show)
NOTE_CHARS = {False: 90, True: 44}


# ---- the rows and the bars --------------------------------------------------------------------------------


def stage_or_none(record: StepRecord, name: str) -> Stage | None:
    return next((s for s in record.stages if s.name == name), None)


def chosen_row(record: StepRecord) -> int | None:
    return next((i for i, t in enumerate(record.candidates) if t.id == record.token_id), None)


def _stage_title(stage: Stage, greedy: bool, lang: str) -> str:
    count = f"{stage.kept_count:,}"
    if stage.name == "raw":
        return tr(lang, "lab.stage.raw", count=count)
    if stage.name == "temperature" and stage.applied is not None:  # llama.cpp's dynamic temperature
        return tr(lang, "lab.stage.dynatemp", count=count, t=f"{stage.applied:.2f}")
    if stage.name == "temperature" or (stage.name in ADJUSTERS and stage.name not in BANS):  # a bans' title: a cut's
        return tr(lang, f"lab.stage.{stage.name}", count=count)
    if stage.name == "final":
        return tr(lang, "lab.stage.final_greedy" if greedy else "lab.stage.final_sampled", count=count)
    if stage.name == "mirostat" and stage.applied is not None:  # the mu its cut used
        return tr(lang, "lab.stage.mirostat", mu=f"{stage.applied:.2f}", count=count, mass=f"{stage.kept_mass:.2f}")
    title = tr(lang, "lab.stage.filter", filter=FILTER_NAMES[stage.name], count=count, mass=f"{stage.kept_mass:.2f}")
    if stage.name == "xtc" and stage.applied is not None:  # the chance it drew: it fires at most xtc_probability
        title += "<br>" + tr(lang, "lab.stage.chance", chance=f"{stage.applied:.2f}")
    return title


def _row_probs(stage: Stage, extra: bool) -> list[float]:
    """The stage's probs per y row; the off-list chosen token, when shown, is the last row."""
    return [*stage.probs, stage.chosen_prob] if extra else list(stage.probs)


def _shown_rows(record: StepRecord, extra: bool, lang: str = "en") -> list[Shown]:
    """The candidates (and an off-list chosen token), each read as the next token after the text so far."""
    before = bytes.fromhex(record.pending_hex)
    return ([show_token(t, before, lang=lang) for t in record.candidates]
            + ([show_token(record, before, lang=lang)] if extra else []))


def _stage_bars(stage, prev, removed_by, chosen, extra, greedy, lang, shown: list[Shown], text_px: int,
                ids: list[int]) -> dict:
    """One panel: kept bars blue (chosen vermillion), bars this stage cut grey at their old height; `ids`: each
    row's token id."""
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
        textfont=dict(size=text_px, color=["white" if v >= 0.3 else INK for v in x]),
        cliponaxis=False,
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        customdata=ids,  # each bar's token id: a click bans it (ban.py)
    )


def _y_labels(record: StepRecord, chosen: int | None, shown: list[Shown]) -> list[str]:
    labels = [piece_label(s) for s in shown[: len(record.candidates)]]
    if chosen is None:  # drawn from outside the rows: give it its own row, marked with its rank
        labels.append(piece_label(shown[-1], 10) + f" #{record.chosen_rank + 1}")
        chosen = len(labels) - 1
    labels[chosen] = f"<b>{labels[chosen]}</b>"
    return labels


def used(stages) -> list[Stage]:
    """The stages without those beyond the lesson's chain (bias, penalties, typical-p, ...) that changed nothing:
    they are drawn only when a learner sets them (a run saved before they existed has none)."""
    return [stage for i, stage in enumerate(stages)
            if stage.name in LESSON_STAGES or (stage.probs, stage.kept_count, stage.entropy_bits) != (
                stages[i - 1].probs, stages[i - 1].kept_count, stages[i - 1].entropy_bits)]


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


def top_rows(record: StepRecord, stages: list[Stage], rows: int) -> tuple[StepRecord, list[Stage]]:
    """The record and the stages cut to their `rows` most probable candidates; a chosen token among those cut
    becomes the off-list row that the figure gives its own last row (its label ends with its rank)."""
    if len(record.candidates) <= rows:
        return record, stages
    return (replace(record, candidates=record.candidates[:rows]),
            [replace(stage, probs=stage.probs[:rows]) for stage in stages])


def wrapped(text: str, width: int) -> str:
    """`text` with a Plotly line break (<br>) before any word that would pass `width` characters:
    an annotation never wraps by itself, it runs past the figure's edge and is cut there."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


# ---- the figure -------------------------------------------------------------------------------------------


def stage_figure(record: StepRecord, height: int = STAGE_HEIGHT, lang: str = "en", fold: bool = False,
                 log: bool = False, rows: int | None = None, present: bool = False,
                 stacked: bool = False) -> PlainFigure:
    """One horizontal-bar panel per pipeline stage (raw … final), sharing one y axis of candidates.

    Rows are the raw top-N (the first `rows` of them when given), most probable at the top, in the same
    order in every panel, so the eye can follow a token from stage to stage. If the chosen token is not among
    them it gets an extra last row (its label ends with its 1-based raw rank).

    This figure streams during a run, so it is assembled from a cached, already validated layout and
    plain trace dicts into a PlainFigure: plotly's per-property validation of six subplots cost ~80 ms a step.

    fold: panels equal to the one before become one note (the presenter view); log: a log x axis from
    0.01 %, so that the tail a filter cuts is visible (bars under 1 % are hair-thin on a linear one);
    present: the presenter view's geometry, text of PRESENT_TEXT px and a height that follows from the rows
    (`height` is then unused); stacked: the panels one under another, every one with its candidates' labels, and a
    height that follows from the panels (`height` unused), for a screen narrower than the panels side by side.
    """
    if not record.stages or not record.candidates:
        return empty_figure(tr(lang, "lab.stage.empty"), height)
    stages, same = folded(used(record.stages)) if fold else (used(record.stages), [])
    if rows is not None:
        record, stages = top_rows(record, stages, rows)
    chosen = chosen_row(record)
    extra = chosen is None
    greedy = record.draw.u is None
    shown = _shown_rows(record, extra, lang)
    ids = [t.id for t in record.candidates] + ([record.token_id] if extra else [])
    labels = _y_labels(record, chosen, shown)
    n = len(labels)
    layout = copy.deepcopy(_stage_layout(len(stages), height, lang, log, present, stacked))
    for name, axis in layout.items():  # the rows: the one part of the layout that follows the record
        if name.startswith("yaxis"):
            axis["tickvals"], axis["range"] = list(range(n)), [n - 0.5, -0.5]
    titles = [_stage_title(stage, greedy, lang) for stage in stages]
    # the presenter's titles take a line per fact, and so do five or more panels' (each ~100 px wide at 1024 px): a
    # wide line would run into its neighbour's (a stacked panel is as wide as the figure: one line)
    if not stacked and (present or len(stages) >= WIDE_TITLES_UP_TO + 1):
        titles = [title.replace(" · ", "<br>") for title in titles]
    if not stacked and not present and max(title.count("<br>") for title in titles) > 1:  # a third line needs room
        layout["margin"]["t"] += 15
    for annotation, title in zip(layout["annotations"], titles):  # the first annotations are the subplot titles
        annotation["text"] = title
    for col in range(1, len(stages) + 1):
        layout[f"yaxis{col if col > 1 else ''}"]["ticktext"] = labels
    # a fixed left margin sized to the labels: automargin would make the browser measure every redraw
    longest = max(len(_plain(label)) for label in labels)
    # (the presenter's key stands in that margin, over the labels)
    layout["margin"]["l"] = _label_margin(longest, present, stacked)
    note_lines = _add_note(layout, same, lang, present, stacked)
    if stacked:
        _stack(layout, len(stages), n, max(title.count("<br>") + 1 for title in titles), note_lines, present)
    elif present:
        _present_size(layout, n, max(title.count("<br>") + 1 for title in titles), note_lines)
    removed_by: dict[int, str] = {}
    data = []
    for col, stage in enumerate(stages, start=1):
        prev = stages[col - 2] if col > 1 else None
        bars = _stage_bars(stage, prev, removed_by, n - 1 if extra else chosen, extra, greedy, lang, shown,
                           PRESENT_TEXT if present else TEXT, ids)
        data.append({**bars, "xaxis": f"x{col if col > 1 else ''}", "yaxis": f"y{col if col > 1 else ''}"})
    return PlainFigure(data, layout)


def _label_margin(longest: int, present: bool, stacked: bool) -> int:
    """The left margin, in px, for labels of `longest` characters: ~9 px a character of 14 px text, ~7 of 12 px;
    a phone's stacked panels leave the bars at least half of its ~350 px."""
    per_char, base = (9, 18) if present else (7, 14)
    if stacked:
        return min(150 if present else 130, base + per_char * longest)
    return max(110, min(230, base + per_char * longest)) if present else min(180, base + per_char * longest)


def _add_note(layout: dict, same: list[str], lang: str, present: bool, stacked: bool = False) -> int:
    """The folded stages' note, a line or more under the key, wrapped; returns its lines (0: no note)."""
    if not same:
        return 0
    names = ", ".join(FOLD_NAMES.get(name, name) for name in same)
    text = wrapped(tr(lang, "lab.stage.folded", names=names), STACK_NOTE_CHARS if stacked else NOTE_CHARS[present])
    # the presenter's note (and a phone's) starts at the figure's left edge, under the labels: the whole width
    size = PRESENT_TEXT if present else TEXT
    xshift = 6 - layout["margin"]["l"] if present or stacked else 0
    yshift = -TICKS_PX if present and not stacked else -40  # (stacked: under the last panel's ticks and the key)
    layout["annotations"].append(dict(
        text=text, x=0, y=0, xref="paper", yref="paper", xanchor="left", yanchor="top", align="left",
        xshift=xshift, yshift=yshift, showarrow=False, font=dict(size=size, color="#555")))
    lines = text.count("<br>") + 1
    if not present:
        layout["margin"]["b"] += 20 + 15 * (lines - 1)
    return lines


def _stack(layout: dict, panels: int, rows: int, title_lines: int, note_lines: int, present: bool) -> None:
    """A stacked figure's height and each panel's place: a panel of `rows` candidates under its title, its x
    ticks under it, then the next; the key (and the folded stages' note) under the last."""
    row, line = STACK_ROW_PX[present], LINE_PX if present else 15
    panel, gap = row * rows, STACK_GAP_PX[present] + line * (title_lines - 1)
    margin = layout["margin"]
    margin["t"] = 8 + line * title_lines
    margin["b"] = 44 + line * note_lines
    layout["annotations"][panels]["xshift"] = 6 - margin["l"]  # the key, from the figure's left edge
    plot = panels * panel + (panels - 1) * gap
    layout["height"] = margin["t"] + plot + margin["b"]
    for i in range(panels):
        top = 1 - i * (panel + gap) / plot
        layout[f"yaxis{i + 1 if i else ''}"]["domain"] = [max(0.0, top - panel / plot), top]
        layout["annotations"][i]["y"] = top  # its title, over it


def _present_size(layout: dict, rows: int, title_lines: int, note_lines: int) -> None:
    """The presenter view's margins and height, from what the figure holds: its titles' lines (and the key's
    three) over the panels, a row per candidate, then the tick labels and the note's lines under them."""
    margin = layout["margin"]
    margin["t"] = 8 + LINE_PX * max(title_lines, 3)
    margin["b"] = TICKS_PX + LINE_PX * note_lines + 6
    layout["height"] = margin["t"] + ROW_PX * rows + margin["b"]


def _plain(label: str) -> str:
    """A label as it reads: no tags (bold, the subscript of a split character), no entities."""
    return html.unescape(re.sub(r"<[^>]*>", "", label))


def warm_layouts(langs, panels: int = 6, height: int = STAGE_HEIGHT) -> int:
    """Build the layouts a knob's first moves meet (1..`panels` panels, the lab's and the presenter's view, each of
    `langs`) before a learner waits on one: each is validated by plotly once per process, ~230 ms of the web
    process's CPU (the first what-if of each shape took 160-270 ms in the server). Returns how many."""
    keys = [(cols, height, lang, False, present, False) for lang in langs for present in (False, True)
            for cols in range(1, panels + 1)]
    for key in keys:
        _stage_layout(*key)
    return len(keys)


@functools.lru_cache(maxsize=96)
def _stage_layout(cols: int, height: int, lang: str = "en", log: bool = False,
                  present: bool = False, stacked: bool = False) -> dict:
    """The validated layout of a stage figure with `cols` panels, titles blank, key in `lang`, its y axes without
    rows (stage_figure sets them for its record); `log`: the x axes on a log scale from 0.01 % to 100 %; `present`:
    every text PRESENT_TEXT px; `stacked`: the panels one under another, each with its own labels (their places are
    set by _stack)."""
    small = PRESENT_TEXT if present else TEXT
    if stacked:
        fig = make_subplots(rows=cols, cols=1, subplot_titles=[" "] * cols, vertical_spacing=0.0)
    else:
        fig = make_subplots(rows=1, cols=cols, shared_yaxes=True, horizontal_spacing=0.04 if present else 0.028,
                            subplot_titles=[" "] * cols)
    # a "100%" would run into the next panel's "0": its grid line says where 100 % is
    fig.update_xaxes(
        range=[0, 1], tickvals=[0, 0.5, 1], ticktext=["0", "50%", ""], showgrid=True,
        gridcolor="#EEEEEE",
        zeroline=False, fixedrange=True, tickfont=dict(size=small), ticks="",
    )
    if log:
        # two labels a panel: the outer ones (0.01 %, 100 %) would run into the next panel's
        fig.update_xaxes(type="log", range=[-4, 0.02], tickvals=[1e-3, 0.1], ticktext=["0.1%", "10%"])
    fig.update_yaxes(
        fixedrange=True, showgrid=False, zeroline=False, ticks="", tickfont=dict(size=small),
    )
    fig.update_annotations(font=dict(size=small, color=INK))  # the subplot titles
    _key(fig, lang, present, stacked)
    base_layout(fig, height, dict(l=6, r=24 if present else 16, t=40, b=40), bargap=0.18,
                uniformtext=dict(minsize=small, mode="show"))
    return fig.layout.to_plotly_json()


def _key(fig: go.Figure, lang: str, present: bool = False, stacked: bool = False) -> None:
    """A colour key instead of a legend box: one line under the panels; in the presenter view three short
    lines over the labels, beside the panels' titles, where the figure has room to spare; stacked, the short words
    on one line from the figure's left edge, under the last panel."""
    swatch = '<span style="color:{}">■</span> {}'
    words = (tr(lang, "lab.key.kept"), tr(lang, "lab.key.removed_short" if present or stacked else "lab.key.removed"),
             tr(lang, "lab.key.chosen"))
    keys = [swatch.format(c, t) for c, t in zip((BLUE, GREY, VERMILLION), words)]
    if stacked:  # (_stack moves it to the figure's left edge, once the labels' margin is known)
        fig.add_annotation(text="   ".join(keys), x=0, y=0, xref="paper", yref="paper", xanchor="left",
                           yanchor="top", yshift=-20, showarrow=False,
                           font=dict(size=PRESENT_TEXT if present else TEXT, color="#555"))
        return
    if present:
        fig.add_annotation(text="<br>".join(keys), x=0, y=1, xref="paper", yref="paper", xanchor="right",
                           yanchor="bottom", align="left", xshift=-8, showarrow=False,
                           font=dict(size=PRESENT_TEXT, color="#555"))
        return
    fig.add_annotation(
        text="   ".join(keys), x=1, y=0, xref="paper", yref="paper", xanchor="right", yanchor="top", yshift=-20,
        showarrow=False, font=dict(size=TEXT, color="#555"),
    )
