"""The page's state as a query, and back: one place that knows which component each link field sets.

Links (playground/workshop/links.py), scenes (scenes.py) and whatever else moves a whole page (a room following
its host) go through `PageState`:

    state.apply_state(query, lang) -> ({component: update}, problems)   # a link's, a scene's, a host's
    state.current_state(*values) -> {field: value}                      # values of state.inputs, in order

Built inside the Blocks context from the dicts the tab builders return; the gr.State `tab` tracks the tab
on screen (each Tab's select event writes it, and apply_state does).
"""

from __future__ import annotations

from collections.abc import Mapping

import gradio as gr

from ..common.i18n import LESSON_PROMPTS, language
from ..compare import columns as compare
from ..engine.table import table_rows, table_value
from ..softmax.toy import parse_rows
from ..softmax.toy_panel import SPACE_MARK
from .links import DEFAULTS, FIELDS, TABS, compare_rows, parse_query, toy_defaults, toy_rows_of

LESSON_FIELDS = ("prompt", "fw_prompt", "compare_prompt")  # a scene's lesson prompt follows the page's language
# what a whole page's query (a scene's) sets where it names nothing: every field's default, the lesson's prompt
WHOLE_PAGE = {**{name: value for name, value in DEFAULTS.items() if name != "tab"},
              **{name: LESSON_PROMPTS["en"] for name in LESSON_FIELDS}}


class PageState:
    """fields: link field -> component; tabs: the page's gr.Tabs; tab_items: tab id -> gr.Tab."""

    def __init__(self, fields: Mapping[str, gr.components.Component], tabs: gr.Tabs, tab_items: Mapping[str, gr.Tab]):
        self.fields = dict(fields)
        self.tabs, self.tab_items = tabs, dict(tab_items)
        self.tab = gr.State("lab")  # the tab on screen
        for tab_id, item in tab_items.items():
            item.select(lambda t=tab_id: t, None, self.tab, api_visibility="private", queue=False,
                        show_progress="hidden")

    @property
    def inputs(self) -> list:
        """What current_state reads, in its order (wire with preprocess=False: raw values)."""
        return [self.tab, *self.fields.values()]

    @property
    def outputs(self) -> list:
        """Every component apply_state may set."""
        return [self.tabs, self.tab, *self.fields.values()]

    def apply_state(self, query: Mapping[str, str], lang=None, lesson_follows_language: bool = False,
                    whole: bool = False) -> tuple[dict, list[str]]:
        """A query's fields as updates of their components; problems (each names its field, in the query's
        language, not yet escaped) for what was left as it was. lesson_follows_language: a lesson's prompt
        becomes `lang`'s version (a scene's, written once for both languages); a link's prompt stays as the
        host wrote it. whole: the query is the whole page (a scene's): every field it does not name goes back to its
        default (links.DEFAULTS; the forward tab's block, which depends on the model, stays), so nothing of the page
        before is left beside it."""
        values, problems = parse_query(query)
        if whole:
            values = {**WHOLE_PAGE, **values}
        return self.updates(values, lang, lesson_follows_language), problems

    def updates(self, values: Mapping, lang=None, lesson_follows_language: bool = False) -> dict:
        """Parsed field values (links.parse_query) -> {component: value}."""
        out = {}
        for name, value in values.items():
            if name == "tab":
                out |= {self.tabs: gr.Tabs(selected=value), self.tab: value}
                continue
            if name not in self.fields:
                continue
            if lesson_follows_language and name in LESSON_FIELDS and value in LESSON_PROMPTS.values():
                value = LESSON_PROMPTS[language(lang)]
            elif name == "toy_logits":
                value = toy_rows_of(value)
            elif name == "engine":
                value = table_value(value, language(lang))
            elif name == "compare_table":
                value = compare.table_value(value, language(lang))
            out[self.fields[name]] = value
        return out

    def current_state(self, tab, *values) -> dict:
        """The raw values of `inputs` -> {field: value} for links.make_query. The forward tab's block is
        kept only while that tab is shown (its default, the middle block, depends on the model); the Compare tab's
        seed, length and table only as Run would take them."""
        out = {"tab": tab if tab in TABS else "lab"}
        for name, value in zip(self.fields, values):
            if name == "toy_logits":
                value = _toy_logits(value)
            elif name == "engine":
                try:
                    value = table_rows(value)
                except ValueError:
                    value = None
            elif name in ("fw_block", "iv_block") and out["tab"] != "forward":
                value = None
            elif name == "compare_table":
                value = compare_rows(value)
            elif name in ("compare_seed", "compare_max_new"):
                value = _checked(name, value)
            out[name] = value
        return out


def _checked(name: str, value):
    """A control's value as its link field (links.FIELDS); None (left out of the link) where Run would refuse it."""
    try:
        return FIELDS[name](value)
    except ValueError:
        return None


def _toy_logits(table) -> list[float] | None:
    """The toy table's logits, when its tokens are still the toy vocabulary's (a link carries logits only)."""
    rows = table.get("data") if isinstance(table, dict) else table
    try:
        tokens, logits = parse_rows(rows)
    except (ValueError, TypeError):
        return None
    tokens = [" " + t[1:] if t.startswith(SPACE_MARK) else t for t in tokens]
    return logits if tokens == toy_defaults()[0] else None


__all__ = ["PageState"]
