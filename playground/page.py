"""The whole page: the header (the model serving the room, the host's picker), then one tab per lesson.

UI code only lays out and wires; the service (any ModelClient of model_service/client.py, here usually a
LoadingService) is passed in, so a remote service can stand in without touching this file.
Each tab builds and wires its own components (playground/<tab>/tab.py); this module places them
and wires what crosses tabs: deep links into the lab, the page's language, and each tab's watcher of
the room's model (playground/header.py). build_demo lays the page out (PageParts), then wires it: the page's own
handlers take what they read (Page) first, bound to it, and return {component: value}.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from playground import limits

from .api import register_api
from .common.address import absolute, base_url
from .common.errors import unchanged, user_error, warn
from .common.handlers import bind
from .common.i18n import LANGUAGES, SWITCH_JS, T, html_lang_script, tr, translations
from .common.kept_batches import KeptBatches
from .common.lab_link import lab_query
from .common.sessions import use_lean_sessions
from .compare.tab import build_compare_tab
from .engine.tab import build_engine_tab
from .forward.intervene_patch import PATCH_CLICK_JS
from .forward.kept_interventions import KeptInterventions
from .forward.tab import build_forward_tab
from .header import build_header, default_policy, model_line, picker_note, wire_header
from .hosting import SwitchPolicy
from .lab.ban import BAN_JS
from .lab.branch_panel import BranchPanel, build_branch_panel
from .lab.chain_board import CHAIN_JS
from .lab.components import LabComponents
from .lab.deep_link import CONTROLS, check_controls
from .lab.greedy_loop import build_greedy_loop
from .lab.handlers import watcher as lab_watcher
from .lab.replays import Replays, scene_requests, scene_runs
from .lab.run_files import build_run_files
from .lab.tab import build_lab
from .language_fit import build_fit_note
from .language_fit import note_update as fit_note
from .language_fit import watcher as fit_watcher
from .menus import MENUS_HEAD, MENUS_JS, opener, panel
from .softmax.tab import build_softmax_tab
from .workshop.follow.bar import FollowBar, build_follow_bar, build_room_menu, wire_follow
from .workshop.page_state import PageState
from .workshop.presenter import build_toggles
from .workshop.presenter import wire as wire_presenter
from .workshop.scene_bar import KEYS_JS, SceneBar, placeholder_js
from .workshop.scene_batches import scene_batches
from .workshop.scenes import SceneList, load, scene_paths

ASSETS = Path(__file__).resolve().parents[1] / "assets"
# the page's style sheets, in this order: the page and its header, the presenter view, a follower's page
STYLE_SHEETS = ("style.css", "presenter.css", "room.css")
TITLE = "Next-Token Playground"
# the one file input is the lab's run import: Gradio's upload route takes nothing bigger than a run file
MAX_UPLOAD = limits.MAX_RUN_FILE_BYTES
# each tab's id (in links: ?tab=) and its label's key, in the page's order
TAB_LABELS = {"lab": "page.tab.lab", "softmax": "page.tab.softmax", "engine": "page.tab.engine",
              "compare": "page.tab.compare", "forward": "page.tab.forward"}


@dataclass(frozen=True)
class PageParts:
    """The page's parts, as lay_out builds them: the header's, the scene bar, the room's bar, each tab's."""

    language: gr.Radio  # every server-built text reads this; the page's load event sets it (see common/i18n.py)
    view_toggles: dict
    header: dict
    bar: SceneBar
    room: FollowBar
    tabs: gr.Tabs
    tab_items: dict  # tab id -> gr.Tab, in TAB_LABELS' order
    lab: LabComponents
    branch: BranchPanel
    link_button: gr.Button  # the lab's settings (the Share menu's third button)
    link: gr.Textbox  # the Share menu's one box
    softmax: dict
    engine: dict
    compare: dict
    forward: dict


@dataclass(frozen=True)
class Page:
    """What the page's own handlers read: the service and the host's choices, the parts, and the PageState that
    moves the whole page (a link, a scene, a room)."""

    service: object
    policy: SwitchPolicy
    default_language: str | None
    scenes: SceneList
    parts: PageParts
    state: PageState


def build_demo(service, default_language: str | None = None, policy: SwitchPolicy | None = None,
               host_key: str | None = None, scenes: SceneList | None = None, warm_scenes: bool = False,
               replays: Replays | None = None, kept: KeptBatches | None = None,
               interventions: KeptInterventions | None = None) -> gr.Blocks:
    """The page for a service (usually a LoadingService). default_language: the host's --lang (None: each
    browser's own language, English if neither); policy: who may switch the room's model
    (playground/hosting.py; default: nobody); host_key: the key it asks for, when it asks; scenes: the
    scene bar's (default: the lessons' and NTP_SCENES' files, scenes.py); warm_scenes: run the lab scenes' runs
    once in the background when the model is ready, so each shows at once (lab/replays.py; app.py does), into
    `replays` (None: the page's own), then the Engine and Compare scenes' batches into `kept`
    (common/kept_batches.py; None: the page's own), then the interventions' scenes' results into `interventions`
    (forward/kept_interventions.py; None: the page's own)."""
    policy = policy or default_policy(service)
    skip_absent_matplotlib()
    scenes = scenes if scenes is not None else load(scene_paths())
    kept = kept if kept is not None else KeptBatches()  # the Engine and Compare scenes' batches
    interventions = interventions if interventions is not None else KeptInterventions()
    with gr.Blocks(title=TITLE) as demo:
        parts = lay_out(service, policy, scenes, replays, kept, interventions)
        register_api(service)
        wire_presenter(demo, parts.view_toggles, parts.lab, parts.language)
        page = Page(service, policy, default_language, scenes, parts, page_state(parts))
        wire(demo, page, host_key)
        track_no_progress(demo)  # (inside: the Blocks' config is written on leaving it)
    if warm_scenes:
        lab_runs = parts.lab.replays.warm(service, scene_requests(scenes.scenes, LANGUAGES))
        batches = kept.warm(service, scene_batches(scenes.scenes, LANGUAGES), after=lab_runs)
        interventions.warm(service, scenes.scenes, LANGUAGES, after=batches)
    return demo


# The header's height as --ntp-header-h: where the header takes several rows the top band sticks at minus it, so the
# scene's caption alone stays on screen (style.css, #top-band).
BAND_JS = """() => {
  const header = document.getElementById("header");
  if (!header || window.ntpBand) return;
  const keep = () => document.documentElement.style.setProperty("--ntp-header-h", header.offsetHeight + "px");
  window.ntpBand = new ResizeObserver(keep);
  window.ntpBand.observe(header);
  keep();
}"""


def lay_out(service, policy: SwitchPolicy, scenes: SceneList, replays: Replays | None,
            kept: KeptBatches | None = None, interventions: KeptInterventions | None = None) -> PageParts:
    """The header row (title, model, scenes, Share, Room, view, language), the room's line and the scene's
    caption under it, then one tab per lesson (each builds and wires its own)."""
    bar = SceneBar(scenes)
    # the header, the room's line and the scene's caption: one band that stays on screen as the page scrolls
    with gr.Column(elem_id="top-band"):
        with gr.Row(elem_id="header", equal_height=True):  # one row at 1280 wide: what is open takes no space closed
            gr.Markdown(T("page.header"), elem_id="title")
            header = build_header(service, policy)  # the model line, and the picker in its menu
            bar.render_controls()
            opener(T("page.share"), "share")
            with panel("share"):
                with gr.Row():
                    bar.render_links()
                    link_btn = gr.Button(T("page.link.button"), size="sm", elem_id="make-link")
                bar.link.render()  # the one box every link button writes
            opener(T("page.room"), "room")
            room_menu = build_room_menu()
            view_toggles = build_toggles()
            language = gr.Radio([(name, code) for code, name in LANGUAGES.items()], value="en", show_label=False,
                                label=T("page.language"), elem_id="language", scale=0, min_width=0)
        room = build_follow_bar(room_menu)
        bar.render_caption()
    header["fit"] = build_fit_note()  # a Vietnamese page on a model that reads it as bytes says so (not sticky: once)
    with gr.Tabs(elem_id="tabs", overflow_behavior="wrap") as tabs:  # a phone: every lesson a tap away, no "⋯"
        with gr.Tab(T(TAB_LABELS["lab"]), id="lab") as lab_tab:
            lab = build_lab(service, language=language, replays=replays)
            bar.records_of = scene_runs(service, lab.replays)  # a caption's facts read the scene's run
            branch = build_branch_panel(service, lab, language)
            build_run_files(lab, language)
            with gr.Accordion(T("page.greedy_loop"), open=False, elem_id="greedy-loop-box"):
                build_greedy_loop(service, language=language)
        with gr.Tab(T(TAB_LABELS["softmax"]), id="softmax") as softmax_tab:
            softmax = build_softmax_tab(service, lab, language=language)
        with gr.Tab(T(TAB_LABELS["engine"]), id="engine") as engine_tab:
            engine = build_engine_tab(service, language=language, kept=kept)
        with gr.Tab(T(TAB_LABELS["compare"]), id="compare") as compare_tab:
            compare = build_compare_tab(service, language=language, kept=kept)
        with gr.Tab(T(TAB_LABELS["forward"]), id="forward") as forward_tab:
            # "Sample from here" sets the lab's prompt and chat
            forward = build_forward_tab(service, lab, tabs=tabs, language=language, kept=interventions)
        forward_tab.select(
            forward["trace_if_new"], forward["select_inputs"], forward["select_outputs"],
            api_visibility="private", show_progress="minimal", preprocess=False,  # trace_if_new checks the block
        )
    tab_items = {"lab": lab_tab, "softmax": softmax_tab, "engine": engine_tab, "compare": compare_tab,
                 "forward": forward_tab}
    return PageParts(language, view_toggles, header, bar, room, tabs, tab_items, lab, branch, link_btn, bar.link, softmax,
                     engine, compare, forward)


def page_state(parts: PageParts) -> PageState:
    """Which component each field of a link (and a scene, and a room) sets, on every tab."""
    toy, engine, forward, compare = parts.softmax["toy"], parts.engine, parts.forward, parts.compare
    iv = forward["intervene"]
    fields = {**{name: parts.lab.control(name) for name in CONTROLS},  # the lab controls its own link carries
              "toy_logits": toy.logits, "toy_shift": toy.shift, "toy_temperature": toy.temperature,
              "engine": engine["table"], "fw_prompt": forward["prompt"], "fw_chat": forward["chat"],
              "fw_block": forward["block"], "fw_head": forward["head"], "compare_prompt": compare["prompt"],
              "compare_seed": compare["seed"], "compare_max_new": compare["max_new_tokens"],
              "compare_table": compare["table"], "iv_kind": iv.kind, "iv_block": iv.block, "iv_head": iv.head,
              "iv_mode": iv.mode, "iv_source": iv.source, "iv_steer_prompt": iv.steer_prompt, "iv_towards": iv.towards,
              "iv_away": iv.away, "iv_steer_block": iv.steer_block, "iv_scale": iv.scale}
    return PageState(fields, parts.tabs, parts.tab_items)


def wire(demo: gr.Blocks, page: Page, host_key: str | None) -> None:
    """What crosses tabs: the room, the scenes, links, the header, the page's language. Each of the page's own
    handlers takes `page` first: bound to it, Gradio reads the rest of its signature."""
    parts, lab, language, forward = page.parts, page.parts.lab, page.parts.language, page.parts.forward
    bound = lambda handler: bind(handler, page)
    # the room carries the page as its link would (every tab's fields), through the same PageState
    resume_room = wire_follow(demo, parts.room, lab, page.state, language, parts.bar)
    opened = parts.bar.wire(page.state, language, (bound(follow_forward), [page.state.tab, *forward["select_inputs"]],
                                                   forward["select_outputs"]), host_lang=page.default_language)
    demo.load(None, None, None, js=KEYS_JS, api_visibility="private")
    demo.load(None, None, None, js=MENUS_JS, api_visibility="private")
    demo.load(None, None, None, js=BAND_JS, api_visibility="private")
    demo.load(None, None, None, js=BAN_JS, api_visibility="private")  # a click on a candidate's bar bans it
    demo.load(None, None, None, js=PATCH_CLICK_JS, api_visibility="private")  # a click on a grid's cell patches it
    demo.load(None, None, None, js=CHAIN_JS, api_visibility="private")  # the custom chain's board moves its stages
    parts.link_button.click(bound(make_link), [*(lab.control(name) for name in CONTROLS), language], parts.link,
                            api_name="make_link", show_progress="hidden", preprocess=False)

    # the page's language: chosen on load (link, host, browser), then by the picker; Gradio's own
    # strings follow in the browser, and each tab re-renders its server-built text on .change. Then the
    # header follows the model: loading progress, and each tab's numbers once it serves (header.py)
    loaded = demo.load(None, None, language, js=html_lang_script(page.default_language), api_visibility="private")
    loaded.then(None, None, None, js=placeholder_js(), api_visibility="private")  # after <html lang> is set
    applied = loaded.then(bound(apply_link), language, opened, api_visibility="private", show_progress="hidden")
    # The buttons that run what a link sets start disabled and wake once the link is applied (or refused): a click
    # before that ran the page's defaults while the controls then showed the link's (seen on a loaded machine).
    runs = run_buttons(parts)
    applied.then(lambda: {b: gr.Button(interactive=True) for b in runs}, None, runs, queue=False,
                 api_visibility="private", show_progress="hidden")
    parts.bar.then(applied)
    resume_room(applied)  # a reloaded host page hosts its room again, after its own link (the room's is newer)
    parts.branch.wire_replay(applied)  # a link with branch=: the Branches panel runs it
    fits = fit_watcher(page.service, parts.header["fit"], page.policy.enabled)
    wire_header(loaded, page.service, parts.header, [lab_watcher(lab), parts.softmax["watch"], forward["watch"], fits],
                page.policy, host_key, language)
    language.change(None, language, None, js=SWITCH_JS, api_visibility="private", show_progress="hidden")
    language.change(bound(relabel), language, [parts.header["status"], parts.header["line"], parts.header["note"],
                                             parts.header["fit"], *parts.tab_items.values()],
                    api_visibility="private", show_progress="hidden", preprocess=False, trigger_mode="multiple")


def run_buttons(parts: PageParts) -> list:
    """The buttons that run the model on what a link or a scene sets: disabled until the page's link is applied."""
    forward = parts.forward
    return [parts.lab.generate_button, parts.lab.step_button, parts.compare["run"], parts.engine["run"],
            forward["trace_button"], forward["sample_button"]]


def follow_forward(page: Page, tab, *inputs):
    """After a link or scene: the forward tab traces its prompt, as selecting it does."""
    if tab != "forward":
        return unchanged(page.parts.forward["state"])
    return page.parts.forward["trace_if_new"](*inputs)


def apply_link(page: Page, lang, request: gr.Request):
    """Set the page from its query (a scene, then any other field); warn (escaped) about anything ignored.
    lang: the page's language, chosen on load (the link's, the host's or the browser's)."""
    query = dict(request.query_params) if request else {}
    scene_id = query.pop("scene", None)
    scene = page.scenes.get(scene_id) if scene_id else None
    if scene_id and scene is None:
        warn(tr(lang, "page.link.problem", problem=tr(lang, "scenes.unknown", scene=repr(scene_id))))
    if scene is not None:
        return page.parts.bar.open_scene(page.state, scene, lang, query)
    updates, problems = page.state.apply_state(query, lang)
    for problem in problems:
        warn(tr(lang, "page.link.problem", problem=problem))
    return updates or unchanged(page.state.tab)


def make_link(page: Page, request: gr.Request, *values):  # a request after *values would never be given: no host
    *controls, lang = values  # the lab's controls (CONTROLS' order), then the page's language
    try:  # raw values (preprocess=False): a script's "hot" temperature or NaN is named, not a bare error
        checked = check_controls(dict(zip(CONTROLS, controls)))
    except ValueError as e:
        raise user_error(e, lang) from None
    query = lab_query(checked, lang=lang, host_lang=page.default_language)
    return {page.parts.link: absolute(base_url(request), query)}


def relabel(page: Page, lang):
    # Gradio translates a tab's label only once the tab has been shown: set them all here
    service, header = page.service, page.parts.header
    line = model_line(service.status, lang, getattr(service, "switching", None))
    return {header["status"]: line, header["line"]: line,
            header["note"]: picker_note(service, page.policy, lang),
            header["fit"]: fit_note(service, lang, page.policy.enabled),
            **{page.parts.tab_items[tab_id]: gr.Tab(label=tr(lang, key)) for tab_id, key in TAB_LABELS.items()}}


def skip_absent_matplotlib() -> None:
    """Gradio wraps every event it runs (each streamed record, for every learner) in `matplotlib.use("agg")`
    and back, inside `try: import matplotlib / except ImportError`. We do not install matplotlib, so that is
    a failed search of sys.path, ~100 us on the event loop holding the GIL, per event: at 100 learners
    streaming, ~3% of a core. Marked absent, the import fails at once (~5 us). Installed, it is left alone."""
    if importlib.util.find_spec("matplotlib") is None:
        sys.modules.setdefault("matplotlib", None)


def track_no_progress(demo: gr.Blocks) -> None:
    """Give every event that shows no progress (show_progress="hidden") no component to show it on.

    Gradio's page keeps a loading status for every output of every event it has run, and on each message of
    any event (every streamed update, every chips-change count, every timer tick) it re-sets all of them: for
    each, a search of the page's component tree and a deep copy of the component's props, and a Plot given
    its props back re-fires its change event. With the lab, the header's watcher and a link's outputs that is
    ~165 components per message: 40 % of the browser's main thread during a run (a 24-token run: 7.0 s busy
    -> ~4.3 s with this). Hidden progress draws nothing on those components, so an empty list of progress
    targets shows the same page; events that show progress keep theirs."""
    for fn in demo.fns.values():
        if fn.show_progress == "hidden" and fn.show_progress_on is None:
            fn.show_progress_on = []


def launch_options() -> dict:
    """What Gradio 6 takes in launch() rather than Blocks(): theme, CSS, the menus' listeners (added to <head>
    before the page's components are drawn), enough worker threads for a room (each streaming learner's
    handler waits on the model's scheduler in a thread), and no run history: Gradio's page otherwise records every
    event it sends (each knob move, each streamed update, with their inputs and figures) in the browser's
    localStorage, re-reading and re-writing the whole list each time (~40 ms of the page's main thread per knob
    move here) and keeping a visitor's prompts in a shared browser; runs are kept by their links and run files.
    Every launch makes its sessions lean too (common/sessions.py: a join in a burst no longer builds the
    configuration of every component)."""
    use_lean_sessions()
    css = "\n".join((ASSETS / name).read_text(encoding="utf-8") for name in STYLE_SHEETS)
    return {"theme": gr.themes.Soft(), "css": css, "head": MENUS_HEAD, "run_history": False,
            "max_threads": limits.GRADIO_THREADS, "max_file_size": MAX_UPLOAD, "i18n": translations()}


def queue_options() -> dict:
    """Gradio's queue for a room. No per-event concurrency limit: the model serialises itself (one
    scheduler thread does every forward pass and batches all waiting learners into it), so events
    must not queue one behind another here. max_size bounds the events waiting in Gradio's queue;
    past it a visitor is told the queue is full (HTTP 503) instead of waiting forever."""
    return {"default_concurrency_limit": None, "max_size": limits.GRADIO_QUEUE_SIZE}
