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

Here the bar's layout and events; its components by name in components.py (FollowBar), the handlers in
handlers.py, the seat and its line in seat.py.
"""

from __future__ import annotations

from functools import partial

import gradio as gr

from playground import limits

from ...common.handlers import bind
from ...common.i18n import T
from ...lab.components import LabComponents
from ...menus import panel
from ..page_state import PageState
from ..scene_bar import SceneBar
from .components import FollowBar
from .handlers import Room, break_away, close_room, enter, follow, host_tick, open_room, relang, resume_room, show
from .seat import Seat

STORAGE_KEY = "ntp-room-host"  # the host tab's sessionStorage: per tab (a second tab does not host too), kept on reload
SAVE_KEY_JS = f"""(key) => {{
  try {{ if (key) sessionStorage.setItem("{STORAGE_KEY}", key); else sessionStorage.removeItem("{STORAGE_KEY}"); }}
  catch (e) {{}}
}}"""
READ_KEY_JS = f"""() => {{ try {{ return sessionStorage.getItem("{STORAGE_KEY}") || ""; }} catch (e) {{ return ""; }} }}"""
# while following, the page is a follower's (assets/room.css: the host's controls hidden, what the host shows first)
MODE_JS = "(mode) => { document.body.classList.toggle('ntp-follower', mode === 'following'); }"
# the host opened a scene: on a follower's lab its focus comes right after the chips (room.css reads data-ntp-focus)
# and the page goes back to the top, where the caption is; on another tab the focus scrolls into view under the
# room's line. The host's own page has pressed the scene's button: the follower shows the result
CUE_JS = """(cue) => {
  let c; try { c = JSON.parse(cue || "{}"); } catch (e) { return; }
  document.body.dataset.ntpFocus = c.focus || "";
  if (!c.focus || !document.body.classList.contains("ntp-follower")) return;
  let tries = 0;
  const go = () => {
    const el = document.getElementById(c.focus);
    if (!el || el.getBoundingClientRect().height === 0) { if (tries++ < 20) setTimeout(go, 250); return; }
    const bar = document.getElementById("follow-bar");
    const under = bar && getComputedStyle(bar).position === "sticky" ? bar.offsetHeight + 8 : 0;
    const chips = document.getElementById("chips");
    const inLab = chips && chips.parentElement && chips.parentElement.contains(el);
    const top = inLab ? 0 : el.getBoundingClientRect().top + window.scrollY - under;
    window.scrollTo({top: Math.max(0, top), behavior: "smooth"});
  };
  setTimeout(go, 300);
}"""


def build_room_menu() -> dict:
    """The header's Room menu (playground/menus.py): join by code, or open a room as the host, and its link."""
    with panel("room"):
        with gr.Row():
            code = gr.Textbox(show_label=False, placeholder=T("follow.code.placeholder"), max_length=16, scale=2,
                              elem_id="follow-code")
            join_btn = gr.Button(T("follow.join"), scale=1, elem_id="follow-join")
        open_btn = gr.Button(T("follow.open"), size="sm", elem_id="room-open")
        link = gr.Textbox(show_label=False, buttons=["copy"], visible=False, elem_id="room-link")
        gr.Markdown(T("follow.note"), elem_classes=["ntp-note"])
    return {"code": code, "join": join_btn, "open": open_btn, "link": link}


def build_follow_bar(menu: dict) -> FollowBar:
    """The room's line under the header (shown only in a room) and its state; menu: build_room_menu's."""
    seat = gr.State(Seat())
    with gr.Row(elem_id="follow-bar", visible=False, equal_height=True) as bar:
        status = gr.Markdown("", elem_id="follow-status")
        break_btn = gr.Button(T("follow.break"), size="lg", scale=0, visible=False, elem_id="follow-break")
        again_btn = gr.Button(T("follow.again"), size="lg", scale=0, visible=False, elem_id="follow-again")
        close_btn = gr.Button(T("follow.close"), size="sm", scale=0, visible=False, elem_id="room-close")
    tab = gr.Textbox("lab", visible="hidden", elem_id="follow-tab")
    key = gr.Textbox("", visible="hidden", elem_id="room-key")
    timer = gr.Timer(limits.HOST_PUBLISH_SECONDS, active=False)
    mode = gr.Textbox("none", visible="hidden", elem_id="room-mode")
    cue = gr.Textbox("", visible="hidden", elem_id="room-cue")
    return FollowBar(seat, bar, status, break_btn, again_btn, close_btn, menu["code"], menu["join"], menu["open"],
                     menu["link"], tab, key, timer, mode, cue)


def wire_follow(demo: gr.Blocks, bar: FollowBar, lab: LabComponents, page: PageState, language, scenes: SceneBar):
    """Inside the Blocks context. lab: build_lab's components; page: the page's PageState (its link fields, the
    tabs and their items); scenes: the header's scene controls (the host's scene is the room's). Returns
    resume_after(event), which wires the host's resume after `event` (the page's own link applied first, so the
    room's state, newer, wins)."""
    room = Room(bar, lab, page, language, scenes)
    bound = lambda handler: bind(handler, room)  # Gradio reads the rest of the handler's signature
    # raw values (preprocess=False), as a link of the page reads them (PageState.current_state)
    bar.open_button.click(bound(open_room), room.host_inputs, bar.outputs, api_name="open_room",
                          show_progress="hidden", preprocess=False)
    bar.timer.tick(bound(host_tick), room.host_inputs, bar.outputs, api_name="host_publish", show_progress="hidden",
                   queue=False, preprocess=False)
    bar.close_button.click(bound(close_room), [bar.seat, language], bar.outputs, api_name="close_room",
                           show_progress="hidden")
    bar.key.change(None, bar.key, None, js=SAVE_KEY_JS, api_visibility="private")
    bar.mode.change(None, bar.mode, None, js=MODE_JS, api_visibility="private")
    bar.cue.change(None, bar.cue, None, js=CUE_JS, api_visibility="private")
    entered = gr.on([bar.join_button.click, bar.again_button.click, bar.code.submit, demo.load], bound(enter),
                    [bar.code, bar.seat, language], bar.outputs, api_name="join", show_progress="hidden")
    following = entered.success(bound(follow), bar.seat, room.stream, api_name="follow", show_progress="hidden")
    following.then(lambda s, lang: show(room, s, lang), [bar.seat, language], bar.outputs, api_visibility="private",
                   show_progress="hidden")  # the room closed: the bar says so and offers Join again
    bar.break_button.click(bound(break_away), [bar.seat, language], bar.outputs, cancels=[following],
                           api_name="break_away", show_progress="hidden", queue=False)
    language.change(bound(relang), [bar.seat, language], bar.status, api_visibility="private", show_progress="hidden",
                    trigger_mode="multiple")
    for tab_id, item in page.tab_items.items():  # the host's tab, kept in the browser (no server event)
        item.select(None, None, bar.tab, js=f"() => {tab_id!r}")
    return partial(resume_after, room)


def resume_after(room: Room, event) -> None:
    """After `event`: the page reads the key its tab kept, then hosts the room again (handlers.resume_room)."""
    bar = room.bar
    outputs = [*bar.outputs, *(o for o in room.stream if all(o is not b for b in bar.outputs))]
    read = event.then(None, None, bar.key, js=READ_KEY_JS, api_visibility="private")
    read.then(bind(resume_room, room), [bar.seat, bar.key, room.language], outputs, api_name="resume_room",
              show_progress="hidden")
