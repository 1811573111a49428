"""A page's state as a room shares it: the whole page's link fields as text (playground/workshop/links.py: the tab and every
tab's inputs, defaults left out), plus the lab's step. The host's page makes one; a follower's page checks it
exactly like a link before applying it.

    host:     host_fields(page, raw) -> page_state(fields, step) -> the room (playground/workshop/follow_rooms.py)
    follower: the room -> parse_state(state, lang) -> follower_values(page, values, lang) -> the page's controls

A link of the whole page leaves out the forward tab's block off that tab (its default depends on the model); a
room's pages share the model, so the room carries it on every tab. Fields the host's page leaves at their
defaults reset a follower's controls to them: a follower shows what the host shows.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import gradio as gr

from model_service.records import validation
from playground import limits

from ...common.errors import in_language
from ...common.i18n import LESSON_PROMPTS, language
from .. import follow_rooms
from ..links import DEFAULTS, TABS, make_query, parse_query

ROOM_FIELDS = ("step", "scene")  # what a room adds to a link's fields
ALWAYS = ("fw_block",)  # link fields a room carries on every tab


def host_fields(page, raw: list) -> dict:
    """The host's page as link fields: PageState.current_state of its raw `inputs` (the tab first), with the
    forward tab's block kept on every tab."""
    fields = page.current_state(*raw)
    shown = dict(zip(page.fields, raw[1:]))
    for name in ALWAYS:
        if fields.get(name) is None and shown.get(name) is not None:
            fields[name] = shown[name]
    return fields


def page_state(fields: dict, step, scene: str | None = None) -> dict:
    """The state a host's page publishes: its link fields as a link writes them (defaults left out), the tab
    always, the step the lab's scrubber shows (None when the page has no finished run) and the scene the host
    opened (None: none; a follower checks it against its own scenes)."""
    state = dict(parse_qsl(make_query(fields), keep_blank_values=True))
    state["tab"] = fields.get("tab") if fields.get("tab") in TABS else TABS[0]
    if step is not None:
        state["step"] = str(step)
    if scene is not None:
        state["scene"] = scene
    return state


def defaults(lang=None) -> dict:
    """What a field the host's state leaves out sets on a follower's page: a link's default; the forward and
    Compare tabs' prompts are the lesson's, in the follower's language (a link leaves any lesson's version out)."""
    lesson = LESSON_PROMPTS[language(lang)]
    return {**{k: v for k, v in DEFAULTS.items() if k != "tab"}, "fw_prompt": lesson, "compare_prompt": lesson}


def parse_state(state, lang=None) -> tuple[dict, str, int | None, list[str]]:
    """(link field -> value, every field of `defaults` included; tab id; step or None; problems). Checked like a
    link (links.parse_query, the same validators): a bad field is named in a problem (in `lang`, not yet escaped)
    and keeps its default, never applied as given."""
    try:
        state = follow_rooms.checked_state(state)
    except ValueError as e:
        return defaults(lang), TABS[0], None, [in_language(e, lang)]
    fields = {k: v for k, v in state.items() if k not in ROOM_FIELDS}
    values, problems = parse_query(fields | {"lang": language(lang)} if lang else fields)
    tab = values.pop("tab", TABS[0])
    step = None
    if state.get("step") is not None:
        try:
            step = validation.number("step", state["step"], integer=True, low=0, high=limits.MAX_NEW_TOKENS)
        except ValueError as e:
            problems.append(in_language(e, lang))
    return defaults(lang) | values, tab, step, problems


def follower_values(page, values: dict, lang=None) -> list:
    """Every field component's value (in `page.fields` order) for parsed state `values`: what PageState sets for
    a link, as plain values (a follower's stream yields each every time: one that did not change costs nothing,
    a skip costs a component's rebuild, handlers.update). gr.skip() only for a field no state or default gives."""
    updates = page.updates({k: v for k, v in values.items() if k != "tab"}, lang)
    return [updates.get(component, gr.skip()) for component in page.fields.values()]
