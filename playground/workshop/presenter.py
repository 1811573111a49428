"""The presenter view: the page as a projector at the front of a room shows it.

A toggle in the header (and `?present=1` in a link) collapses the lab's controls to its three buttons,
draws the charts with text of at least 14 px, folds the stage panels that change nothing into one note, and
makes the chips and status line large. A second toggle puts the stage chart's x axis on a log scale, so the
tail a filter cuts is visible. The page's dark theme (`?__theme=dark`, or the system's) darkens the charts.
Layout lives in assets/style.css (body.ntp-present); the charts read the page's View (playground/lab/view.py).
"""

from __future__ import annotations

import gradio as gr

from ..common.i18n import T
from ..lab.components import LabComponents
from ..lab.run import Run
from ..lab.view import View, draw_chart, placeholders, run_chart, stage_chart

# on load: the link's present flag and whether Gradio put the page in its dark theme
READ_PAGE_JS = """() => {
  const query = new URLSearchParams(window.location.search);
  const on = ['1', 'true', 'yes', 'on'].includes((query.get('present') || '').toLowerCase());
  const dark = document.body.classList.contains('dark') || query.get('__theme') === 'dark';
  return [on, dark];
}"""
CLASS_JS = "(on) => { document.body.classList.toggle('ntp-present', !!on); return on; }"


def build_toggles() -> dict:
    """The toggles, created where the caller's layout wants them (the header row)."""
    present = gr.Checkbox(False, label=T("presenter.toggle"), elem_id="present", scale=0, min_width=170)
    log = gr.Checkbox(False, label=T("presenter.log"), elem_id="log-zoom", scale=0, min_width=170)
    dark = gr.Checkbox(False, visible=False, elem_id="dark-charts")  # set by the page's theme, not by hand
    return {"present": present, "log": log, "dark": dark}


def redraw_views(present, log, dark, state: Run, index, lang) -> tuple:
    """(the View, stage, draw and run charts) for the run the page keeps, at the step the scrubber shows."""
    shown = View(bool(present), bool(log), bool(dark))
    if not state.records:
        return (shown, *placeholders(shown, lang))
    state.view = shown  # a run still streaming draws its next charts this way
    try:
        i = int(index) - 1 if state.finished and 1 <= int(index) < len(state.records) else None
    except (TypeError, ValueError):
        i = None
    record = state.records[-1 if i is None else i]
    return shown, stage_chart(record, shown, lang), draw_chart(record, shown, lang), run_chart(state.records, i, shown,
                                                                                               lang)


def wire(demo: gr.Blocks, toggles: dict, lab: LabComponents, language) -> None:
    """Read the link and the theme on load; on any toggle, the body's class and the lab's charts follow."""
    present, log, dark = toggles["present"], toggles["log"], toggles["dark"]
    demo.load(None, None, [present, dark], js=READ_PAGE_JS, api_visibility="private")
    present.change(None, present, None, js=CLASS_JS, api_visibility="private", show_progress="hidden")

    def redraw(present_on, log_on, dark_on, state, index, lang):
        out = redraw_views(present_on, log_on, dark_on, state, index, lang)
        return dict(zip((lab.view, lab.stage_plot, lab.draw_plot, lab.run_plot), out))

    gr.on([present.change, log.change, dark.change], redraw,
          [present, log, dark, lab.run_state, lab.scrub, language],
          [lab.view, lab.stage_plot, lab.draw_plot, lab.run_plot], api_visibility="private",
          show_progress="hidden", preprocess=False, trigger_mode="always_last")
