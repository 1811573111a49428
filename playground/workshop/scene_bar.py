"""The scene controls in the page's header: a picker, ← / → (and PageUp / PageDown, Alt+← / Alt+→), the open scene's
caption under the header in the page's language, and (in the header's Share menu) absolute links to the scene or
to the whole page as it is now.

Opening a scene sets its tab and settings through PageState (the same path as a link), then, in the
browser, scrolls to its section and presses its run button if it has one (scenes.py). The page's load
opens `?scene=<id>` the same way.
"""

from __future__ import annotations

import json

import gradio as gr

from model_service.records import validation

from ..common.address import absolute, base_url
from ..common.errors import unchanged, user_error, warn
from ..common.i18n import DEFAULT, LANGUAGES, T, language, tr
from ..common.text import escape_html
from .caption_facts import fill
from .links import make_query
from .page_state import PageState
from .scenes import Scene, SceneList

# after a scene's values reach the page: open its section if it is a closed accordion, scroll to it, press its
# button (a tab's components may mount a moment after the tab is selected: look again for a few seconds)
ACTION_JS = """(action) => {
  let a; try { a = JSON.parse(action || "{}"); } catch (e) { return; }
  if (!a.id) return;
  let tries = 0;
  const go = () => {
    const el = a.focus && document.getElementById(a.focus);
    if (a.focus && !el && tries++ < 20) { setTimeout(go, 250); return; }
    if (el) {
      const wrap = el.querySelector(":scope > .label-wrap, :scope > button.label-wrap");
      if (wrap && !wrap.classList.contains("open")) wrap.click();
      // land just under the band that stays on screen (the header and the caption, or the caption alone: its
      // sticky top is minus the part that scrolls away)
      const band = document.getElementById("top-band");
      const under = band ? band.offsetHeight + Math.min(0, parseFloat(getComputedStyle(band).top) || 0) + 8 : 0;
      window.scrollTo({top: el.getBoundingClientRect().top + window.scrollY - under});
    }
    // the run button wakes once the page's link is applied (page.run_buttons): a scene opened by a link waits;
    // on a busy machine its tab may mount after the section was looked for: wait for the button itself too
    const press = (left) => {
      const b = a.run && document.getElementById(a.run);
      const button = b && (b.tagName === "BUTTON" ? b : b.querySelector("button"));
      if (a.run && (!button || button.disabled) && left > 0) { setTimeout(() => press(left - 1), 100); return; }
      if (button) button.click();
    };
    press(600);
  };
  setTimeout(go, 200);
}"""

# PageDown / Alt+→: next scene; PageUp / Alt+←: previous (plain arrows move sliders; Alt+← is the browser's Back)
KEYS_JS = """() => {
  if (window.ntpSceneKeys) return;
  window.ntpSceneKeys = true;
  document.addEventListener("keydown", (e) => {
    const typing = e.target && (e.target.tagName === "TEXTAREA" || e.target.isContentEditable);
    let id = null;
    if (e.key === "PageDown" && !typing) id = "scene-next";
    if (e.key === "PageUp" && !typing) id = "scene-prev";
    if (e.altKey && e.key === "ArrowRight") id = "scene-next";
    if (e.altKey && e.key === "ArrowLeft") id = "scene-prev";
    if (!id) return;
    const button = document.getElementById(id);
    if (button) { e.preventDefault(); button.click(); }
  });
}"""


def caption_markdown(scene: Scene | None, scenes: SceneList, lang=DEFAULT, records=None) -> str:
    """The caption under the bar: the scene's title and paragraph (the host's Markdown, HTML escaped), its facts
    read from `records`, the scene's run in `lang` (None: not run yet; caption_facts.py)."""
    if scene is None:  # nothing under the header: the picker's own box says how to start (placeholder_js)
        return ""
    n = scenes.ids().index(scene.id) + 1
    caption = fill(escape_html(scene.text("caption", lang)), scene.facts, records, lang)
    return tr(lang, "scenes.caption", n=n, total=len(scenes), title=escape_html(scene.label(lang)), caption=caption)


def placeholder_js() -> str:
    """The picker's empty box says "choose a scene (→ or PageDown)" in the page's language (<html lang>, set on
    load): run on load and after each language switch. The picker redraws its box when its choices change (a switch
    relabels them), writing Gradio's placeholder back: an observer puts the page's language's back at once. The
    language switch sets <html lang> only after Gradio's strings are swapped (an awaited import), possibly after this
    ran: a second observer on <html lang> writes the text again then."""
    texts = json.dumps({code: tr(code, "scenes.choose") for code in LANGUAGES})
    return f"""() => {{
  const texts = {texts};
  const set = () => {{
    const input = document.querySelector("#scene-picker input");
    if (!input) return false;
    const text = texts[document.documentElement.lang] || texts.en;
    if (input.placeholder !== text) input.placeholder = text;
    if (input.title !== text) input.title = text;
    return true;
  }};
  const watch = () => {{
    const picker = document.getElementById("scene-picker");
    if (!picker || window.ntpPlaceholderWatch) return;
    window.ntpPlaceholderWatch = new MutationObserver(set);
    window.ntpPlaceholderWatch.observe(picker, {{subtree: true, childList: true, attributes: true,
                                                 attributeFilter: ["placeholder"]}});
    new MutationObserver(set).observe(document.documentElement, {{attributes: true, attributeFilter: ["lang"]}});
  }};
  let tries = 0;
  const again = () => {{ if (!set() && tries++ < 20) setTimeout(again, 250); else watch(); }};
  setTimeout(again, 50);
}}"""


def relabel_js(scenes: SceneList) -> str:
    """A language switch: the picker's labels and the open scene's caption in the new language, built in the browser
    from the picker's value at that moment. A server handler would read the picker when the switch's turn comes (the
    page runs a change's handlers one after another: seconds on a busy machine) and write that value back when it
    answers, undoing a ← / → (or a host's scene, on a follower's page) that landed in between. A caption whose facts
    were read from the scene's run comes from what the opening left (`filled`: {"id", "captions"} by language)."""
    texts = {code: {"choices": scenes.choices(code),
                    "captions": {scene.id: caption_markdown(scene, scenes, code) for scene in scenes.scenes}}
             for code in LANGUAGES}
    data = json.dumps(texts).replace("<", "\\u003c")  # the host's text stays a string: no "<" in the script
    return f"""(lang, id, filled) => {{
  const texts = {data};
  const t = texts[lang] || texts[{json.dumps(DEFAULT)}];
  const open = Object.prototype.hasOwnProperty.call(t.captions, id);
  let f = null; try {{ f = JSON.parse(filled || "null"); }} catch (e) {{}}
  const caption = f && f.id === id && f.captions[lang] ? f.captions[lang] : open ? t.captions[id] : "";
  return [{{__type__: "update", choices: t.choices, value: open ? id : null}}, caption, filled];
}}"""


def action(scene: Scene) -> str:
    """What the browser does after the values arrived (ACTION_JS)."""
    return json.dumps({"id": scene.id, "focus": scene.focus, "run": scene.run})


class SceneBar:
    """Build inside the Blocks context; then place its parts where the page's layout wants them (render_controls
    in the header row, render_links in the Share menu, render_caption under the header), and wire() once
    PageState and the tabs exist. `link` is the Share menu's one box: every link button writes it."""

    def __init__(self, scenes: SceneList):
        self.scenes = scenes
        self.prev = gr.Button("←", size="sm", scale=0, min_width=40, elem_id="scene-prev", render=False)
        # no placeholder in a Gradio Dropdown: SCENE_PLACEHOLDER_JS writes "choose a scene" into its box
        self.picker = gr.Dropdown(scenes.choices(DEFAULT), value=None, show_label=False, scale=0, min_width=200,
                                  label=T("scenes.picker"), elem_id="scene-picker", render=False)
        self.next = gr.Button("→", size="sm", scale=0, min_width=40, elem_id="scene-next", render=False)
        self.scene_link_btn = gr.Button(T("scenes.link.scene"), size="sm", elem_id="scene-link", render=False)
        self.page_link_btn = gr.Button(T("scenes.link.page"), size="sm", elem_id="page-link", render=False)
        self.caption = gr.Markdown(caption_markdown(None, scenes), elem_id="scene-caption", render=False)
        self.link = gr.Textbox(show_label=False, placeholder=T("scenes.link.placeholder"), buttons=["copy"],
                               elem_id="link", max_lines=1, render=False)
        # the browser's part of opening a scene (ACTION_JS reads it after each opening)
        self.action = gr.Textbox("", visible=False, elem_id="scene-action", render=False)
        # the open scene's caption in every language with its facts read from its run (relabel_js reads it)
        self.filled = gr.Textbox("", visible=False, elem_id="scene-filled", render=False)
        # (scene, lang) -> the records of the scene's run in that language, or None (set by the page: the lab's)
        self.records_of = lambda scene, lang: None

    def render_controls(self) -> None:
        """← picker → (in the header row)."""
        with gr.Row(elem_id="scene-bar", equal_height=True, visible=len(self.scenes) > 0):
            self.prev.render()
            self.picker.render()
            self.next.render()

    def render_links(self) -> None:
        """The scene's and the page's link buttons (in the Share menu, beside the lab's)."""
        self.page_link_btn.render()
        self.scene_link_btn.render()

    def render_caption(self) -> None:
        """The open scene's caption (under the header row; nothing while no scene is open)."""
        self.caption.render()
        self.action.render()
        self.filled.render()

    def open_scene(self, state: PageState, scene: Scene, lang, extra: dict | None = None) -> dict:
        """Every update that opens `scene` (and then a link's other fields, `extra`), in `lang`."""
        # a scene is the whole page: every field it leaves out at its default (nothing of the scene before stays); its
        # lesson prompt follows the page's language; a link's own fields (extra) are as written
        updates, problems = state.apply_state({**scene.query, "tab": scene.tab}, lang, lesson_follows_language=True,
                                              whole=True)
        if extra:
            more, more_problems = state.apply_state(extra, lang)
            updates, problems = updates | more, problems + more_problems
        for problem in problems:
            warn(tr(lang, "page.link.problem", problem=problem))
        captions = self.captions(scene)
        return updates | {self.picker: gr.Dropdown(value=scene.id), self.caption: captions[language(lang)],
                          self.action: action(scene), self.filled: json.dumps({"id": scene.id, "captions": captions})}

    def captions(self, scene: Scene) -> dict[str, str]:
        """The scene's caption in every language, its facts read from its run in that language (computed now, and
        kept for its Generate, if it was not kept yet)."""
        return {code: caption_markdown(scene, self.scenes, code, self.records_of(scene, code) if scene.facts else None)
                for code in LANGUAGES}

    def wire(self, state: PageState, language: gr.Radio, follow=None, host_lang=None) -> list:
        """The bar's events. follow: (fn, inputs, outputs) run after a scene's values are set (the forward
        tab traces its prompt there). Returns the outputs of an opening, for the page's load."""
        outputs = [*state.outputs, self.picker, self.caption, self.action, self.filled]

        def go(scene_id, lang, by: int):
            scene = self.scenes.step(scene_id, by) if by else self.scenes.get(scene_id)
            if scene is None:
                return unchanged(self.caption)
            return self.open_scene(state, scene, lang)

        def then(event):
            if follow is not None:
                event = event.then(*follow, api_visibility="private", show_progress="minimal", preprocess=False)
            event.then(None, self.action, None, js=ACTION_JS, api_visibility="private")

        def open_scene(scene_id, lang):
            try:
                validation.choice("scene", scene_id, self.scenes.ids())
            except ValueError as e:
                raise user_error(e, lang) from None
            return go(scene_id, lang, 0)

        def previous_scene(scene_id, lang):
            return go(scene_id, lang, -1)

        def next_scene(scene_id, lang):
            return go(scene_id, lang, 1)

        # preprocess=False: a scene id that is none of the picker's is named by our check, not Gradio's
        then(self.picker.input(open_scene, [self.picker, language], outputs, api_name="open_scene",
                               show_progress="hidden", preprocess=False))
        then(self.prev.click(previous_scene, [self.picker, language], outputs, api_visibility="private",
                             show_progress="hidden", preprocess=False))
        then(self.next.click(next_scene, [self.picker, language], outputs, api_visibility="private",
                             show_progress="hidden", preprocess=False))

        def scene_link(scene_id, lang, request: gr.Request = None):
            if self.scenes.get(scene_id) is None:
                warn(tr(lang, "scenes.link.pick"))
                return unchanged(self.link)
            query = make_query({}, lang=lang, host_lang=host_lang, scene=scene_id)
            return {self.link: absolute(base_url(request), query)}

        def page_link(request: gr.Request, *values):  # Gradio gives the request only to a parameter before *values
            *values, lang = values
            query = make_query(state.current_state(*values), lang=lang, host_lang=host_lang)
            return {self.link: absolute(base_url(request), query)}

        self.scene_link_btn.click(scene_link, [self.picker, language], self.link, api_name="scene_link",
                                  show_progress="hidden", preprocess=False)
        self.page_link_btn.click(page_link, [*state.inputs, language], self.link, api_name="page_link",
                                 show_progress="hidden", preprocess=False)

        # in the browser, from the picker's value then (relabel_js): a server handler's stale read undid a ← / →
        language.change(None, [language, self.picker, self.filled], [self.picker, self.caption, self.filled],
                        js=relabel_js(self.scenes),
                        api_visibility="private", show_progress="hidden").then(
            None, None, None, js=placeholder_js(), api_visibility="private")
        self.then = then
        return outputs


__all__ = ["ACTION_JS", "KEYS_JS", "SceneBar", "caption_markdown", "placeholder_js", "relabel_js"]
