"""The scenes' lab runs, computed once in the background when the model is ready and shown again at once.

A lab scene runs the model when it opens (7-12 s on a 2-core CPU before this): a host walking the room through the
scenes waited on every one. Each lab scene's run is a seeded (or greedy) request, so its records are determined by
the model and the request: `warm` runs each one once, in the page's language and in Vietnamese where its prompt is the
lesson's, and `Replays` keeps the records, keyed by the model's name, its epoch (a host's switch starts another) and
the request. The lab's Generate shows kept records at once when its request is one of them (its status line says
so); any other request runs live, and so does every scene after a host switches the model (its runs are kept for the
model that served when the page started). The service keeps each such run's logits too (under `kept_as`'s name), so a
knob moved after a scene's run redraws the step with no forward pass. The kept records are a solo run's: in a busy
room under the default arithmetic a live run can differ by round-off (the Batch effect panel shows how often).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable

from model_service.records.step import StepRecord
from playground import limits

from ..common.i18n import LESSON_PROMPTS
from ..common.kept import Kept
from ..common.lab_link import LINK_DEFAULTS
from .deep_link import parse_query
from .request import RunRequest, parse_request

log = logging.getLogger(__name__)

# scenes whose point is the live run itself: "fix the seed and the same tokens come again" (a learner presses
# Generate twice), and a seed in a busy room
LIVE_SCENES = ("l13-seed", "l13-busy-room")


def replayable(request: RunRequest) -> bool:
    """A request whose records its settings determine: a seed, or temperature 0 (greedy: no draw decides)."""
    return request.settings.seed is not None or request.settings.temperature == 0


def scene_request(query: dict, lang: str) -> RunRequest | None:
    """The lab's request a scene's settings make (every control it does not name at its default, as opening it sets
    them), its lesson prompt in `lang`; None for settings a link would refuse."""
    values, problems = parse_query(dict(query))
    if problems:
        return None
    controls = {name: value for name, value in {**LINK_DEFAULTS, **values}.items() if name != "branch"}
    if controls["prompt"] in LESSON_PROMPTS.values():
        controls["prompt"] = LESSON_PROMPTS[lang]
    try:
        return parse_request(**controls)
    except ValueError:
        return None


class Replays(Kept):
    """Kept runs (model, epoch, request) -> records, at most limits.SCENE_REPLAYS, the oldest let go first."""

    def __init__(self, limit: int = limits.SCENE_REPLAYS):
        super().__init__(limit)

    key = staticmethod(Kept.key_of)

    def get(self, service, request: RunRequest) -> tuple | None:
        """The kept records of this request on the model serving now, or None."""
        return self.lookup(service, request)

    def kept_as(self, service, request: RunRequest) -> str:
        """The name the service keeps this request's logits under (generate(..., keep=)): a page that shows the kept
        run asks its what-ifs of them, with no forward pass. "" while the model cannot say its name."""
        key = self.key(service, request)
        return "" if key is None else "replay:" + hashlib.sha1(repr(key).encode()).hexdigest()[:24]

    def keep(self, service, request: RunRequest, records) -> None:
        """Keep a whole run (one that ended)."""
        records = tuple(records)
        if records and records[-1].stop_reason is not None:
            self.store(service, request, records)

    def records(self, service, request: RunRequest) -> tuple | None:
        """The kept records of this request, or its run now (kept for the next ask: a scene's Generate); None if the
        model cannot run it (loading, a switch under way, a request it refuses)."""
        kept = self.get(service, request)
        if kept is not None or not replayable(request):
            return kept
        try:
            records = [r for r in service.generate(request.prompt, request.settings, request.max_new_tokens,
                                                   request.stop, request.chat, keep=self.kept_as(service, request))
                       if isinstance(r, StepRecord)]
        except (ValueError, RuntimeError) as e:
            log.info("scene run not computed (%s): %s", request.prompt[:30], e)
            return None
        self.keep(service, request, records)
        return tuple(records)

    def warm(self, service, requests: Iterable[RunRequest]) -> threading.Thread:
        """Run each replayable request once, one after another, in a daemon thread started now: after the model is
        ready, as any page's run (in the room's batch). A request that fails is skipped (the page runs it live)."""

        def run_all():
            for request in requests:
                if not replayable(request) or self.get(service, request) is not None:
                    continue
                try:
                    records = list(service.generate(request.prompt, request.settings, request.max_new_tokens,
                                                    request.stop, request.chat, keep=self.kept_as(service, request)))
                except (ValueError, RuntimeError) as e:
                    log.info("scene run not kept (%s): %s", request.prompt[:30], e)
                    continue
                self.keep(service, request, records)
            log.info("scene runs kept: %d", self.count)

        return self.start_warming(service, "scene-replays", run_all)


def scene_runs(service, replays: Replays):
    """(scene, lang, compute=True) -> the records of a lab scene's run in `lang` (kept, or run now if `compute`),
    None for a scene whose run is not determined by its settings or that the model cannot run: what a caption's
    facts read (workshop/caption_facts.py)."""

    def records_of(scene, lang: str, compute: bool = True):
        request = scene_request(scene.query, lang)
        if request is None or not replayable(request):
            return None
        return replays.records(service, request) if compute else replays.get(service, request)

    return records_of


def scene_requests(scenes, langs: Iterable[str]) -> list[RunRequest]:
    """Every lab scene's request that can be kept, in each language (a lesson prompt differs by language), once."""
    out: list[RunRequest] = []
    for scene in scenes:
        if scene.tab != "lab" or scene.run != "generate" or scene.id in LIVE_SCENES:  # (the greedy loop has its box)
            continue
        for lang in langs:
            request = scene_request(scene.query, lang)
            if request is not None and replayable(request) and request not in out:
                out.append(request)
    return out


__all__ = ["Replays", "replayable", "scene_request", "scene_requests", "scene_runs"]
