"""The header's menus: a button (or the model line) that opens a panel over the page, and takes no space closed.

Model, Share and Room open this way. Opening and closing is the browser's alone (MENUS_HEAD, in the page's
<head>; no server round trip): a click on a menu's opener puts `ntp-open-<name>` on <body> (assets/style.css shows the panel under the
header), a second click, Esc or a click outside every panel closes it. Opening one menu closes the others.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import gradio as gr

# opener's element id -> menu name; each panel is the column with id "<name>-panel"
OPENERS = {"model-status": "model", "share-button": "share", "room-button": "room"}

# In the page's <head>: the listeners sit on the document, so a menu opens from the first paint, before the page's
# load events have run (on a busy machine a click on Room right after the page showed was lost while they waited).
MENUS_HEAD = """<script>(() => {
  if (window.ntpMenus) return;
  window.ntpMenus = true;
  const OPENERS = __OPENERS__;
  const names = Object.values(OPENERS);
  const mark = (open) => {
    for (const [id, name] of Object.entries(OPENERS)) {
      document.body.classList.toggle("ntp-open-" + name, name === open);
      const opener = document.getElementById(id);
      const button = opener && (opener.tagName === "BUTTON" ? opener : opener.querySelector("button")) || opener;
      if (button) button.setAttribute("aria-expanded", String(name === open));
    }
  };
  const current = () => names.find((n) => document.body.classList.contains("ntp-open-" + n)) || null;
  window.ntpOpenMenu = mark;
  const openerOf = (target) => {
    for (const [id, name] of Object.entries(OPENERS)) {
      const opener = document.getElementById(id);
      if (opener && opener.contains(target)) return [opener, name];
    }
    return [null, null];
  };
  document.addEventListener("click", (e) => {
    const [opener, name] = openerOf(e.target);
    if (opener) { mark(current() === name ? null : name); return; }
    // a click outside closes the open menu; the page's own script clicking a hidden button (.ntp-script) is nobody's
    if (current() && !e.target.closest(".ntp-menu, .ntp-script")) mark(null);
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && current()) { mark(null); return; }
    const [opener] = openerOf(e.target);  // the model line is a Markdown box: Enter and Space open it too
    if (opener && opener === e.target && opener.tagName !== "BUTTON" && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      opener.click();
    }
  });
})();</script>""".replace("__OPENERS__", json.dumps(OPENERS))
# On load: the model line (a Markdown box) becomes a keyboard control.
MENUS_JS = """() => {
  for (const id of __IDS__) {
    const opener = document.getElementById(id);
    if (opener && opener.tagName !== "BUTTON") {
      opener.setAttribute("role", "button");
      opener.setAttribute("tabindex", "0");
    }
  }
}""".replace("__IDS__", json.dumps(list(OPENERS)))


def opener(label, name: str) -> gr.Button:
    """A small header button that opens the menu `name` (its id is the one OPENERS names)."""
    elem_id = next(i for i, n in OPENERS.items() if n == name)
    return gr.Button(label, size="sm", scale=0, min_width=60, elem_id=elem_id, elem_classes=["ntp-opener"])


@contextmanager
def panel(name: str):
    """The menu's panel, in the current layout (the header row): hidden until its opener is clicked."""
    with gr.Column(elem_id=f"{name}-panel", elem_classes=["ntp-menu"], min_width=0) as column:
        yield column


__all__ = ["MENUS_HEAD", "MENUS_JS", "OPENERS", "opener", "panel"]
