"""How the lab's charts are drawn for this page: normal or presenter view, linear or log zoom, light or
dark theme. One small frozen View per page (in gr.State); the chart builders stay pure and take plain flags.

On a phone (View.narrow) the stage panels stand one under another, each as wide as the screen.

The presenter view puts one step on one projector screen (assets/presenter.css lays the page out): the stage
chart shows its PRESENT_ROWS most probable candidates in a geometry made for 14 px text, and the draw bar is
a slim strip; the run chart, under the scrubber, only grows its text."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.figures import empty_figure, for_view
from ..common.i18n import tr
from . import charts

PRESENT_DRAW_HEIGHT = 62  # the draw bar before for_view grows it (x1.45): 90 px, the bar, u and the axis


@dataclass(frozen=True)
class View:
    present: bool = False  # presenter view: big text, panels that change nothing folded into one note
    log: bool = False  # the stage chart's x axis on a log scale: the cut tail is visible
    dark: bool = False  # the page's dark theme
    narrow: bool = False  # a phone's screen: the stage panels one under another (presenter.READ_PAGE_JS: NARROW_PX)


def stage_chart(record, view: View = View(), lang: str = "en", fold: bool = True):
    """The stage chart; panels that change nothing fold into one note (a sweep keeps every panel: its frames share
    one layout)."""
    if view.narrow:  # a phone: the panels one under another, each the screen's width, the ten likeliest rows
        fig = charts.stage_figure(record, lang=lang, fold=fold, log=view.log, rows=charts.PRESENT_ROWS,
                                  present=view.present, stacked=True)
        return for_view(fig, view.present, view.dark, grow=False)
    if not view.present:
        return for_view(charts.stage_figure(record, lang=lang, log=view.log, fold=fold), False, view.dark)
    fig = charts.stage_figure(record, lang=lang, fold=fold, log=view.log, rows=charts.PRESENT_ROWS, present=True)
    # the figure's own height and margins were made for its 14 px text: for_view's growth is for the others
    return for_view(fig, True, view.dark, grow=False)


def draw_chart(record, view: View = View(), lang: str = "en"):
    height = PRESENT_DRAW_HEIGHT if view.present else 120
    return for_view(charts.draw_figure(record, height=height, lang=lang), view.present, view.dark)


def run_chart(records, selected: int | None = None, view: View = View(), lang: str = "en"):
    """The run chart; `selected` (an index into records) is marked: the step the page shows."""
    return for_view(charts.run_figure(records, selected=selected, lang=lang), view.present, view.dark)


def placeholders(view: View = View(), lang: str = "en") -> tuple:
    """The stage, draw and run charts before there is a run: what each will show, in `lang`."""
    draw_height = PRESENT_DRAW_HEIGHT if view.present else 120
    return tuple(for_view(fig, view.present, view.dark) for fig in (
        empty_figure(tr(lang, "lab.stage_plot.empty")), empty_figure(tr(lang, "lab.draw_plot.empty"),
                                                                     height=draw_height),
        empty_figure(tr(lang, "lab.run_plot.empty"), height=220)))
