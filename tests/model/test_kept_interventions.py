"""The interventions' scenes kept at start (playground/forward/kept_interventions.py) on the embedded model: each
"Beyond the lesson" scene's call is computed once, the Intervene section's same call is answered from it with no
model work, a call for another candidate, other settings or a new model is the model's, and settings whose draws
change with each press are never kept."""

from __future__ import annotations

from dataclasses import replace

import pytest

from model_service.records.intervention import Knockout
from model_service.records.settings import SamplingSettings
from playground.forward.intervene_patch import grid_cells
from playground.forward.kept_interventions import Call, KeptInterventions, scene_calls
from playground.workshop.scenes import load, scene_paths

PROMPT, SOURCE = "The capital of France is", "The capital of Italy is"


class Counting:
    """The service, counting the interventions that reach it."""

    def __init__(self, service):
        self.service, self.calls = service, []

    def __getattr__(self, name):
        attr = getattr(self.service, name)
        if name in ("knock_out", "patch", "steer"):
            return lambda *args: (self.calls.append(name), attr(*args))[1]
        return attr


@pytest.fixture(scope="module")
def kept(embedded):
    kept = KeptInterventions()
    kept.warm(embedded, load(scene_paths()).scenes, ["en"]).join(timeout=600)
    return kept


def test_every_intervention_scene_is_kept_and_the_sections_same_call_reaches_no_model(embedded, kept):
    names = sorted(c.name for c in scene_calls(embedded, load(scene_paths()).scenes, ["en"]))
    assert names == ["knock_out", "patch", "steer"] and kept.count == 3
    counting = Counting(embedded)
    serving = kept.serving(counting)
    grid = grid_cells(len(embedded.encode(PROMPT, False)), embedded.info.num_layers)
    patched = serving.patch(PROMPT, SOURCE, grid, False, None)
    assert counting.calls == [] and len(patched.cells) == 150
    assert serving.patch(PROMPT, SOURCE, grid, False, patched.candidate.id) is patched  # the top one, named
    live = embedded.patch(PROMPT, SOURCE, grid, False, None)
    assert replace(live, ms=0) == replace(patched, ms=0)  # kept = what the model says now
    serving.patch(PROMPT, SOURCE, grid, False, patched.source_answer.id)  # another candidate: the model's
    assert counting.calls == ["patch"]
    seeded = SamplingSettings(seed=7)
    knocked = serving.knock_out(PROMPT, Knockout("mlp", 12.0, None, "zero"), seeded, False, None)  # a slider's 12.0
    assert counting.calls == ["patch"] and knocked.target.block == 12
    serving.knock_out(PROMPT, Knockout("mlp", 12, None, "zero"), replace(seeded, seed=8), False, None)
    assert counting.calls == ["patch", "knock_out"]


def test_draws_that_change_with_each_press_are_never_kept_and_a_new_model_keeps_nothing(embedded, kept, monkeypatch):
    fresh = SamplingSettings()  # no seed, T 1: each press its own draw
    call = Call.knock_out(PROMPT, Knockout("mlp", 12, None, "zero"), fresh, False)
    kept.store(embedded, call, "a result")
    counting = Counting(embedded)
    kept.serving(counting).knock_out(PROMPT, Knockout("mlp", 12, None, "zero"), fresh, False, None)
    assert counting.calls == ["knock_out"]
    monkeypatch.setattr(embedded, "epoch", getattr(embedded, "epoch", 0) + 1, raising=False)  # a host's switch
    grid = grid_cells(len(embedded.encode(PROMPT, False)), embedded.info.num_layers)
    assert kept.get(embedded, Call.patch(PROMPT, SOURCE, grid, False)) is None
