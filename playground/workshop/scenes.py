"""Scenes: a lesson as an ordered list of one-click steps for a workshop room (no gradio here).

A scene is a tab, the settings that page shows (the same fields as a link, playground/workshop/links.py), an
optional section to scroll to (`focus`, an element id) and whether opening it starts the tab's run
(`run`: true for the tab's main button, or a button's element id), with a title and a one-paragraph caption for the room in every page language. Scenes are data:
assets/scenes/*.json hold the two lessons; a host adds their own file (app.py --scenes / NTP_SCENES) and
shares the page's link to a scene (?scene=<id>).

    {"lesson": {"en": "Lesson 10 ...", "vi": "Bài 10 ..."},
     "scenes": [{"id": "l10-tokens", "tab": "forward", "settings": {"fw_prompt": "..."}, "focus": "fw-tokens",
                 "run": false, "title": {"en": "...", "vi": "..."}, "caption": {"en": "...", "vi": "..."}}]}

A file is checked whole when it is loaded: a mistake stops the start with a message that names the file,
the scene and the field, rather than a scene that half-opens in front of a room.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from playground import limits

from ..common.i18n import LANGUAGES, language
from .caption_facts import Fact, parse_facts
from .links import COMPARE_COLUMNS, TABS, parse_query

SCENES_DIR = Path(__file__).resolve().parents[2] / "assets" / "scenes"
BUILT_IN = ("lesson10.json", "lesson13.json", "beyond.json")  # the lessons, then the samplers beyond them
ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")  # safe in a link, an element id and a dropdown value
KEYS = {"id", "tab", "settings", "focus", "run", "title", "caption", "facts"}
MAX_SCENES = limits.MAX_SCENES
RUN_BUTTONS = {"lab": "generate", "softmax": "lm-head-show", "engine": "engine-run", "compare": "compare-run",
               "forward": "fw-trace"}  # run: true


class SceneError(ValueError):
    """A scene file that cannot be shown; the message names the file, the scene and the field."""


@dataclass(frozen=True)
class Scene:
    id: str
    lesson: Mapping[str, str]  # language -> the lesson's name
    tab: str
    query: Mapping[str, str]  # the settings as link parameters (checked: links.parse_query finds no problem)
    title: Mapping[str, str]  # language -> text
    caption: Mapping[str, str]  # language -> Markdown (the host's text; the page escapes HTML)
    focus: str | None = None  # the element to scroll to (and open, if it is a closed accordion)
    run: str | None = None  # the element id of the button that opening the scene presses
    # the caption's {name}s, read from the scene's own run (caption_facts.py): true for whichever model serves
    facts: Mapping[str, Fact] = field(default_factory=dict)


    def text(self, what: str, lang) -> str:
        return getattr(self, what)[language(lang)]

    def label(self, lang) -> str:
        """How the picker names it: the lesson, then the scene."""
        return f"{self.lesson[language(lang)]} · {self.text('title', lang)}"

    def to_dict(self) -> dict:
        return {"id": self.id, "lesson": dict(self.lesson), "tab": self.tab, "query": dict(self.query),
                "title": dict(self.title), "caption": dict(self.caption), "focus": self.focus, "run": self.run,
                "facts": {name: fact.to_dict() for name, fact in self.facts.items()}}


@dataclass(frozen=True)
class SceneList:
    scenes: tuple[Scene, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.scenes)

    def ids(self) -> list[str]:
        return [s.id for s in self.scenes]

    def get(self, scene_id) -> Scene | None:
        return next((s for s in self.scenes if s.id == scene_id), None)

    def step(self, scene_id, by: int) -> Scene | None:
        """The scene `by` places after (before, if negative) `scene_id`, clamped to the list; the first
        one when scene_id is none of them; None when there are no scenes."""
        if not self.scenes:
            return None
        ids = self.ids()
        if scene_id not in ids:
            return self.scenes[0]
        return self.scenes[max(0, min(len(ids) - 1, ids.index(scene_id) + by))]

    def choices(self, lang) -> list[tuple[str, str]]:
        return [(s.label(lang), s.id) for s in self.scenes]


def _query_text(name: str, value) -> str:
    """A settings value as a link would carry it (numbers and booleans may be written as JSON's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if name == "engine" and isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    if (name == "toy_logits" or name in COMPARE_COLUMNS) and isinstance(value, list):
        return ",".join("" if x is None else str(x) for x in value)  # a Compare column: [0.5, 0, 1, 0, "hf"]
    if isinstance(value, (int, float, str)):
        return str(value)
    raise SceneError(f"{name} must be text, a number or true/false, got {type(value).__name__}")


def _texts(where: str, name: str, value) -> dict[str, str]:
    if not isinstance(value, dict) or any(not isinstance(value.get(code), str) or not value[code].strip()
                                          for code in LANGUAGES):
        raise SceneError(f"{where}: field '{name}' must give non-empty text for each language "
                         f"({', '.join(LANGUAGES)}), got {json.dumps(value, ensure_ascii=False)[:80]}")
    return {code: value[code].strip() for code in LANGUAGES}


def parse_scene(raw, lesson: Mapping[str, str], where: str) -> Scene:
    """One scene of a file; `where` names the file and the scene's place for messages."""
    if not isinstance(raw, dict):
        raise SceneError(f"{where}: a scene must be an object, got {type(raw).__name__}")
    scene_id = raw.get("id")
    if not isinstance(scene_id, str) or not ID.match(scene_id):
        raise SceneError(f"{where}: field 'id' must be lowercase letters, digits, '-' or '_' (at most 64), "
                         f"got {json.dumps(scene_id, ensure_ascii=False)}")
    where = f"{where} ({scene_id!r})"
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise SceneError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    tab = raw.get("tab")
    if tab not in TABS:
        raise SceneError(f"{where}: field 'tab' must be one of {', '.join(TABS)}, got {json.dumps(tab)}")
    settings = raw.get("settings", {})
    if not isinstance(settings, dict):
        raise SceneError(f"{where}: field 'settings' must be an object of link parameters")
    if settings.get("tab", tab) != tab:
        raise SceneError(f"{where}: field 'settings': tab {settings['tab']!r} is not the scene's tab {tab!r}")
    try:
        query = {name: _query_text(name, value) for name, value in settings.items() if name != "tab"}
    except SceneError as e:
        raise SceneError(f"{where}: field 'settings': {e}") from None
    _, problems = parse_query(query)
    if problems:
        raise SceneError(f"{where}: field 'settings': {problems[0]}")
    focus = raw.get("focus")
    if focus is not None and (not isinstance(focus, str) or not ID.match(focus)):
        raise SceneError(f"{where}: field 'focus' must be an element id (letters, digits, '-'), got {focus!r}")
    run = raw.get("run", False)
    if run is True:
        run = RUN_BUTTONS[tab]
    elif run is False:
        run = None
    elif not isinstance(run, str) or not ID.match(run):
        raise SceneError(f"{where}: field 'run' must be true, false or a button's element id, got {json.dumps(run)}")
    caption = _texts(where, "caption", raw.get("caption"))
    try:
        facts = parse_facts(raw.get("facts"), caption, where)
    except ValueError as e:
        raise SceneError(str(e)) from None
    if facts and (tab != "lab" or run != RUN_BUTTONS["lab"]):
        raise SceneError(f"{where}: field 'facts' reads the lab's run: the scene's tab must be lab, with run true")
    return Scene(scene_id, lesson, tab, query, _texts(where, "title", raw.get("title")), caption, focus, run, facts)


def parse_file(data, name: str) -> list[Scene]:
    """A scene file's JSON (already decoded); `name` is how messages call the file."""
    if not isinstance(data, dict) or not isinstance(data.get("scenes"), list) or not data["scenes"]:
        raise SceneError(f"{name}: a scene file is an object with a non-empty list 'scenes'")
    lesson = _texts(name, "lesson", data.get("lesson"))
    return [parse_scene(raw, lesson, f"{name}: scene {n}") for n, raw in enumerate(data["scenes"], start=1)]


def load(paths: Iterable[str | Path]) -> SceneList:
    """Every scene of the files, in order; ids are unique across them."""
    scenes: list[Scene] = []
    seen: dict[str, str] = {}
    for path in paths:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise SceneError(f"{path}: cannot read the scene file ({e.strerror or e})") from None
        except ValueError as e:
            raise SceneError(f"{path}: not JSON ({e})") from None
        for scene in parse_file(data, str(path)):
            if scene.id in seen:
                raise SceneError(f"{path}: scene id {scene.id!r} is already used in {seen[scene.id]}")
            seen[scene.id] = str(path)
            scenes.append(scene)
    if len(scenes) > MAX_SCENES:
        raise SceneError(f"at most {MAX_SCENES} scenes, got {len(scenes)}")
    return SceneList(tuple(scenes))


def scene_paths(extra: str = "") -> list[Path]:
    """The lessons' scenes, then the host's files (a comma-separated list: the --scenes flag, else NTP_SCENES,
    as the start's Config read them)."""
    return [SCENES_DIR / name for name in BUILT_IN] + [Path(p.strip()) for p in extra.split(",") if p.strip()]


__all__ = ["Scene", "SceneError", "SceneList", "load", "parse_file", "scene_paths"]
