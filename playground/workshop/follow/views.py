"""The host's run as a follower's lab shows it, built once per room change and shared by every follower.

A follower never runs the model: the room holds the host's finished run (StepRecords) and each follower's
lab shows it with the lab's own view builders. 100 followers of one room ask for the same views at the same
moment, so they are built once per (room, run, step, language) and kept in a small cache, the charts already
serialised as gr.Plot sends them (Plotly's to_json of a stage chart costs more than building it; done once, not
once per follower). What is left per follower is Gradio's message to its page (BENCHMARKS.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from gradio.components.plot import PlotData

from ...lab import charts
from ...lab.chips import token_chips_html
from ...lab.run import Run, placeholder_figures, status_markdown

CACHE_SIZE = 64  # (room, run, step, language) entries; a room's host moves one step at a time


def shared_run(records, lang: str = "en") -> Run:
    """A follower's own copy of the host's run (the records are frozen and shared): the lab can scrub it, and
    re-render it on a change of language, as if it had run it. A run is shared only once it ended."""
    records = list(records)
    return Run(records=records, lang=lang, stop_requested=bool(records) and records[-1].stop_reason is None)


def plot_data(figure) -> PlotData:
    """A Plotly figure as gr.Plot sends it (its postprocess passes PlotData through as it is)."""
    return PlotData(type="plotly", plot=figure.to_json())


class ViewCache:
    """Views of a room's run at one step, built once under a lock (the first follower builds, the rest reuse)."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size, self._views, self._lock = size, OrderedDict(), threading.Lock()
        self.built = 0  # how many were built (tests and the benchmark read it)

    def step_views(self, code: str, run_version: int, records, step: int, lang: str) -> dict:
        """{"chips", "status", "stage", "draw"} of the host's run at `step` (clamped into the run)."""
        step = min(max(int(step), 0), len(records) - 1)
        return self._get((code, run_version, step, lang), lambda: self._build_step(records, step, lang))

    def run_figure(self, code: str, run_version: int, records, lang: str):
        return self._get((code, run_version, "run", lang), lambda: plot_data(charts.run_figure(list(records), lang=lang)))

    def empty(self, lang: str) -> dict:
        """The lab's views before any run ("chips", "status", "stage", "draw", "run"), serialised once."""
        def build():
            stage, draw, run = (plot_data(f) for f in placeholder_figures(lang))
            return {"chips": token_chips_html([], lang=lang), "status": status_markdown(Run(), lang=lang),
                    "stage": stage, "draw": draw, "run": run}
        return self._get(("", 0, "empty", lang), build)

    def _get(self, key, build):
        with self._lock:
            if key in self._views:
                self._views.move_to_end(key)
                return self._views[key]
            value = build()
            self.built += 1
            self._views[key] = value
            while len(self._views) > self.size:
                self._views.popitem(last=False)
            return value

    @staticmethod
    def _build_step(records, step: int, lang: str) -> dict:
        run, record = shared_run(records, lang), records[step]
        last = step == len(records) - 1
        return {"chips": token_chips_html(run.records, selected=None if last else step, lang=lang),
                "status": status_markdown(run, index=None if last else step, lang=lang),
                "stage": plot_data(charts.stage_figure(record, lang=lang)),
                "draw": plot_data(charts.draw_figure(record, lang=lang))}
