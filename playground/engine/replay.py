"""A run of the Engine tab as the tab keeps it (in gr.State), and its views in one language.

The streaming handler and a switch of the page's language draw through the same functions, so a
switch redraws the run in the other language from what it already has, without the model. Pure: no
torch, no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from model_service.records.settings import Request, SamplingSettings
from model_service.records.step import BatchStep, StepRecord, Waiting

from ..common.figures import empty_figure
from ..common.i18n import tr
from . import views


@dataclass(frozen=True)
class EngineRun:
    """The requests (by table row) and the latest of everything the views show."""

    numbers: tuple[int, ...]  # the table row of each request
    settings: tuple[SamplingSettings, ...]
    prompts: tuple[str, ...]
    latest: tuple[StepRecord | None, ...]  # each request's last record (kept once it has finished)
    step: BatchStep | None = None  # the latest step; None while waiting for a row in the shared batch
    sizes: tuple[int, ...] = ()  # batch size of every step so far
    tokens: int = 0
    seconds: float = 0.0
    waiting: Waiting | None = None
    replayed: bool = False  # a scene's batch kept at start (common/kept_batches.py), shown at once

    @classmethod
    def start(cls, numbers, requests: list[Request], replayed: bool = False) -> EngineRun:
        return cls(tuple(numbers), tuple(q.settings for q in requests), tuple(q.prompt for q in requests),
                   (None,) * len(requests), replayed=replayed)

    def waited(self, waiting: Waiting) -> EngineRun:
        return replace(self, waiting=waiting)

    def stepped(self, step: BatchStep, seconds: float) -> EngineRun:
        latest = tuple(new if new is not None else old for old, new in zip(self.latest, step.rows))
        return replace(self, latest=latest, step=step, sizes=(*self.sizes, len(step.active)),
                       tokens=self.tokens + len(step.active), seconds=seconds, waiting=None)

    @property
    def done(self) -> bool:
        return all(r is not None and r.stop_reason for r in self.latest)


def texts_html(run: EngineRun | None, lang="en") -> str:
    if run is None:
        return views.empty_rows_html(lang)
    labels = [views.settings_label(s, lang) for s in run.settings]
    return views.rows_html(run.numbers, labels, run.prompts, run.latest, running=not run.done, lang=lang)


def status_markdown(run: EngineRun | None, lang="en") -> str:
    if run is not None and run.step is None and run.waiting is not None:
        return views.waiting_markdown(run.waiting, lang)
    if run is None or run.step is None:
        return views.status_markdown(None, lang=lang)
    line = views.status_markdown(run.step, run.sizes, run.tokens, run.seconds, run.done, lang=lang)
    return line + "  \n" + tr(lang, "engine.status.replayed") if run.replayed else line


def heatmap(run: EngineRun | None, top: int, lang="en"):
    if run is None or run.step is None:
        return empty_figure(tr(lang, "engine.heatmap.empty"))
    labels = [f"{n} · {views.settings_label(s, lang)}" for n, s in zip(run.numbers, run.settings)]
    return views.batch_heatmap(run.step, labels, run.latest, top, lang=lang)


def params_html(run: EngineRun | None, lang="en") -> str:
    if run is None or run.step is None:
        return views.empty_params_html(lang)
    return views.params_html(run.step, run.numbers, lang=lang, settings=run.settings)
