"""The "Beyond the lesson" scenes' interventions, computed once in the background when the model is ready and shown
again at once, as the lab's scene runs are (playground/lab/replays.py).

Opening "Patch Italy into France" filled a grid of 150 cells (1.4 s on a 2-core CPU), "Steer a review" ran two
generations side by side (2-6 s), "Knock out one block's MLP" two passes: the room waited on each. Their results are
determined by the model and their inputs (the grid always; a knock-out's and a steered pair's draws by their seed, so
those scenes set one), so `warm` computes each scene's call once, in every language (a lesson prompt and the patch's
second prompt follow the page's), and `KeptInterventions` keeps the result, keyed by the model's name, its epoch (a
host's switch starts another) and the call. `serving(service)` is the service as the Intervene section calls it: a
call that is one of them is answered from the kept result, any other goes to the model.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from model_service.records.intervention import Knockout
from playground import limits

from ..common.i18n import LESSON_PROMPTS, PATCH_SOURCES, swapped_default
from ..common.kept import Kept
from ..common.lab_link import LINK_DEFAULTS
from ..lab.request import parse_request
from .intervene_patch import grid_cells

log = logging.getLogger(__name__)


def _plain(value):
    """A number as a key holds it: 12.0 (a slider's) and 12 are one key."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def determined(settings) -> bool:
    """Settings whose draws their seed decides (or none: greedy)."""
    return settings is not None and (settings.seed is not None or settings.temperature == 0)


@dataclass(frozen=True)
class Call:
    """One intervention as the section asks it, with the candidate left out (None: the top one, which the result
    names; a kept result answers a call that names it too)."""

    name: str  # "knock_out", "patch" or "steer"
    args: tuple

    @classmethod
    def knock_out(cls, prompt, target: Knockout, settings, chat) -> Call:
        target = Knockout(target.kind, _plain(target.block), _plain(target.head), target.mode)
        return cls("knock_out", (prompt, target, settings, bool(chat)))

    @classmethod
    def patch(cls, prompt, source, cells, chat) -> Call:
        return cls("patch", (prompt, source, tuple(tuple(c) for c in cells), bool(chat)))

    @classmethod
    def steer(cls, prompt, towards, away, block, scale, settings, max_new_tokens) -> Call:
        return cls("steer", (prompt, towards, away, _plain(block), float(scale), settings, max_new_tokens))

    def run(self, service):
        return getattr(service, self.name)(*self.args)


class KeptInterventions(Kept):
    """(model, epoch, call) -> its result, at most limits.SCENE_INTERVENTIONS, the oldest let go first."""

    def __init__(self, limit: int = limits.SCENE_INTERVENTIONS):
        super().__init__(limit)

    def get(self, service, call: Call, candidate=None):
        """The kept result of this call on the model serving now (for `candidate`: its own, or None), or None."""
        result = self.lookup(service, call)
        if result is None or candidate is None or call.name == "steer":
            return result
        try:
            return result if result.candidate.id == int(candidate) else None
        except (TypeError, ValueError):  # not a token id: the service names it
            return None

    def warm(self, service, scenes, langs: Iterable[str], after: threading.Thread | None = None) -> threading.Thread:
        """Compute each scene's call once, one after another, in a daemon thread started now: after `after` (the
        other scenes' runs) and the model are ready. A call that fails is skipped (the scene computes it live)."""

        def run_all():
            for call in scene_calls(service, scenes, langs):
                if self.get(service, call) is not None:
                    continue
                try:
                    self.store(service, call, call.run(service))
                except (ValueError, RuntimeError) as e:
                    log.info("scene intervention not kept (%s): %s", call.name, e)
            log.info("scene interventions kept: %d", self.count)

        return self.start_warming(service, "scene-interventions", run_all, after)

    def serving(self, service) -> KeptService:
        return KeptService(service, self)


class KeptService:
    """The service as the Intervene section calls it: a kept call answered at once, everything else the service's."""

    def __init__(self, service, kept: KeptInterventions):
        self._service, self._kept = service, kept

    def __getattr__(self, name):
        return getattr(self._service, name)

    def knock_out(self, prompt, target, settings=None, chat=False, candidate=None):
        kept = (self._kept.get(self._service, Call.knock_out(prompt, target, settings, chat), candidate)
                if determined(settings) and isinstance(target, Knockout) else None)
        return kept or self._service.knock_out(prompt, target, settings, chat, candidate)

    def patch(self, prompt, source, cells, chat=False, candidate=None):
        kept = self._kept.get(self._service, Call.patch(prompt, source, cells, chat), candidate)
        return kept or self._service.patch(prompt, source, cells, chat, candidate)

    def steer(self, prompt, towards, away, block, scale, settings=None, max_new_tokens=24):
        try:
            call = Call.steer(prompt, towards, away, block, scale, settings, max_new_tokens)
        except (TypeError, ValueError):  # a value the service will name
            call = None
        kept = self._kept.get(self._service, call) if call is not None and determined(settings) else None
        return kept or self._service.steer(prompt, towards, away, block, scale, settings, max_new_tokens)


def scene_calls(service, scenes, langs: Iterable[str]) -> list[Call]:
    """The call each "Beyond the lesson" scene's Run makes on the Forward pass tab, in each language, once (the patch's
    grid read from the model: call after it is ready)."""
    from ..workshop.links import parse_query
    from ..workshop.page_state import WHOLE_PAGE

    out: list[Call] = []
    for scene in scenes:
        if scene.tab != "forward" or scene.run not in ("iv-knock", "iv-patch", "iv-steer"):
            continue
        values, problems = parse_query(dict(scene.query))
        if problems:
            continue
        values = {**WHOLE_PAGE, **values}
        for lang in langs:
            try:
                call = _scene_call(service, scene.run, values, lang)
            except (ValueError, RuntimeError) as e:
                log.info("scene %s: no call kept (%s)", scene.id, e)
                continue
            if call is not None and call not in out:
                out.append(call)
    return out


def _scene_call(service, run: str, values: dict, lang: str) -> Call | None:
    prompt = values["fw_prompt"]
    if prompt in LESSON_PROMPTS.values():  # a lesson prompt follows the page's language (page_state.py)
        prompt = LESSON_PROMPTS[lang]
    chat = bool(values["fw_chat"])
    settings = parse_request(**{name: values.get(name, default) for name, default in LINK_DEFAULTS.items()
                                if name != "branch"}).settings
    if run == "iv-patch":  # the other language's default second prompt is read as this one's (intervene_patch.py)
        source = swapped_default(values["iv_source"], lang, PATCH_SOURCES) or values["iv_source"]
        return Call.patch(prompt, source, grid_cells(len(service.encode(prompt, chat)), service.info.num_layers), chat)
    if not determined(settings):  # its draws change with each press: nothing to keep
        return None
    if run == "iv-knock":
        head = values["iv_head"] if values["iv_kind"] == "head" else None
        return Call.knock_out(prompt, Knockout(values["iv_kind"], values["iv_block"], head, values["iv_mode"]),
                              settings, chat)
    return Call.steer(values["iv_steer_prompt"], values["iv_towards"], values["iv_away"], values["iv_steer_block"],
                      values["iv_scale"], settings, limits.STEER_TOKENS)


__all__ = ["Call", "KeptInterventions", "KeptService", "determined", "scene_calls"]
