"""The presenter view: the page as a projector at the front of a room shows it, one step on one screen.

A toggle in the header (and `?present=1` in a link) folds the lab's controls into a slim bar of its three
buttons and the lesson's four knobs over the run, draws the charts with text of at least 14 px, shows the stage panels' ten most probable
candidates and folds the panels that change nothing into one note, and keeps the chips large in a box of a few
lines. Keys drive the lab (KEYS_JS: Space = Step, G = Generate, S = Stop, ← / → = scrub, T / K / P / M = focus a lesson
knob and ↑ / ↓ move it (the step on screen redraws: playground/lab/what_if.py), W = Sweep T (lab/sweep.py), ? = their
help).
A second toggle puts the stage chart's x axis on a log scale, so the tail a filter cuts is visible. The page's
dark theme (`?__theme=dark`, or the system's) darkens the charts. Layout lives in assets/presenter.css
(body.ntp-present); the charts read the page's View (playground/lab/view.py).
"""

from __future__ import annotations

import html
import json

import gradio as gr

from ..common.i18n import LANGUAGES, T, tr
from ..lab.components import LabComponents
from ..lab.run import Run
from ..lab.view import View, draw_chart, placeholders, run_chart, stage_chart

NARROW_PX = 600  # a page this wide or less (a phone held upright) stacks the stage panels (View.narrow)
# on load: the link's present flag, whether Gradio put the page in its dark theme, and whether it is a phone's
READ_PAGE_JS = """() => {
  const query = new URLSearchParams(window.location.search);
  const on = ['1', 'true', 'yes', 'on'].includes((query.get('present') || '').toLowerCase());
  const dark = document.body.classList.contains('dark') || query.get('__theme') === 'dark';
  const narrow = window.innerWidth <= __NARROW_PX__;
  document.body.classList.toggle('ntp-narrow', narrow);  // (assets/style.css: the stacked chart needs no min width)
  return [on, dark, narrow];
}""".replace("__NARROW_PX__", str(NARROW_PX))
CLASS_JS = "(on) => { document.body.classList.toggle('ntp-present', !!on); return on; }"


def build_toggles() -> dict:
    """The toggles, created where the caller's layout wants them (the header row)."""
    present = gr.Checkbox(False, label=T("presenter.toggle"), elem_id="present", scale=0, min_width=170)
    log = gr.Checkbox(False, label=T("presenter.log"), elem_id="log-zoom", scale=0, min_width=170)
    dark = gr.Checkbox(False, visible=False, elem_id="dark-charts")  # set by the page's theme, not by hand
    narrow = gr.Checkbox(False, visible=False, elem_id="narrow-charts")  # set by the page's width (NARROW_PX)
    return {"present": present, "log": log, "dark": dark, "narrow": narrow}


def redraw_views(present, log, dark, state: Run, index, lang, narrow=False) -> tuple:
    """(the View, stage, draw and run charts) for the run the page keeps, at the step the scrubber shows."""
    shown = View(bool(present), bool(log), bool(dark), bool(narrow))
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
    present, log, dark, narrow = toggles["present"], toggles["log"], toggles["dark"], toggles["narrow"]
    demo.load(None, None, [present, dark, narrow], js=READ_PAGE_JS, api_visibility="private")
    demo.load(None, None, None, js=keys_js(), api_visibility="private")
    present.change(None, present, None, js=CLASS_JS, api_visibility="private", show_progress="hidden")

    def redraw(present_on, log_on, dark_on, narrow_on, state, index, lang):
        out = redraw_views(present_on, log_on, dark_on, state, index, lang, narrow_on)
        return dict(zip((lab.view, lab.stage_plot, lab.draw_plot, lab.run_plot), out))

    # not queued: the page's View is a server-side State that a run reads when its event starts, so a toggle must
    # land before a Generate pressed right after it is taken from the queue (a hog run caught Log scale, then
    # Generate, drawing the run linear: the toggle's event was still waiting behind it)
    gr.on([present.change, log.change, dark.change, narrow.change], redraw,
          [present, log, dark, narrow, lab.run_state, lab.scrub, language],
          [lab.view, lab.stage_plot, lab.draw_plot, lab.run_plot], api_visibility="private",
          show_progress="hidden", preprocess=False, trigger_mode="always_last", queue=False)


# ---- the keys: Space = Step, G = Generate, S = Stop, ← / → = scrub, ? = this help ----------------------------

KEY_TEXTS = ("hint", "hint_title", "title", "space", "step", "generate", "stop", "scrub", "knobs", "sweep", "scenes", "help",
             "close")
KNOB_KEYS = {"t": "temperature", "k": "top-k", "p": "top-p", "m": "min-p"}  # a key -> the lesson knob it focuses

# Installed once on load. Only in the presenter view; never with Ctrl, Alt or Meta (Alt+← / → and PageUp / PageDown
# move scenes: scene_bar.py KEYS_JS), never while the focus is in a box one types into. A key acts only on what the
# page shows (the lab's tab open, the scrubber there after a run): elsewhere Space still scrolls the page.
KEYS_JS = """() => {
  if (window.ntpPresenterKeys) return;
  window.ntpPresenterKeys = true;
  const texts = __TEXTS__;
  const say = (key) => (texts[document.documentElement.lang] || texts.en)[key];
  const on = () => document.body.classList.contains("ntp-present");
  const laidOut = (el) => !!el && el.getClientRects().length > 0;
  const button = (id) => { const b = document.getElementById(id); return b && (b.tagName === "BUTTON" ? b : b.querySelector("button")); };
  const pressable = (id) => { const b = button(id); return laidOut(b) && !b.disabled ? b : null; };
  const range = () => { const r = document.querySelector("#scrub input[type=range]"); return laidOut(r) && !r.disabled ? r : null; };
  const scrub = (input, by) => {  // as the keyboard on the slider does: its value, then its input event (the server redraws)
    const value = Math.min(Math.max(Number(input.value) + by * (Number(input.step) || 1), Number(input.min)), Number(input.max));
    if (value === Number(input.value)) return;
    Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(input, String(value));
    input.dispatchEvent(new Event("input", {bubbles: true}));
  };
  const typing = (t) => !!t && (t.isContentEditable || ["TEXTAREA", "SELECT"].includes(t.tagName) || (t.tagName === "INPUT"
    && !["checkbox", "radio", "range", "button", "submit", "reset", "color", "file"].includes((t.type || "text").toLowerCase())));
  const box = () => {
    let help = document.getElementById("ntp-keys-help");
    if (!help) {
      help = document.createElement("div");
      help.id = "ntp-keys-help"; help.hidden = true; help.setAttribute("role", "dialog");
      document.body.appendChild(help);
    }
    return help;
  };
  const fill = (help) => {
    const row = (keys, what) => `<tr><td>${keys.map((k) => `<kbd>${k}</kbd>`).join(" ")}</td><td>${say(what)}</td></tr>`;
    help.setAttribute("aria-label", say("title"));
    help.innerHTML = `<h2>${say("title")}</h2><table>` + row([say("space")], "step") + row(["G"], "generate")
      + row(["S"], "stop") + row(["←", "→"], "scrub") + row(["T", "K", "P", "M", "↑", "↓"], "knobs") + row(["W"], "sweep")
      + row(["PageUp", "PageDown"], "scenes") + row(["?"], "help")
      + `</table><p>${say("close")}</p>`;
  };
  const isOpen = () => { const help = document.getElementById("ntp-keys-help"); return !!help && !help.hidden; };
  const show = (open) => { const help = box(); if (open) fill(help); help.hidden = !open; };
  const hint = () => {  // "? keys" at the end of the slim bar of buttons
    const bar = document.getElementById("lab-buttons");
    if (!bar) return false;
    let b = document.getElementById("ntp-keys-hint");
    if (!b) {
      b = document.createElement("button");
      b.id = "ntp-keys-hint"; b.type = "button"; b.setAttribute("aria-keyshortcuts", "?");
      b.addEventListener("click", (e) => { e.stopPropagation(); show(!isOpen()); });
    }
    if (b.parentElement !== bar) bar.appendChild(b);
    b.textContent = say("hint"); b.title = say("hint_title");
    return true;
  };
  const follow = () => {  // a long run scrolls inside the chips' box: keep the step shown (else the newest) in view
    const chips = document.querySelector("#chips .ntp-chips");
    if (!on() || !chips || chips.scrollHeight <= chips.clientHeight) return;
    const chosen = chips.querySelector(".ntp-selected");
    let top = chips.scrollHeight;
    if (chosen) {
      const off = chosen.getBoundingClientRect().top - chips.getBoundingClientRect().top;
      top = chips.scrollTop + off - (chips.clientHeight - chosen.offsetHeight) / 2;
    }
    const line = parseFloat(getComputedStyle(chips).lineHeight) || 1;  // whole lines: no sliver of one at the top
    chips.scrollTop = Math.min(Math.round(top / line), Math.ceil((chips.scrollHeight - chips.clientHeight) / line)) * line;
  };
  let watched = null, queued = false;
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; follow(); }); } };
  const mount = () => {
    const chips = document.getElementById("chips");
    if (chips && chips !== watched) {
      watched = chips;
      // the page's HTML updates morph the chips in place: a scrubbed step may change nothing but two classes
      new MutationObserver(later).observe(chips, {childList: true, subtree: true, characterData: true, attributes: true,
                                                  attributeFilter: ["class"]});
    }
    return hint() && !!chips;
  };
  let tries = 0;
  const again = () => { if (!mount() && tries++ < 40) setTimeout(again, 250); };
  again();
  new MutationObserver(() => { hint(); if (isOpen()) fill(box()); later(); })
    .observe(document.documentElement, {attributes: true, attributeFilter: ["lang"]});
  new MutationObserver(() => { mount(); later(); if (!on() && isOpen()) show(false); })
    .observe(document.body, {attributes: true, attributeFilter: ["class"]});
  document.addEventListener("click", (e) => { if (isOpen() && e.target.id !== "ntp-keys-hint") show(false); }, true);
  document.addEventListener("keydown", (e) => {
    if (!on() || e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || e.isComposing) return;
    if (e.key === "Escape" && isOpen()) { e.preventDefault(); show(false); return; }
    if (typing(e.target)) return;
    if (e.key === "?") { e.preventDefault(); show(!isOpen()); return; }
    if (e.shiftKey) return;
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    const knob = __KNOBS__[key];
    if (knob) {  // focus the knob's slider: ↑ / ↓ (and ← / →) then move it, and each move redraws the step
      const input = document.querySelector(`#${knob} input[type=range]`);
      if (!laidOut(input) || input.disabled) return;
      e.preventDefault();
      input.focus();
      return;
    }
    if (key === "w") {  // Sweep T: its button shows only while it plays (presenter.css), so it is clicked from here
      const b = document.getElementById("sweep-t");
      if (!b || b.disabled) return;
      e.preventDefault();
      if (!e.repeat) b.click();
      return;
    }
    const ids = {" ": "step", "g": "generate", "s": "stop"};
    if (ids[key]) {
      const b = pressable(ids[key]);
      if (!b) return;
      e.preventDefault();  // also keeps a focused button or checkbox from taking the Space itself
      if (!e.repeat) b.click();
      return;
    }
    if ((key === "ArrowLeft" || key === "ArrowRight") && !(e.target && e.target.type === "range")) {
      const input = range();  // on the slider itself the arrows already move it
      if (!input) return;
      e.preventDefault();
      scrub(input, key === "ArrowLeft" ? -1 : 1);
    }
  });
}"""


def keys_js() -> str:
    """KEYS_JS with its texts in both languages (HTML escaped): the help shows the page's language (<html lang>)."""
    texts = {code: {key: html.escape(tr(code, f"presenter.keys.{key}")) for key in KEY_TEXTS} for code in LANGUAGES}
    return KEYS_JS.replace("__TEXTS__", json.dumps(texts, ensure_ascii=False)).replace("__KNOBS__", json.dumps(KNOB_KEYS))
