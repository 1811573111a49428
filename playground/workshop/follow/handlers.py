"""The room bar's handlers: a host opens, publishes (on the bar's timer), resumes and closes its room; a follower
joins, follows (one streaming event: bar.py's docstring tells how) and breaks away. Each takes the room's parts
(Room) first, bar.py binds it, and returns {component: value}. The server's rooms (REGISTRY) and the views of
their runs (VIEWS) live here.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import gradio as gr

from playground import limits

from ...common.errors import in_language, unchanged, user_error
from ...common.i18n import language
from ...lab.components import LabComponents
from ...lab.run import Run
from ...lab.scrubber import scrub_index, scrub_update
from .. import follow_rooms
from ..page_state import PageState
from ..scene_bar import SceneBar, caption_markdown
from .components import FollowBar
from .seat import Seat, bar_text, host_key, room_link
from .state import follower_values, host_fields, page_state, parse_state
from .views import ViewCache, shared_run

REGISTRY = follow_rooms.FollowRooms()  # the server's rooms (one process serves the room)
VIEWS = ViewCache()


@dataclass(frozen=True)
class Room:
    """What the room's handlers read and set: the bar, the lab (a host's run, shown to its followers), the
    page's PageState (its link fields, the tabs and their items) and the page's language."""

    bar: FollowBar
    lab: LabComponents
    page: PageState
    language: gr.Radio
    scenes: SceneBar  # the header's scene controls: the host's open scene is the room's

    @property
    def stream(self) -> list:
        """What a follower's stream sets: the bar's seat and line, the whole page, the lab's run and views."""
        bar, lab, page = self.bar, self.lab, self.page
        return [bar.seat, bar.status, *page.fields.values(), page.tabs, page.tab, bar.tab, lab.chips, lab.status,
                lab.stage_plot, lab.draw_plot, lab.scrub, lab.run_state, lab.run_plot, self.scenes.picker,
                self.scenes.caption, bar.cue]

    @property
    def host_inputs(self) -> list:
        """What a host's page sends (HostValues): raw values, as a link of the page reads them."""
        return [self.bar.seat, self.bar.key, self.bar.tab, *self.page.fields.values(), self.scenes.picker,
                self.lab.scrub, self.lab.run_state, self.language]


@dataclass(frozen=True)
class HostValues:
    """The raw values of Room.host_inputs (preprocess=False), by name."""

    seat: object  # the page's Seat (an API caller may send anything)
    kept: object  # the CODE:TOKEN the host's tab keeps (FollowBar.key)
    page: list  # the page's raw `PageState.inputs` values: the host's tab, then every link field
    scene: object  # the scene picker's id (None: no scene open)
    step: object  # the lab's scrubber
    run: object  # the lab's Run
    lang: str

    @classmethod
    def of(cls, values: tuple) -> HostValues:
        seat, kept, *page, scene, step, run, lang = values
        return cls(seat, kept, page, scene, step, run, lang)


def show(room: Room, s: Seat, lang) -> dict:
    """The bar for a seat: its line and which buttons it offers."""
    # gr.update dicts, not component instances: a room's followers all get these at once, and building a
    # component per page per change costs more than the change
    bar = room.bar
    return {bar.seat: s, bar.status: bar_text(s, lang), bar.bar: gr.update(visible=s.mode != "none"),
            bar.break_button: gr.update(visible=s.mode == "following"),
            bar.again_button: gr.update(visible=s.mode == "away"),
            bar.close_button: gr.update(visible=s.mode == "host"), bar.join_button: gr.update(visible=s.mode != "host"),
            bar.link: gr.update(value=s.link, visible=s.mode == "host"), bar.key: host_key(s),
            bar.timer: gr.update(active=s.mode == "host"), bar.mode: s.mode}


def hosted(room: Room, given: HostValues) -> tuple[dict, object]:
    """(state, run) as the host's page shows them: a run is shared once it ended, then with its step."""
    fields = host_fields(room.page, given.page)
    scene = given.scene if room.scenes.scenes.get(given.scene) is not None else None
    run = given.run if isinstance(given.run, Run) and given.run.records else None
    if run is not None and not run.finished:
        return page_state(fields, None, scene), ...  # streaming: the last run stays
    step = scrub_index(given.step, run.records) if run else None  # the scrubber counts from 1, a room from 0
    if run is not None and step is None:
        step = len(run.records) - 1
    return page_state(fields, step, scene), (run.records if run else None)


def open_room(room: Room, request: gr.Request, *values):  # the request before *values: Gradio places it only there
    given = HostValues.of(values)
    s, lang = given.seat, given.lang
    state, records = hosted(room, given)
    try:
        if isinstance(s, Seat) and s.mode == "host":  # already hosting: the same room
            REGISTRY.publish(s.code, s.token, state, records)
        else:
            code, token = REGISTRY.open(state)
            REGISTRY.publish(code, token, run=None if records is ... else records)
            s = Seat("host", code, token, room_link(request, code), lang)
    except (ValueError, RuntimeError) as e:
        raise user_error(e, lang) from None
    return show(room, s, lang)


def resumed(kept, lang, request) -> tuple[Seat, follow_rooms.Snapshot | None]:
    """The seat a kept CODE:TOKEN gives back: the host's, with the room's snapshot, or a lost one saying why."""
    code, _, token = str(kept).strip().partition(":")
    try:
        snap = REGISTRY.resume(code, token)
    except ValueError as e:  # closed, expired, a server restart, or not this room's token
        return Seat("lost", code[:limits.FOLLOW_CODE_LENGTH + 4], lang=lang, problems=[in_language(e, lang)]), None
    return Seat("host", snap.code, token, room_link(request, snap.code), lang), snap


def host_tick(room: Room, request: gr.Request, *values):
    """While hosting: send what the page shows; the room bumps its version only on a change."""
    given = HostValues.of(values)
    s, kept, lang = given.seat, given.kept, given.lang
    if not isinstance(s, Seat) or s.mode != "host":
        # a kept key with no host's seat: the server forgot this page's session (hours asleep), unless this page has
        # just closed that room (a tick sent before the page heard of it still carries its key: close_room)
        if isinstance(kept, str) and kept.strip() and not (isinstance(s, Seat) and s.closed == kept.strip()):
            return show(room, resumed(kept, lang, request)[0], lang)
        return show(room, s if isinstance(s, Seat) else Seat(), lang)
    state, records = hosted(room, given)
    problems = []
    try:
        REGISTRY.publish(s.code, s.token, state, records)
    except ValueError as e:
        if getattr(e, "key", "").startswith("room_state"):  # too long: the room keeps the last state it took
            problems = [in_language(e, lang)]
        elif s.mode != "host":  # this page closed its room while this tick was on its way
            return show(room, s, lang)
        else:  # the room expired (hours idle) or the server restarted
            return show(room, Seat("closed", s.code, lang=lang), lang)
    if REGISTRY.followers(s.code) != s.followers or problems != s.problems:
        s.followers, s.problems = REGISTRY.followers(s.code), problems
        return {room.bar.status: bar_text(s, lang)}
    return unchanged(room.bar.status)


def close_room(room: Room, s: Seat, lang):
    if not (isinstance(s, Seat) and s.mode == "host"):
        return show(room, Seat(), lang)
    code, token, key = s.code, s.token, host_key(s)
    # the page's seat first, in place: a publish tick the page sent before it hears of the close reads this seat with
    # the old key, and must see a room this page closed, not a forgotten session to host again (host_tick)
    s.mode, s.code, s.token, s.link, s.problems, s.followers, s.closed = "none", "", "", "", [], 0, key
    try:
        REGISTRY.close(code, token)
    except ValueError:
        pass  # expired already
    return show(room, s, lang)


def update(room: Room, snap: follow_rooms.Snapshot, shown: dict, s: Seat, lang) -> dict:
    """Every output of a follower's stream (Room.stream) for the room's snapshot, as plain values. Gradio rebuilds
    a component for each skipped or prop-updated output (1-8 ms each on this CPU, per follower, per change), while a
    plain value that did not change costs one comparison in Gradio's diff of a stream's outputs and sends nothing.
    `shown`: what this page shows (tab, run version, step, the Run object), updated here."""
    bar, lab, page = room.bar, room.lab, room.page
    values, tab_id, step, problems = parse_state(snap.state, lang)
    scene_out = scene_views(room, snap.state.get("scene"), shown, lang)
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
        shown["run"].scrubbed = step  # what a change of this page's language redraws (lab.handlers.rerender)
    else:  # the host has no finished run: the follower's lab shows none either
        got, run_plot = VIEWS.empty(lang), VIEWS.empty(lang)["run"]
        scrub = 1 if not new_run else gr.update(value=1, visible=False)
    shown.update(run_version=snap.run_version, lang=lang)
    return {bar.seat: s, bar.status: bar_text(s, lang),
            **dict(zip(page.fields.values(), follower_values(page, values, lang))),
            page.tabs: tab_out, page.tab: tab_id, bar.tab: tab_id, lab.chips: got["chips"], lab.status: got["status"],
            lab.stage_plot: got["stage"], lab.draw_plot: got["draw"], lab.scrub: scrub, lab.run_state: shown["run"],
            lab.run_plot: run_plot, **scene_out}


def scene_views(room: Room, scene_id, shown: dict, lang) -> dict:
    """The host's open scene on a follower's page: the picker, the caption in the follower's language, and the cue
    (its focus) when the scene changed. An id that is none of this page's scenes opens nothing."""
    scenes = room.scenes
    scene = scenes.scenes.get(scene_id) if isinstance(scene_id, str) else None
    # a caption's facts, from the scene's run the host's opening kept (never a run on a follower's tick)
    records = scenes.records_of(scene, language(lang), False) if scene is not None and scene.facts else None
    key = (scene.id if scene else None, language(lang), records is not None)
    if shown.get("scene") == key:
        return {scenes.picker: gr.skip(), scenes.caption: gr.skip(), room.bar.cue: gr.skip()}
    cue = gr.skip() if shown.get("scene", (None,))[:2] == key[:2] else json.dumps(
        {"focus": scene.focus if scene else "", "scene": key[0] or ""})
    shown["scene"] = key
    return {scenes.picker: key[0], scenes.caption: caption_markdown(scene, scenes.scenes, lang, records),
            room.bar.cue: cue}


def resume_room(room: Room, s: Seat, kept, lang, request: gr.Request):
    """The page's load with the key its tab kept (READ_KEY_JS): host the room again, showing what it shows
    (the page reloaded with its defaults; publishing them would reset every follower)."""
    if not isinstance(kept, str) or not kept.strip():  # an ordinary page load: nothing to resume
        return unchanged(room.bar.seat)
    if isinstance(s, Seat) and s.mode == "host" and kept == host_key(s):
        return show(room, s, lang)
    s, snap = resumed(kept, lang, request)
    if snap is None:
        return show(room, s, lang)  # says why, and forgets the key
    return update(room, snap, {}, s, lang) | show(room, s, lang)


def enter(room: Room, typed, s: Seat, lang, request: gr.Request = None):
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
    return show(room, Seat("following", code, lang=lang), lang)


async def follow(room: Room, s: Seat):
    """Follow the seat's room until Break away (which cancels this event), a closed page, or the room's end."""
    seat, status = room.bar.seat, room.bar.status
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
                yield await asyncio.to_thread(update, room, snap, shown, s, s.lang)
                seen = snap.version
            await asyncio.sleep(limits.FOLLOW_POLL_SECONDS)
    except ValueError:  # closed between the look and the read
        s.mode = "closed"
        yield {seat: s, status: bar_text(s, s.lang)}
    finally:  # Break away, a closed page (Gradio cancels the event), or the room's end
        REGISTRY.leave(code)


def break_away(room: Room, s: Seat, lang):
    if isinstance(s, Seat) and s.mode == "following":
        s.mode = "away"
    return show(room, s if isinstance(s, Seat) else Seat(), lang)


def relang(room: Room, s: Seat, lang):
    if isinstance(s, Seat):
        s.lang = lang  # a follower's stream builds its next views in it
    return {room.bar.status: bar_text(s, lang) if isinstance(s, Seat) else ""}
