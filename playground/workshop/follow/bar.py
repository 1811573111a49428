"""The room bar: a host opens a room and shares its code or link; learners join and their pages follow the host's
whole page (the tab and every tab's inputs, as a link of the page carries them, the lab's step) and the host's
finished run. They may break away (their own inputs stay theirs) and follow again.

How a follower hears of a change (docs/follow.md has the measurements): its page holds one streaming event
open (`follow`, an async generator: no worker thread is held while it waits); every FOLLOW_POLL_SECONDS it
compares the room's version with the one it shows (two integers) and yields only on a change. Gradio's own
stream carries the update, and Break away cancels the event. The host's page sends its state on a timer
(HOST_PUBLISH_SECONDS) that runs only while it hosts, so programmatic changes (a link, a finished run) are
published as well as typed ones. The state a follower applies is checked like a link (follow/state.py) and
every text the bar shows is escaped: it is host input shown to strangers.

A reloaded host page keeps its room: opening one puts "CODE:TOKEN" in a hidden box that the browser copies to the
tab's sessionStorage (never a URL: links are shared with the room); the page's load reads it back and `resume_room`
checks it against the registry, shows the room's state again, then hosts on. A refused key says why on the bar.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import gradio as gr

from model_service import limits

from ...common.errors import in_language, unchanged, user_error
from ...common.i18n import DEFAULT, T, tr
from ...common.text import escape_html
from ...lab.scrubber import scrub_index, scrub_update
from ...lab.tab import Run
from .. import rooms
from .state import follower_values, host_fields, page_state, parse_state
from .views import ViewCache, shared_run

REGISTRY = rooms.RoomRegistry()  # the server's rooms (one process serves the room)
VIEWS = ViewCache()
STORAGE_KEY = "ntp-room-host"  # the host tab's sessionStorage: per tab (a second tab does not host too), kept on reload
SAVE_KEY_JS = f"""(key) => {{
  try {{ if (key) sessionStorage.setItem("{STORAGE_KEY}", key); else sessionStorage.removeItem("{STORAGE_KEY}"); }}
  catch (e) {{}}
}}"""
READ_KEY_JS = f"""() => {{ try {{ return sessionStorage.getItem("{STORAGE_KEY}") || ""; }} catch (e) {{ return ""; }} }}"""


@dataclass
class Seat:
    """This page's place in a room: nobody's, the host's (with the token only the host's session holds), a
    follower's, a follower who broke away, one whose room closed, or a host's page that could not resume."""

    mode: str = "none"  # none | host | following | away | closed | lost
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
    problems = escape_html("; ".join(seat.problems))
    values = {"code": escape_html(seat.code), "link": escape_html(seat.link), "followers": seat.followers}
    if seat.mode == "lost":
        return tr(lang, "follow.status.lost", problem=problems, **values)
    text = tr(lang, f"follow.status.{seat.mode}", **values)
    if seat.problems and seat.mode == "following":
        text += " " + tr(lang, "follow.status.problems", problems=problems)
    elif seat.problems and seat.mode == "host":
        text += " " + tr(lang, "follow.status.unshared", problem=problems)
    return text


def host_key(seat: Seat) -> str:
    """What the host's tab keeps to resume hosting after a reload ("" for every other seat)."""
    return f"{seat.code}:{seat.token}" if seat.mode == "host" else ""


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
    key = gr.Textbox("", visible="hidden", elem_id="room-key")  # the host's CODE:TOKEN, mirrored in sessionStorage
    timer = gr.Timer(limits.HOST_PUBLISH_SECONDS, active=False)
    return {"seat": seat, "bar": bar, "status": status, "break": break_btn, "again": again_btn, "close": close_btn,
            "code": code, "join": join_btn, "open": open_btn, "link": link, "tab": tab, "key": key, "timer": timer}


def wire_follow(demo: gr.Blocks, parts: dict, lab: dict, page, language):
    """Inside the Blocks context. lab: build_lab's components; page: the page's PageState (its link fields, the
    tabs and their items). Returns resume_after(event), which wires the host's resume after `event` (the page's
    own link applied first, so the room's state, newer, wins)."""
    seat, status, bar, timer, link, key = (parts[k] for k in ("seat", "status", "bar", "timer", "link", "key"))
    break_btn, again_btn, close_btn, join_btn = parts["break"], parts["again"], parts["close"], parts["join"]
    tabs, fields = page.tabs, list(page.fields.values())
    views = [lab["chips"], lab["status"], lab["stage_plot"], lab["draw_plot"]]
    bar_outputs = [seat, status, bar, break_btn, again_btn, close_btn, join_btn, link, key, timer]

    def show(s: Seat, lang) -> dict:
        """The bar for a seat: its line and which buttons it offers."""
        # gr.update dicts, not component instances: a room's followers all get these at once, and building a
        # component per page per change costs more than the change
        return {seat: s, status: bar_text(s, lang), bar: gr.update(visible=s.mode != "none"),
                break_btn: gr.update(visible=s.mode == "following"), again_btn: gr.update(visible=s.mode == "away"),
                close_btn: gr.update(visible=s.mode == "host"), join_btn: gr.update(visible=s.mode != "host"),
                link: gr.update(value=s.link, visible=s.mode == "host"), key: host_key(s),
                timer: gr.update(active=s.mode == "host")}

    def hosted(raw, step, run) -> tuple[dict, object]:
        """(state, run) as the host's page shows them: a run is shared once it ended, then with its step.
        raw: the page's raw `page.inputs` values (the tab first)."""
        fields = host_fields(page, raw)
        run = run if isinstance(run, Run) and run.records else None
        if run is not None and not run.finished:
            return page_state(fields, None), ...  # streaming: the last run stays
        step = scrub_index(step, run.records) if run else None  # the scrubber counts from 1, a room from 0
        if run is not None and step is None:
            step = len(run.records) - 1
        return page_state(fields, step), (run.records if run else None)

    def open_room(request: gr.Request, *values):  # the request before *values: Gradio places it only there
        s, _key, *raw, step, run, lang = values
        state, records = hosted(raw, step, run)
        try:
            if isinstance(s, Seat) and s.mode == "host":  # already hosting: the same room
                REGISTRY.publish(s.code, s.token, state, records)
            else:
                code, token = REGISTRY.open(state)
                REGISTRY.publish(code, token, run=None if records is ... else records)
                s = Seat("host", code, token, room_link(request, code), lang)
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang) from None
        return show(s, lang)

    def resumed(kept, lang, request) -> tuple[Seat, rooms.Snapshot | None]:
        """The seat a kept CODE:TOKEN gives back: the host's, with the room's snapshot, or a lost one saying why."""
        code, _, token = str(kept).strip().partition(":")
        try:
            snap = REGISTRY.resume(code, token)
        except ValueError as e:  # closed, expired, a server restart, or not this room's token
            return Seat("lost", code[:limits.ROOM_CODE_LENGTH + 4], lang=lang, problems=[in_language(e, lang)]), None
        return Seat("host", snap.code, token, room_link(request, snap.code), lang), snap

    def host_tick(request: gr.Request, *values):
        """While hosting: send what the page shows; the room bumps its version only on a change."""
        s, kept, *raw, step, run, lang = values
        if not isinstance(s, Seat) or s.mode != "host":
            if isinstance(kept, str) and kept.strip():  # the server forgot this page's session (hours asleep)
                return show(resumed(kept, lang, request)[0], lang)
            return show(s if isinstance(s, Seat) else Seat(), lang)
        state, records = hosted(raw, step, run)
        problems = []
        try:
            REGISTRY.publish(s.code, s.token, state, records)
        except ValueError as e:
            if getattr(e, "key", "").startswith("room_state"):  # too long: the room keeps the last state it took
                problems = [in_language(e, lang)]
            else:  # the room expired (hours idle) or the server restarted
                return show(Seat("closed", s.code, lang=lang), lang)
        if REGISTRY.followers(s.code) != s.followers or problems != s.problems:
            s.followers, s.problems = REGISTRY.followers(s.code), problems
            return {status: bar_text(s, lang)}
        return unchanged(status)

    def close_room(s: Seat, lang):
        if isinstance(s, Seat) and s.mode == "host":
            try:
                REGISTRY.close(s.code, s.token)
            except ValueError:
                pass  # expired already
        return show(Seat(), lang)

    stream = [seat, status, *fields, tabs, page.tab, parts["tab"], *views, lab["scrub"], lab["run_state"],
              lab["run_plot"]]

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
        return [s, bar_text(s, lang), *follower_values(page, values, lang), tab_out, tab_id, tab_id, got["chips"],
                got["status"], got["stage"], got["draw"], scrub, shown["run"], run_plot]

    def resume_room(s: Seat, kept, lang, request: gr.Request):
        """The page's load with the key its tab kept (READ_KEY_JS): host the room again, showing what it shows
        (the page reloaded with its defaults; publishing them would reset every follower)."""
        if not isinstance(kept, str) or not kept.strip():  # an ordinary page load: nothing to resume
            return unchanged(seat)
        if isinstance(s, Seat) and s.mode == "host" and kept == host_key(s):
            return show(s, lang)
        s, snap = resumed(kept, lang, request)
        if snap is None:
            return show(s, lang)  # says why, and forgets the key
        return dict(zip(stream, update(snap, {}, s, lang))) | show(s, lang)

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

    # raw values (preprocess=False), as a link of the page reads them (PageState.current_state)
    host_inputs = [seat, key, parts["tab"], *fields, lab["scrub"], lab["run_state"], language]
    parts["open"].click(open_room, host_inputs, bar_outputs, api_name="open_room", show_progress="hidden",
                        preprocess=False)
    timer.tick(host_tick, host_inputs, bar_outputs, api_name="host_publish", show_progress="hidden", queue=False,
               preprocess=False)
    close_btn.click(close_room, [seat, language], bar_outputs, api_name="close_room", show_progress="hidden")
    key.change(None, key, None, js=SAVE_KEY_JS, api_visibility="private")
    entered = gr.on([join_btn.click, again_btn.click, parts["code"].submit, demo.load], enter,
                    [parts["code"], seat, language], bar_outputs, api_name="join", show_progress="hidden")
    following = entered.success(follow, seat, stream, api_name="follow", show_progress="hidden")
    following.then(lambda s, lang: show(s, lang), [seat, language], bar_outputs, api_visibility="private",
                   show_progress="hidden")  # the room closed: the bar says so and offers Join again
    break_btn.click(break_away, [seat, language], bar_outputs, cancels=[following], api_name="break_away",
                    show_progress="hidden", queue=False)
    language.change(relang, [seat, language], status, api_visibility="private", show_progress="hidden")
    for tab_id, item in page.tab_items.items():  # the host's tab, kept in the browser (no server event)
        item.select(None, None, parts["tab"], js=f"() => {tab_id!r}")
    resume_outputs = [*bar_outputs, *(o for o in stream if all(o is not b for b in bar_outputs))]

    def resume_after(event) -> None:
        read = event.then(None, None, key, js=READ_KEY_JS, api_visibility="private")
        read.then(resume_room, [seat, key, language], resume_outputs, api_name="resume_room", show_progress="hidden")

    return resume_after
