"""The page's events as Gradio's page runs them: no trigger starts two server events that are "always_last". While
such an event runs, Gradio's page keeps a trigger that comes for it and, once it ends, dispatches that trigger again
to every event it starts: two of them on one trigger then restart each other for as long as their round trips
overlap (the panels under the run chart asked the server ~20 times a second for seconds, at rest). A trigger shared
by several server events makes them "multiple" (each trigger runs each once: a radio's clicks, the language's); a
page script on it (no server round trip) is never held back, so it never replays."""

from __future__ import annotations

import collections

from .test_progress import demo  # noqa: F401 (the page without a model, built once)


def shared_always_last(config: dict) -> dict:
    """(component, event) -> the server events it starts, where more than one of them is always_last."""
    names = {c["id"]: c["props"].get("elem_id") or c["type"] for c in config["components"]}
    started = collections.defaultdict(list)
    for dep in config["dependencies"]:
        for target, event in dep["targets"]:
            started[(target, event)].append(dep)
    return {f"{names.get(target, target)}.{event}": [d["api_name"] or d["id"] for d in deps]
            for (target, event), deps in started.items()
            if sum(d["backend_fn"] and d["trigger_mode"] == "always_last" for d in deps) > 1}


def test_no_trigger_starts_an_always_last_event_beside_another(demo):  # noqa: F811
    assert shared_always_last(demo.config) == {}


def test_the_check_finds_two_events_on_one_trigger():
    config = {"components": [{"id": 1, "type": "button", "props": {"elem_id": "go"}}],
              "dependencies": [{"id": i, "api_name": name, "targets": [[1, "click"]], "trigger_mode": mode,
                                "backend_fn": backend}
                               for i, (name, mode, backend) in enumerate([("a", "always_last", True),
                                                                          (None, "always_last", False),
                                                                          ("b", "multiple", True)])]}
    assert shared_always_last(config) == {}  # one of them replays: it runs the others once more, and stops
    config["dependencies"][2]["trigger_mode"] = "always_last"
    assert shared_always_last(config) == {"go.click": ["a", 1, "b"]}
