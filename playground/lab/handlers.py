"""The lab's handlers: Generate (streamed), Step, Stop, the scrubber, the page's language, and a new model in
the room. Each takes the lab's components (LabComponents) first, tab.py binds it, and returns
{component: value}; a component left out keeps what it shows.

Text goes out with every update, each with the tokens that came since the last one: the page says what it
has (page_has), and a streaming handler keeps at most PAGE_AHEAD updates ahead of it (run.Pace), so that Stop
finds at most that short queue still to render (its chips past the press hidden by Stop's js). Charts go at most
every CHART_INTERVAL seconds (and always on the last step), because each Plotly update re-sends and re-draws the whole figure. A change of the page's language
redraws every view from the records the page keeps (a run still streaming switches language at its next step).
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, replace

import gradio as gr

from model_service.records import validation
from model_service.records.step import StepRecord
from playground import limits

from ..common.errors import unchanged, user_error
from ..common.handlers import bind
from ..common.i18n import LESSON_PROMPTS, swapped_default, tr
from ..common.text import escape_html
from .chips import chips_prefix, new_chips, token_chips_html
from .components import CONTROL_NAMES, LabComponents
from .in_place import stream_figures
from .request import RunRequest, continued, field_labels, parse_request
from .run import (
    Pace,
    Run,
    drawn_at_rest,
    new_tag,
    order_note_text,
    parse_seen,
    placeholder_figures,
    status_markdown,
    wait_until,
    waiting_markdown,
)
from .scrubber import scrub_update
from .view import View, draw_chart, run_chart, stage_chart

CHART_INTERVAL = 0.5  # seconds: a six-panel Plotly redraw costs the browser ~100+ ms; 2 a second stays live


def bad(error, lang):
    """The error as a toast in the page's language, naming the control as the learner reads it."""
    return user_error(error, lang, field_labels(lang))


@dataclass(frozen=True)
class RunValues:
    """The raw values of Generate's and Step's inputs [*LabComponents.controls, language, view], by name."""

    controls: tuple  # in parse_request's order
    lang: str
    view: View

    @classmethod
    def of(cls, values: tuple) -> RunValues:
        *controls, lang, view = values
        return cls(tuple(controls), lang, view)

    def value(self, name: str):
        """One control's raw value by its name (CONTROL_NAMES)."""
        return self.controls[CONTROL_NAMES.index(name)]

    def chain_unwritten(self) -> bool:
        """The custom order just chosen, its chain box still empty: a learner about to write one, not a mistake
        (Generate names it; a what-if waits for it)."""
        return self.value("order") == "custom" and validation.is_blank(self.value("chain"))

    def request(self) -> RunRequest:
        try:
            return parse_request(*self.controls)
        except ValueError as e:
            raise bad(e, self.lang) from None


_SESSION = re.compile(r"[A-Za-z0-9_-]{1,60}")  # the page's session hash (a script's gradio_client: a UUID)


def keep_key(request: gr.Request | None) -> str:
    """The page's name for the run whose logits the service keeps for its what-ifs: its session's (one run a page)."""
    session = getattr(request, "session_hash", None) if request is not None else None
    if not isinstance(session, str) or not _SESSION.fullmatch(session):
        return ""  # no session (a handler called directly): nothing kept, a what-if recomputes its step
    return f"lab:{session}"[: limits.MAX_KEEP_KEY_CHARS]


def open_stream(lab: LabComponents, request: RunRequest, lang: str, continue_from=(), keep: str = ""):
    try:
        return lab.service.generate(
            request.prompt, request.settings, max_new_tokens=request.max_new_tokens, stop=request.stop,
            chat=request.chat, continue_from=continue_from, report_waiting=True, keep=keep,
        )
    except (ValueError, RuntimeError) as e:  # bad input, or the model still loading
        raise bad(e, lang) from None


def model_name(lab: LabComponents, lang: str) -> str:
    try:
        return lab.service.info.name
    except RuntimeError as e:  # loading, or the host switching the model
        raise bad(e, lang) from None


DRAWN = itertools.count(1)  # step_views' figures, each marked as drawn anew


def step_views(lab: LabComponents, run: Run, index: int | None = None, shown: View = View()) -> dict:
    """The stage and draw figures of one step of a run, in the run's language, drawn for the page's view; each
    figure marked as drawn anew (`drawn`): a page draws a run's steps in place, so what is on screen may differ from
    the Plot's last value, and a value equal to that one would be skipped (in_place.py)."""
    r, drawn = run.records[-1 if index is None else index], next(DRAWN)
    return {lab.stage_plot: stage_chart(r, shown, run.lang).update_layout(meta={"drawn": drawn}),
            lab.draw_plot: draw_chart(r, shown, run.lang).update_layout(meta={"drawn": drawn})}


def cleared(lab: LabComponents, run: Run, lang: str, shown: View) -> dict:
    """A new run's first update: the run before it leaves the page at once (its charts and scrubber would
    read as this run's); the steps it continues after (Continue from here) stay."""
    kept = new_chips(run.records, 0, True, lang)[0] if run.records else ""
    stage, draw, run_empty = placeholder_figures(lang, shown)
    return {lab.scrub: gr.update(visible=False, value=1), lab.status: tr(lang, "lab.status.starting"),
            lab.what_if_row: gr.update(visible=False),
            lab.chips: chips_prefix(lang, run.tag) + kept, lab.run_state: run,
            # this run's, whatever the charts held last: a page drew the last run's steps in place (in_place.py)
            lab.stage_plot: stage.update_layout(meta={"run": run.tag}),
            lab.draw_plot: draw.update_layout(meta={"run": run.tag}), lab.run_plot: run_empty.update_layout(meta={"run": run.tag})}


def page_step_views(lab: LabComponents, run: Run, final: bool) -> dict:
    """A streaming run's status line and step charts. They describe the last step of the chips the page has
    said it has (the chips go out with every update, the charts at their pace after them), so that the
    update on its way when Stop is pressed never shows a step beyond the chips on the page; the last step
    when the run ends, or for a caller that does not count (an API caller)."""
    upto = len(run.records) if final or run.page_chips is None else min(run.page_chips, len(run.records))
    if not upto:
        return {}
    part = run if upto == len(run.records) else replace(run, records=run.records[:upto])
    views = step_views(lab, part, None, run.view)
    if run.page_chips is not None:  # a page: its charts redrawn in place, never re-created (in_place.py), the
        # last step's too (re-created, the two charts held the page's main thread ~0.2-0.6 s just as the run ended),
        # and the run chart when the run ends (re-created, ~100 ms of the end's longest task)
        over = run_chart(run.records, None, run.view, run.lang) if final else None
        views = {lab.stream_figures: stream_figures(run.tag, upto, views[lab.stage_plot], views[lab.draw_plot], over)}
    return {lab.status: status_markdown(part, rate=run.rate, lang=run.lang), **views}


def generate(lab: LabComponents, page: gr.Request, *values):  # Gradio gives the request to a parameter before *values
    given = RunValues.of(values)
    lang, request = given.lang, given.request()
    run = Run(request, lang=lang, model=model_name(lab, lang), view=given.view, streaming="run", tag=new_tag(),
              keep=keep_key(page))
    kept = lab.replays.get(lab.service, request)  # a scene's run, computed at start: shown at once
    run.replayed = kept is not None
    if run.replayed:  # its what-ifs read the logits the service kept when it ran it (replays.py)
        run.keep = lab.replays.kept_as(lab.service, request) or run.keep
    stream = iter(kept) if kept is not None else open_stream(lab, request, lang, keep=run.keep)
    yield from streamed(lab, run, stream, cleared(lab, run, lang, given.view))


def streamed(lab: LabComponents, run: Run, stream, first: dict):
    """A run streamed into the lab's views (Generate, Continue from here): `first`, then its updates until it ends
    or Stop is pressed; its row leaves the room's batch however the page goes away."""
    try:  # (a page closed at any yield must still close the stream: every yield is inside)
        yield first
        yield from stream_views(lab, run, stream)
    except BaseException:  # the page went away, or the service failed: nothing will freeze the views
        run.streaming = ""
        raise
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # frees this run's row in the model's batch at the next step boundary
    try:
        if run.stop_presses:  # the one update after Stop: the views frozen on the step the page showed, last in
            # this stream, so no update of it still on its way comes after (nor a draw of one: in_place.py)
            yield frozen(lab, run, run.view) | {lab.stream_figures: ""}
    finally:
        run.streaming = ""  # (after the update has gone out: Stop's handler waits for this)


def stream_views(lab: LabComponents, run: Run, stream):
    """The run's updates until it ends or Stop is pressed, each with the tokens that came since the last one
    (at most PAGE_AHEAD ahead of the page: run.Pace); after a press, not one more (what the stream still holds is
    dropped when it is closed)."""
    started = last_chart = time.monotonic()
    pace = Pace(lambda: run.page_chips)
    # chipped: chips built (a split character waits); the chips carry the run's tag until it ends
    chips, chips_lang, chipped, prefix = "", run.lang, 0, chips_prefix(run.lang, run.tag)
    for record in stream:
        if run.stop_presses:  # Stop was pressed: this record is never shown
            return
        if not isinstance(record, StepRecord):  # waiting for a row in the shared batch
            yield {lab.status: waiting_markdown(record, run.lang)}
            continue
        run.records.append(record)  # the State holds this same object: no copy per token
        if run.lang != chips_lang:  # the language changed mid-run: the chips' hover text follows
            chips_lang, prefix = run.lang, chips_prefix(run.lang, run.tag)
            chips = new_chips(run.records[:chipped], 0, True, run.lang)[0]
        # O(1) per token, same HTML as token_chips_html
        more, chipped = new_chips(run.records, chipped, final=record.stop_reason is not None, lang=run.lang)
        chips += more
        # the page has not got the last update yet (a kept run goes out whole, at its end)
        if record.stop_reason is None and (run.replayed or pace.behind()):
            continue
        if record.stop_reason is not None and pace.last(lambda: run.stop_presses):  # Stop, while the page caught up
            return
        # an ended run's chips: the last step's moved logits underline the earlier chips they hit; still tagged,
        # so a Stop pressed as this update left (the page showing fewer) still cuts the run there (stop_run)
        shown = token_chips_html(run.records, lang=run.lang, tag=run.tag) if record.stop_reason else prefix + chips
        out, now = {lab.chips: shown, lab.run_state: run}, time.monotonic()
        if record.stop_reason or now - last_chart >= CHART_INTERVAL:
            # the status line re-renders as Markdown in the browser: it keeps the charts' pace
            last_chart = now
            run.rate = len(run.records) / max(now - started, 1e-6)
            out |= page_step_views(lab, run, final=record.stop_reason is not None)
        if record.stop_reason:  # here, not in a follow-up event, so API callers can scrub too
            # (a page's run chart is drawn in place with the last step's charts: page_step_views)
            out |= finish(lab, run, run.view, chart=run.page_chips is None)
        if run.stop_presses:  # pressed while this update was being built
            return
        pace.went(chipped)
        yield out


def step(lab: LabComponents, page: gr.Request, state: Run, *values):
    given = RunValues.of(values)
    lang, shown, request = given.lang, given.view, given.request()
    model = model_name(lab, lang)
    same_run = state.request is not None and not state.finished and state.model == model and (
        (state.request.prompt, state.request.chat) == (request.prompt, request.chat)
    )
    taken = [r.token_id for r in state.records] if same_run else []
    if same_run and request.settings.seed is None:  # blank seed: keep following the run's own
        request = replace(request, settings=request.settings.with_seed(state.records[0].seed))
    if taken:
        request = replace(request, settings=continued(request.settings, state.records))
    keep = keep_key(page)
    stream = open_stream(lab, request, lang, continue_from=taken, keep=keep)
    try:
        record = next(r for r in stream if isinstance(r, StepRecord))  # past any Waiting
    finally:
        getattr(stream, "close", lambda: None)()
    run = Run(request, (state.records if same_run else []) + [record], lang=lang, model=model, view=shown, keep=keep)
    return {lab.what_if_row: gr.update(visible=False),
        lab.chips: token_chips_html(run.records, lang=lang), lab.status: status_markdown(run, lang=lang),
        **step_views(lab, run, None, shown), lab.run_state: run, lab.scrub: scrub_update(run.records),
        lab.run_plot: run_chart(run.records, None, shown, lang),
    }


def finish(lab: LabComponents, state: Run, shown: View = View(), chart: bool = True):
    """After a run: the scrub slider and (`chart`) the over-the-run chart, from the records."""
    if not state.records:
        return unchanged(lab.scrub, lab.run_plot)
    out = {lab.scrub: scrub_update(state.records)}
    if chart:
        out[lab.run_plot] = run_chart(state.records, None, shown, state.lang)
    return out


def stop_run(lab: LabComponents, state: Run, lang, shown: View = View(), on_page=None):
    """Stop: the page freezes on the step it showed when Stop was pressed (`on_page`: what its js counted,
    chips.STOP_JS; blank from an API caller: every record the server has).

    A handler streaming into the views (Generate, a branch) sees the press before its next update and sends
    the frozen views itself, as the last update of its own stream: the page renders a stream's updates in
    order, so none that was on its way can come after them. This waits for that (a step, STOP_WAIT_S at
    most), then has nothing left to send but to an API caller, or where the press landed as the handler ended,
    after its last look at the presses (then on as if nothing streamed, on the run a branch left on the page).
    With nothing streaming it freezes the views: on the chips the page showed, if it counted the chips of this
    run's last update but fewer than it sent (a Stop pressed as the page took in the update before, its run's
    last on its way: those chips stay hidden, STOP_JS), else on every record."""
    try:
        seen = parse_seen(on_page)
    except ValueError as e:
        raise bad(e, lang) from None
    state.lang, state.stop_seen, state.stop_presses = lang, seen, state.stop_presses + 1
    press, streaming = state.stop_presses, state.streaming
    if streaming and wait_until(lambda: not state.streaming):
        if state.stop_looked >= press if streaming == "branch" else seen is not None and state.stop_requested:
            return unchanged(lab.chips)  # it froze the views itself
        # an API caller's, or a press after the handler's last look (every chip sent, tagged; STOP_JS hid the rest)
        streaming = ""
    if streaming == "branch":  # the branch did not answer in time: its parent stays on the page
        return {lab.chips: token_chips_html(state.records, lang=lang), lab.status: status_markdown(state, lang=lang)}
    if not streaming:  # nothing streams (a run that ended, a Step)
        while state.successor is not None:  # a branch forced from this run ended as the press came: the run it left
            state = state.successor
        state.lang, state.stop_seen = lang, seen
        if state.request is None and not state.records:  # no run yet
            return unchanged(lab.chips)
        if not state.tag or seen is None or seen[0] != state.tag:  # the page counted none of its stream's chips
            state.stop_seen = None
    return frozen(lab, state, shown)


def page_has(lab: LabComponents, state: Run, on_page=None) -> None:
    """The page has a new value of the chips (their change; on_page: "tag:chips" from chips.COUNT_JS): a
    streaming handler's next update may go out (run.Pace). Nothing on the page changes."""
    try:
        seen = parse_seen(on_page)
    except ValueError as e:
        raise bad(e, state.lang) from None
    if seen is not None and state.streaming and seen[0] == state.tag:
        state.page_chips = seen[1]


def frozen(lab: LabComponents, run: Run, shown: View = View()) -> dict:
    """A stopped run's views: its records cut to what the page showed, the scrubber and run chart for them."""
    del run.records[run.shown_on_page(run.tag, len(run.records)):]
    run.stop_requested = True
    out = {lab.chips: token_chips_html(run.records, lang=run.lang), lab.status: status_markdown(run, lang=run.lang),
           lab.run_state: run}
    if not run.records:  # stopped before its first token: the new run's placeholders stay
        return out
    return out | step_views(lab, run, None, shown) | finish(lab, run, shown)


def scrub_to(lab: LabComponents, index, state: Run, lang, shown: View = View()):
    """The run's step `index` (1-based) in the views. Not while something streams into them (a branch forced from
    this run, a new run): a scrub's answer that comes late (queued behind another) would put this run's chips over
    the stream's, and a Stop pressed then would count the wrong chips (clean run 54)."""
    if not state.records or state.streaming:
        return unchanged(lab.chips)
    try:
        i = validation.number("scrub step", index, integer=True, low=1, high=len(state.records)) - 1
    except ValueError as e:
        raise bad(e, lang) from None
    state.lang, state.scrubbed = lang, i
    return {
        lab.chips: token_chips_html(state.records, selected=i, lang=lang),
        lab.status: status_markdown(state, index=i, lang=lang), **step_views(lab, state, i, shown),
        lab.run_plot: run_chart(state.records, i, shown, lang),
    }


def rerender(lab: LabComponents, lang, state: Run, order_key, current_prompt, shown: View = View(),
             request: gr.Request = None):
    """The page's language changed: every server-built view again, from the records the page keeps
    (no model work), at the step it shows (Run.scrubbed), and the lesson prompt in the new language unless the
    learner or a link set it.

    This event may run late (a link's ?lang= queues it as the page loads, and a busy server takes it after a run
    began): a Generate streaming its run redraws every view in `state.lang` from its next update, so this leaves
    them to it; and views drawn while the run moved on (a branch streaming, a scrub) are drawn again, so an
    older picture never lands after the newest one."""
    out = {lab.order_note: order_note_text(order_key, lang)}
    query = dict(request.query_params) if request else {}
    swapped = None if "prompt" in query else swapped_default(current_prompt, lang, LESSON_PROMPTS)
    if swapped is not None:
        out[lab.prompt] = swapped
    state.lang = lang  # a run still streaming uses it from its next step on
    if state.streaming == "run":  # (Generate and Step start a new Run: this one never starts streaming one)
        return out
    return out | drawn_at_rest(state.progress, lambda: run_views(lab, state, lang, shown))


def run_views(lab: LabComponents, state: Run, lang: str, shown: View) -> dict:
    """The lab's views of the run the page keeps, at the step it shows, in `lang`."""
    if not state.records:
        return dict(zip((lab.chips, lab.status, lab.stage_plot, lab.draw_plot, lab.run_plot),
                        (token_chips_html([], lang=lang, tag=state.tag if state.streaming else ""),
                         status_markdown(state, lang=lang), *placeholder_figures(lang, shown))))
    i = state.shown_step()
    # a branch still streaming keeps its tag on the chips: Stop reads whose chips the page counts (run.shown_on_page)
    tag = state.tag if state.streaming else ""
    return {
        lab.chips: token_chips_html(state.records, selected=i, lang=lang, tag=tag),
        lab.status: status_markdown(state, index=i, rate=state.rate if i is None else None, lang=lang),
        **step_views(lab, state, i, shown), lab.run_plot: run_chart(state.records, i, shown, lang),
    }


def new_model(lab: LabComponents, info, first: bool, lang="en") -> dict:
    """The host switched the room's model: the run on the page was drawn by the old one."""
    if first:
        return {}
    stage_empty, draw_empty, run_empty = placeholder_figures(lang)
    return {
        lab.run_state: Run(lang=lang), lab.chips: token_chips_html([], lang=lang),
        lab.scrub: gr.update(visible=False, value=1), lab.what_if_row: gr.update(visible=False),
        lab.status: tr(lang, "lab.status.new_model", model=escape_html(info.name)),
        lab.stage_plot: stage_empty, lab.draw_plot: draw_empty, lab.run_plot: run_empty,
    }


def watcher(lab: LabComponents) -> tuple:
    """The lab's watcher of the room's model, for the header (playground/header.py): its outputs, and new_model."""
    outputs = [lab.run_state, lab.chips, lab.scrub, lab.status, lab.stage_plot, lab.draw_plot, lab.run_plot,
               lab.what_if_row]
    return outputs, bind(new_model, lab)
