"""The room bar: a host opens a room and shares its code or link; learners join and their pages follow the host's
tab, the lab's settings and step, and the host's finished run. They may break away and follow again.

How a follower hears of a change (docs/follow.md has the measurements): its page holds one streaming event
open (`follow`, an async generator: no worker thread is held while it waits); every FOLLOW_POLL_SECONDS it
compares the room's version with the one it shows (two integers) and yields only on a change. Gradio's own
stream carries the update, and Break away cancels the event. The host's page sends its state on a timer
(HOST_PUBLISH_SECONDS) that runs only while it hosts, so programmatic changes (a link, a finished run) are
published as well as typed ones. The state a follower applies is checked like a link (follow/state.py) and
every text the bar shows is escaped: it is host input shown to strangers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import gradio as gr

from model_service import limits, rooms

from ..common.errors import unchanged, user_error
from ..common.i18n import DEFAULT, T, tr
from ..common.text import escape_html
from ..lab.deep_link import CONTROLS
from ..lab.scrubber import scrub_index, scrub_update
from .state import page_state, parse_state
from .views import ViewCache, shared_run

REGISTRY = rooms.RoomRegistry()  # the server's rooms (one process serves the room)
VIEWS = ViewCache()


@dataclass
class Seat:
    """This page's place in a room: nobody's, the host's (with the token only the host's session holds), a
    follower's, a follower who broke away, or one whose room closed."""

    mode: str = "none"  # none | host | following | away | closed
    code: str = ""
    token: str = field(default="", repr=False)
    link: str = ""
    lang: str = DEFAULT
    problems: list = field(default_factory=list)
    followers: int = 0  # the host's count of following pages, as its bar shows it


def bar_text(seat: Seat, lang=DEFAULT) -> str:
    """The bar's line for the page's seat, in `lang`; the code, link and problems are escaped."""
    if seat.mode == "none":
        return ""
    values = {"code": escape_html(seat.code), "link": escape_html(seat.link), "followers": seat.followers}
    text = tr(lang, f"follow.status.{seat.mode}", **values)
    if seat.problems and seat.mode == "following":
        text += " " + tr(lang, "follow.status.problems", problems=escape_html("; ".join(seat.problems)))
    return text


def room_link(request: gr.Request | None, code: str) -> str:
    """An absolute link that follows `code`: the page's public address (behind a proxy, on a Space: links.py)."""
    from ..links import absolute
    from ..scene_bar import base_url

    return absolute(base_url(request), f"follow={code}")


def build_follow_bar() -> dict:
    """The room's components, in the current Blocks context."""
    seat = gr.State(Seat())
    with gr.Row(elem_id="follow-bar", visible=False) as bar:
        status = gr.Markdown("", elem_id="follow-status")
        break_btn = gr.Button(T("follow.break"), size="sm", scale=0, visible=False, elem_id="follow-break")
        again_btn = gr.Button(T("follow.again"), size="sm", scale=0, visible=False, elem_id="follow-again")
        close_btn = gr.Button(T("follow.close"), size="sm", scale=0, visible=False, elem_id="room-close")
    with gr.Accordion(T("follow.title"), open=False, elem_id="follow"):
        with gr.Row():
            code = gr.Textbox(show_label=False, placeholder=T("follow.code.placeholder"), max_length=16, scale=2,
                              elem_id="follow-code")
            join_btn = gr.Button(T("follow.join"), scale=1, elem_id="follow-join")
            open_btn = gr.Button(T("follow.open"), scale=1, elem_id="room-open")
        link = gr.Textbox(show_label=False, buttons=["copy"], visible=False, elem_id="room-link")
        gr.Markdown(T("follow.note"), elem_classes=["ntp-note"])
    tab = gr.Textbox("lab", visible="hidden", elem_id="follow-tab")  # the host's tab id, set in the browser
    timer = gr.Timer(limits.HOST_PUBLISH_SECONDS, active=False)
    return {"seat": seat, "bar": bar, "status": status, "break": break_btn, "again": again_btn, "close": close_btn,
            "code": code, "join": join_btn, "open": open_btn, "link": link, "tab": tab, "timer": timer}


def wire_follow(demo: gr.Blocks, parts: dict, lab: dict, tabs: gr.Tabs, tab_items: dict, language) -> None:
    """Inside the Blocks context. lab: build_lab's components; tab_items: tab id -> gr.Tab."""
    seat, status, bar, timer, link = parts["seat"], parts["status"], parts["bar"], parts["timer"], parts["link"]
    break_btn, again_btn, close_btn, join_btn = parts["break"], parts["again"], parts["close"], parts["join"]
    controls = [lab[name] for name in CONTROLS]
    views = [lab["chips"], lab["status"], lab["stage_plot"], lab["draw_plot"]]
    bar_outputs = [seat, status, bar, break_btn, again_btn, close_btn, join_btn, link, timer]

    def show(s: Seat, lang) -> dict:
        """The bar for a seat: its line and which buttons it offers."""
        # gr.update dicts, not component instances: a room's followers all get these at once, and building a
        # component per page per change costs more than the change
        return {seat: s, status: bar_text(s, lang), bar: gr.update(visible=s.mode != "none"),
                break_btn: gr.update(visible=s.mode == "following"), again_btn: gr.update(visible=s.mode == "away"),
                close_btn: gr.update(visible=s.mode == "host"), join_btn: gr.update(visible=s.mode != "host"),
                link: gr.update(value=s.link, visible=s.mode == "host"), timer: gr.update(active=s.mode == "host")}

    def hosted(values, tab_id, step, run) -> tuple[dict, object]:
        """(state, run) as the host's page shows them: a run is shared once it ended, then with its step."""
        run = run if run is not None and run.records else None
        if run is not None and not run.finished:
            return page_state(dict(zip(CONTROLS, values)), tab_id, None), ...  # streaming: the last run stays
        step = scrub_index(step, run.records) if run else None  # the scrubber counts from 1, a room from 0
        if run is not None and step is None:
            step = len(run.records) - 1
        return page_state(dict(zip(CONTROLS, values)), tab_id, step), (run.records if run else None)

    def open_room(s: Seat, prompt, chat, temperature, top_k, top_p, min_p, seed, max_new_tokens, stop, order, tab_id,
                  step, run, lang, request: gr.Request):
        # named, not *values: Gradio passes a gr.Request only to a parameter it can place (the link needs the host)
        values = [prompt, chat, temperature, top_k, top_p, min_p, seed, max_new_tokens, stop, order]
        assert len(values) == len(CONTROLS)
        state, records = hosted(values, tab_id, step, run)
        try:
            if s.mode == "host":  # already hosting: the same room
                REGISTRY.publish(s.code, s.token, state, records)
            else:
                code, token = REGISTRY.open(state)
                REGISTRY.publish(code, token, run=None if records is ... else records)
                s = Seat("host", code, token, room_link(request, code), lang)
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang) from None
        return show(s, lang)

    def host_tick(s: Seat, *values):
        """While hosting: send what the page shows; the room bumps its version only on a change."""
        *values, tab_id, step, run, lang = values
        if not isinstance(s, Seat) or s.mode != "host":
            return show(s if isinstance(s, Seat) else Seat(), lang)
        state, records = hosted(values, tab_id, step, run)
        try:
            REGISTRY.publish(s.code, s.token, state, records)
        except ValueError:  # the room expired (hours idle) or the server restarted
            return show(Seat("closed", s.code, lang=lang), lang)
        if REGISTRY.followers(s.code) != s.followers:
            s.followers = REGISTRY.followers(s.code)
            return {status: bar_text(s, lang)}
        return unchanged(status)

    def close_room(s: Seat, lang):
        if isinstance(s, Seat) and s.mode == "host":
            try:
                REGISTRY.close(s.code, s.token)
            except ValueError:
                pass  # expired already
        return show(Seat(), lang)

    stream = [seat, status, *controls, tabs, *views, lab["scrub"], lab["run_state"], lab["run_plot"]]

    def update(snap: rooms.Snapshot, shown: dict, s: Seat, lang) -> list:
        """Every output of a follower's stream for the room's snapshot, as plain values. Gradio rebuilds a component
        for each skipped or prop-updated output (1-8 ms each on this CPU, per follower, per change), while a plain
        value that did not change costs one comparison in Gradio's diff of a stream's outputs and sends nothing.
        `shown`: what this page shows (tab, run version, step, the Run object), updated here."""
        values, tab_id, step, problems = parse_state(snap.state, lang)
        s.problems = problems
        tab_out = gr.update(selected=tab_id) if tab_id != shown.get("tab") else gr.skip()
        shown["tab"] = tab_id
        new_run = shown.get("run_version") != snap.run_version or shown.get("lang") != lang
        if new_run:
            shown["run"] = shared_run(snap.run or (), lang)
        if snap.run:
            step = len(snap.run) - 1 if step is None else min(step, len(snap.run) - 1)
            got = VIEWS.step_views(snap.code, snap.run_version, snap.run, step, lang)
            run_plot = VIEWS.run_figure(snap.code, snap.run_version, snap.run, lang)
            scrub = step + 1 if not new_run else scrub_update(snap.run, step)
        else:  # the host has no finished run: the follower's lab shows none either
            got, run_plot = VIEWS.empty(lang), VIEWS.empty(lang)["run"]
            scrub = 1 if not new_run else gr.update(value=1, visible=False)
        shown.update(run_version=snap.run_version, lang=lang)
        return [s, bar_text(s, lang), *(values[name] for name in CONTROLS), tab_out, got["chips"], got["status"],
                got["stage"], got["draw"], scrub, shown["run"], run_plot]

    def enter(typed, s: Seat, lang, request: gr.Request = None):
        """Join the room typed, or the link's ?follow= (on load), or the one the page broke away from: the bar.
        The stream (follow) starts after it, if it found a room."""
        raw = typed if isinstance(typed, str) and typed.strip() else None
        if raw is None:
            raw = (dict(request.query_params).get("follow") if request else None) or (
                s.code if isinstance(s, Seat) and s.mode == "away" else None)
        if raw is None:  # a page load without ?follow=: stop here, silently (no stream; no toast)
            raise gr.Error("no room to follow", visible=False, print_exception=False)
        try:
            code = REGISTRY.snapshot(raw).code
        except ValueError as e:
            raise user_error(e, lang) from None
        return show(Seat("following", code, lang=lang), lang)

    async def follow(s: Seat):
        """Follow the seat's room until Break away (which cancels this event), a closed page, or the room's end."""
        if not isinstance(s, Seat) or s.mode != "following":  # an API caller that did not join first
            yield {seat: s if isinstance(s, Seat) else Seat()}  # (ending without a yield would blank every output)
            return
        code, seen, shown = s.code, None, {}
        REGISTRY.join(code)
        try:
            while True:
                version = REGISTRY.version(code)
                if version is None:  # closed by the host, or expired
                    s.mode = "closed"
                    yield {seat: s, status: bar_text(s, s.lang)}
                    return
                if version != seen:
                    snap = REGISTRY.snapshot(code)
                    # off the event loop: a new step's charts take a while to build, and the loop serves every page
                    yield await asyncio.to_thread(update, snap, shown, s, s.lang)
                    seen = snap.version
                await asyncio.sleep(limits.FOLLOW_POLL_SECONDS)
        except ValueError:  # closed between the look and the read
            s.mode = "closed"
            yield {seat: s, status: bar_text(s, s.lang)}
        finally:  # Break away, a closed page (Gradio cancels the event), or the room's end
            REGISTRY.leave(code)

    def break_away(s: Seat, lang):
        if isinstance(s, Seat) and s.mode == "following":
            s.mode = "away"
        return show(s if isinstance(s, Seat) else Seat(), lang)

    def relang(s: Seat, lang):
        if isinstance(s, Seat):
            s.lang = lang  # a follower's stream builds its next views in it
        return {status: bar_text(s, lang) if isinstance(s, Seat) else ""}

    host_inputs = [seat, *controls, parts["tab"], lab["scrub"], lab["run_state"], language]
    parts["open"].click(open_room, host_inputs, bar_outputs, api_name="open_room", show_progress="hidden")
    timer.tick(host_tick, host_inputs, bar_outputs, api_name="host_publish", show_progress="hidden", queue=False)
    close_btn.click(close_room, [seat, language], bar_outputs, api_name="close_room", show_progress="hidden")
    entered = gr.on([join_btn.click, again_btn.click, parts["code"].submit, demo.load], enter,
                    [parts["code"], seat, language], bar_outputs, api_name="join", show_progress="hidden")
    following = entered.success(follow, seat, stream, api_name="follow", show_progress="hidden")
    following.then(lambda s, lang: show(s, lang), [seat, language], bar_outputs, api_visibility="private",
                   show_progress="hidden")  # the room closed: the bar says so and offers Join again
    break_btn.click(break_away, [seat, language], bar_outputs, cancels=[following], api_name="break_away",
                    show_progress="hidden", queue=False)
    language.change(relang, [seat, language], status, api_visibility="private", show_progress="hidden")
    for tab_id, item in tab_items.items():  # the host's tab, kept in the browser (no server event)
        item.select(None, None, parts["tab"], js=f"() => {tab_id!r}")
