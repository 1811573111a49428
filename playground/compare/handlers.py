"""The Compare tab's handlers: Run (streamed), Stop, the scrubber, the page's language, and the page saying what
it has of a streaming comparison. Each takes the tab's components (CompareComponents) first, tab.py binds it,
and returns {component: value}; a component left out keeps what it shows.

Stop works as the lab's (playground/lab/handlers.py:stop_run): the page's js says how many steps it shows, the
streaming handler sends the frozen views as the last update of its own stream, and keeps at most PAGE_AHEAD updates
ahead of the page meanwhile (playground/lab/run.py:Pace), so that Stop has at most that short queue behind it (its js
hides the steps of those updates past the press).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import gradio as gr

from model_service.records import validation
from model_service.records.step import BatchStep

from ..common.errors import unchanged, user_error
from ..common.i18n import LESSON_PROMPTS, swapped_default, tr
from ..common.kept_batches import KeptBatches
from ..lab.request import field_labels
from ..lab.run import Pace, drawn_at_rest, new_tag, parse_seen, wait_until
from ..lab.scrubber import scrub_update
from . import views
from .columns import CompareRun, parse_comparison

CHART_INTERVAL = 0.5
TOP_N = 20


@dataclass(frozen=True)
class CompareComponents:
    """The tab's components, and the service they ask for tokens."""

    service: object
    prompt: gr.Textbox
    table: gr.Dataframe
    texts: gr.HTML
    status: gr.Markdown
    scrub: gr.Slider
    step_table: gr.HTML
    overlay: gr.Plot
    state: gr.State  # the CompareRun on screen
    kept: KeptBatches = field(default_factory=KeptBatches)  # the scenes' comparisons, run at start

    @property
    def outputs(self) -> list:
        """What Run and Stop set."""
        return [self.texts, self.status, self.scrub, self.step_table, self.overlay, self.state]


def _scrub(run: CompareRun, at: int | None = None):
    """The scrubber counts steps from 1, as the lab's does (playground/lab/scrubber.py); `at` is 0-based."""
    n = run.length
    index = at if at is not None else (run.divergence if run.divergence is not None else max(n - 1, 0))
    return scrub_update(range(n), index)


def run(c: CompareComponents, prompt_text, rows, seed_text, max_tokens, lang):
    try:
        comparison = parse_comparison(prompt_text, rows, seed_text, max_tokens, lang)
        kept = c.kept.get(c.service, comparison.requests, TOP_N)  # a scene's comparison, run at start
        steps = (k.step for k in kept) if kept is not None else c.service.generate_batch(comparison.requests,
                                                                                         top_n=TOP_N)
    except (ValueError, RuntimeError) as e:
        raise user_error(e, lang, field_labels(lang)) from None
    current = CompareRun(comparison, [[] for _ in comparison.requests], streaming=True, tag=new_tag(),
                         replayed=kept is not None)
    try:  # (every yield inside: a page closed at once still closes the batch)
        # the last comparison leaves the page at once: its scrubber, step table and overlay would read as this one's
        yield {c.scrub: gr.update(visible=False, value=1), c.step_table: "", c.overlay: views.overlay_figure(None, 0, lang),
               c.texts: views.columns_html(current, lang, tag=current.tag), c.status: tr(lang, "lab.status.starting"),
               c.state: current}
        yield from stream_columns(c, current, steps, lang)
    except BaseException:  # the page went away, or the service failed: nothing will freeze the views
        current.streaming = False
        raise
    finally:
        getattr(steps, "close", lambda: None)()
    try:
        if current.stop_presses:  # the one update after Stop, last in this stream: the steps the page showed
            current.freeze()
        current.done = True
        yield finish(c, current, lang)
    finally:
        current.streaming = False  # (after the update has gone out: Stop's handler waits for this)


def stream_columns(c: CompareComponents, current: CompareRun, steps, lang):
    """The comparison's updates until it ends or Stop is pressed (then not one more), at most PAGE_AHEAD ahead of
    the page; the status and the overlay describe the steps the page has, as the lab's charts do."""
    pace, last_chart = Pace(lambda: current.page_steps), 0.0
    for step in steps:
        if current.stop_presses:
            return
        if not isinstance(step, BatchStep):
            continue
        for column, record in zip(current.columns, step.rows):
            if record is not None:
                column.append(record)
        current.steps, current.batch_sizes = current.steps + 1, [*current.batch_sizes, len(step.active)]
        if pace.behind():  # the page has not got the last update yet: this step waits for the next one
            continue
        shown = current.upto(current.page_steps)
        out = {c.texts: views.columns_html(current, lang, tag=current.tag), c.state: current}
        now = time.monotonic()
        if shown.length:
            out[c.status] = views.status_markdown(shown, lang)
            if now - last_chart >= CHART_INTERVAL:
                last_chart = now
                out[c.overlay] = views.overlay_figure(shown, shown.length - 1, lang)
        if current.stop_presses:
            return
        pace.went(current.length)
        yield out
    pace.last(lambda: current.stop_presses)  # the last update waits for the page too: a Stop meanwhile still cuts


def finish(c: CompareComponents, current: CompareRun, lang) -> dict:
    """The ended comparison's views at the step where its columns part (the last step if they never do)."""
    i = current.shown = current.divergence if current.divergence is not None else current.length - 1
    # still tagged: a Stop pressed as this update left (the page showing fewer steps) still cuts it there (stop)
    return {c.texts: views.columns_html(current, lang, selected=i, tag=current.tag),
            c.status: views.status_markdown(current, lang), c.scrub: _scrub(current, i), c.step_table: views.step_table_html(current, i, lang),
            c.overlay: views.overlay_figure(current, i, lang), c.state: current}


def stop(c: CompareComponents, current: CompareRun, lang, on_page=None):
    """Stop: the comparison freezes on the steps the page showed (`on_page`, views.STOP_JS). A streaming Run sends
    the frozen views itself, last in its own stream: this waits for that. Nothing streaming, nothing changes, but
    for a Stop pressed as the comparison's last update left: the page counted fewer of its steps than that update
    had (it hides the rest, STOP_JS), and the comparison is cut there."""
    try:
        seen = parse_seen(on_page)
    except ValueError as e:
        raise user_error(e, lang) from None
    current.stop_seen, current.stop_presses = seen, current.stop_presses + 1
    if not current.streaming or wait_until(lambda: not current.streaming):
        late = current.done and not current.stopped and seen is not None and current.tag
        if not late or seen[0] != current.tag or seen[1] >= current.length:
            return unchanged(c.texts)
    current.freeze()  # a late Stop, or the stream did not answer in time (waiting for rows); Stop's cancel ends it
    return finish(c, current, lang)


def page_has(c: CompareComponents, current: CompareRun, on_page=None) -> None:
    """The page has a new value of the texts (their change; on_page: "tag:steps", views.COUNT_JS)."""
    try:
        seen = parse_seen(on_page)
    except ValueError as e:
        raise user_error(e) from None
    if seen is not None and current.streaming and seen[0] == current.tag:
        current.page_steps = seen[1]


def scrub_to(c: CompareComponents, index, current: CompareRun, lang):
    if current.comparison is None or current.length == 0:
        return unchanged(c.texts)
    try:
        i = validation.number("scrub step", index, integer=True, low=1, high=current.length) - 1
    except ValueError as e:
        raise user_error(e, lang, field_labels(lang)) from None
    current.shown = i
    return {c.texts: views.columns_html(current, lang, selected=i), c.step_table: views.step_table_html(current, i, lang),
            c.overlay: views.overlay_figure(current, i, lang)}


def rerender(c: CompareComponents, lang, current: CompareRun, rows, current_prompt):
    """The page's language changed: every view again from the comparison the page keeps, at the step it shows
    (CompareRun.shown); one still streaming keeps its tag on the texts, which Stop reads. This event may run late
    (a link's ?lang= queues it as the page loads): views drawn while the comparison moved on are drawn again, so
    an older picture never lands after the stream's last one."""
    out = {c.table: gr.Dataframe(label=tr(lang, "compare.table"))}
    swapped = swapped_default(current_prompt, lang, LESSON_PROMPTS)
    if swapped is not None:
        out[c.prompt] = swapped
    return out | drawn_at_rest(current.progress, lambda: views_of(c, current, lang))


def views_of(c: CompareComponents, current: CompareRun, lang: str) -> dict:
    """The tab's views of the comparison the page keeps, at the step it shows, in `lang`."""
    if current.streaming:
        return {c.texts: views.columns_html(current, lang, tag=current.tag),
                c.status: views.status_markdown(current.upto(current.page_steps), lang)}
    if current.comparison is None or (current.length == 0 and not current.stopped):
        return {c.texts: views.columns_html(None, lang), c.status: views.status_markdown(None, lang),
                c.overlay: views.overlay_figure(None, 0, lang)}
    i = current.shown if current.shown is not None and 0 <= current.shown < current.length else current.length - 1
    # still tagged: a Stop pressed as this update left (the page showing fewer steps) still cuts it there (stop)
    return {c.texts: views.columns_html(current, lang, selected=i, tag=current.tag), c.status: views.status_markdown(current, lang),
            c.step_table: views.step_table_html(current, i, lang), c.overlay: views.overlay_figure(current, i, lang)}
