"""How the lab's charts are drawn for this page: normal or presenter view, linear or log zoom, light or
dark theme. One small frozen View per page (in gr.State); the chart builders stay pure and take plain flags."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.figures import empty_figure, for_view
from ..common.i18n import tr
from . import charts


@dataclass(frozen=True)
class View:
    present: bool = False  # presenter view: big text, panels that change nothing folded into one note
    log: bool = False  # the stage chart's x axis on a log scale: the cut tail is visible
    dark: bool = False  # the page's dark theme


def stage_chart(record, view: View = View(), lang: str = "en"):
    fig = charts.stage_figure(record, lang=lang, fold=view.present, log=view.log)
    return for_view(fig, view.present, view.dark)


def draw_chart(record, view: View = View(), lang: str = "en"):
    return for_view(charts.draw_figure(record, lang=lang), view.present, view.dark)


def run_chart(records, selected: int | None = None, view: View = View(), lang: str = "en"):
    """The run chart; `selected` (an index into records) is marked: the step the page shows."""
    return for_view(charts.run_figure(records, selected=selected, lang=lang), view.present, view.dark)


def placeholders(view: View = View(), lang: str = "en") -> tuple:
    """The stage, draw and run charts before there is a run: what each will show, in `lang`."""
    return tuple(for_view(fig, view.present, view.dark) for fig in (
        empty_figure(tr(lang, "lab.stage_plot.empty")), empty_figure(tr(lang, "lab.draw_plot.empty"), height=120),
        empty_figure(tr(lang, "lab.run_plot.empty"), height=220)))
