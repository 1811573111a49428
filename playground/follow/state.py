"""A page's state as a room shares it: a flat dict of link fields (text, as a link carries them), plus the tab
and the step. The host's page makes one; a follower's page checks it like a link before applying it.

Today the state is the lab's settings (playground/lab/deep_link.py), the selected tab and the lab's step
(the host's scrubber). A richer page state (every tab's settings) plugs in here: `page_state` and
`parse_state` are the only two functions the room knows.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from model_service import limits, validation

from ..common.errors import in_language
from ..lab.deep_link import CONTROLS, LINK_DEFAULTS, make_query, parse_query
from ..links import TABS

ROOM_FIELDS = ("tab", "step")  # what a room adds to a link's fields


def page_state(values: dict, tab, step) -> dict:
    """The state a host's page publishes: the lab's controls (by CONTROLS name) as a link writes them (defaults
    left out), the tab id and the step the scrubber shows (None when the page has no finished run)."""
    state = dict(parse_qsl(make_query(values), keep_blank_values=True))
    state["tab"] = tab if tab in TABS else TABS[0]
    if step is not None:
        state["step"] = str(step)
    return state


def parse_state(state, lang=None) -> tuple[dict, str, int | None, list[str]]:
    """(lab values: every CONTROLS name, defaults where the state leaves one out; tab id; step or None; problems).
    Checked like a link: a bad field is reported (in `lang`) and keeps its default, never applied as given."""
    if not isinstance(state, dict) or len(str(state)) > limits.MAX_ROOM_STATE_CHARS:
        return {name: LINK_DEFAULTS[name] for name in CONTROLS}, TABS[0], None, ["state"]
    fields = {k: v for k, v in state.items() if k not in ROOM_FIELDS and isinstance(v, str)}
    values, problems = parse_query(fields | {"lang": lang} if lang else fields)
    try:
        tab = validation.choice("tab", state.get("tab"), TABS)
    except ValueError as e:
        problems.append(in_language(e, lang))
        tab = TABS[0]
    step = None
    if state.get("step") is not None:
        try:
            step = validation.number("step", state["step"], integer=True, low=0, high=limits.MAX_NEW_TOKENS)
        except ValueError as e:
            problems.append(in_language(e, lang))
    return {name: values.get(name, LINK_DEFAULTS.get(name)) for name in CONTROLS}, tab, step, problems
