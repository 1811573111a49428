"""The Engine and Compare scenes' kept batches (playground/common/kept_batches.py) on the tiny random Llama: a kept
batch is the live batch, only batches their settings determine are kept, a new model keeps none of the old one's,
and the Engine tab shows a kept batch in one update that says so."""

from __future__ import annotations

import gradio as gr

from model_service import BatchStep
from model_service.records.settings import Request, SamplingSettings
from playground.common.kept_batches import KeptBatches, KeptStep, keepable, timed
from playground.compare.columns import CompareRun, parse_comparison
from playground.compare.views import status_markdown as compare_status
from playground.engine import tab as engine
from playground.workshop.scene_batches import scene_batch, scene_batches
from playground.workshop.scenes import load, scene_paths

SEEDED = (Request("abc", SamplingSettings(temperature=0.8, seed=3), 6),
          Request("xyz", SamplingSettings(temperature=0.0), 4, stop=("q",)))
FRESH = (Request("abc", SamplingSettings(temperature=0.8), 5),)  # fresh randomness: every run its own


def tokens(steps) -> list[list[int]]:
    rows = None
    for step in steps:
        step = step.step if isinstance(step, KeptStep) else step
        if isinstance(step, BatchStep):
            rows = rows or [[] for _ in step.rows]
            for row, record in zip(rows, step.rows):
                if record is not None:
                    row.append(record.token_id)
    return rows


def test_a_kept_batch_is_the_live_batch_and_only_determined_batches_are_kept(tiny_service, monkeypatch):
    kept = KeptBatches()
    kept.warm(tiny_service, [(SEEDED, 10), (FRESH, 10)]).join(timeout=300)
    steps = kept.get(tiny_service, SEEDED, 10)
    assert tokens(steps) == tokens(tiny_service.generate_batch(SEEDED, top_n=10))
    assert all(a.seconds <= b.seconds for a, b in zip(steps, steps[1:]))  # each step's time after the start
    assert kept.get(tiny_service, SEEDED, 20) is None  # another number of candidates is another batch
    assert kept.get(tiny_service, FRESH, 10) is None and not keepable(FRESH) and keepable(SEEDED)
    monkeypatch.setattr(tiny_service, "epoch", tiny_service.epoch + 1)  # the host switched the model
    assert kept.get(tiny_service, SEEDED, 10) is None


def test_the_oldest_kept_batch_makes_way_and_an_unfinished_one_is_never_kept(tiny_service):
    kept = KeptBatches(limit=1)
    kept.warm(tiny_service, [(SEEDED, 10), (SEEDED[:1], 10)]).join(timeout=300)
    assert kept.get(tiny_service, SEEDED, 10) is None and kept.get(tiny_service, SEEDED[:1], 10) is not None
    cut = list(timed(tiny_service.generate_batch(SEEDED, top_n=10)))[:2]  # (Stop after two steps)
    kept.keep(tiny_service, SEEDED, 10, cut)
    assert kept.get(tiny_service, SEEDED, 10) is None


def test_closing_a_timed_batch_closes_the_batch():
    closed = []

    def batch():
        try:
            yield from range(5)
        finally:
            closed.append(True)

    steps = timed(batch())
    next(steps)
    steps.close()
    assert closed == [True]


def test_the_engine_tab_shows_a_kept_batch_in_one_update_that_says_so(tiny_service):
    rows = [["abc", 0.8, 0, 1, 0, "hf", "3", 6, ""], ["xyz", 0, 0, 1, 0, "hf", "", 4, "q"]]
    with gr.Blocks():
        c = engine.build_components()
    requests = tuple(engine.parse_table(rows)[1])
    kept = KeptBatches()
    live = list(engine.run(c, tiny_service, kept, rows, "en"))
    kept.warm(tiny_service, [(requests, engine.TOP_N)]).join(timeout=300)
    shown = list(engine.run(c, tiny_service, kept, rows, "en"))
    assert len(live) > 1 and len(shown) == 1
    assert shown[0][c.texts] == live[-1][c.texts]  # the same rows, tokens and stops
    assert "shown at once" in shown[0][c.status] and "shown at once" not in live[-1][c.status]
    assert shown[0][c.last_run].done and shown[0][c.last_run].replayed


def test_a_kept_comparison_says_so_once_it_is_shown():
    run = CompareRun(parse_comparison("abc", [[0.5, 0, 1, 0, "hf"], [1, 0, 1, 0, "hf"]], "3", 4), [[], []],
                     done=True, replayed=True)
    assert "shown at once" in compare_status(run, "en") and "hiện ngay" in compare_status(run, "vi")
    run.replayed = False
    assert "shown at once" not in compare_status(run, "en")


def test_the_engine_and_compare_scenes_batches_are_the_ones_their_runs_send():
    scenes = load(scene_paths())
    batches = scene_batches(scenes.scenes, ("en", "vi"))
    assert all(keepable(requests) for requests, _ in batches) and len(batches) == len(set(batches))
    engine_scene = scene_batch("engine", scenes.get("l13-engine").query, "en")
    assert engine_scene in batches and len(engine_scene[0]) == 6 and engine_scene[1] == engine.TOP_N
    assert scene_batch("engine", scenes.get("l13-engine").query, "vi") == engine_scene  # its prompts are its own
    compare_vi = scene_batch("compare", scenes.get("l13-compare-temperatures").query, "vi")
    assert compare_vi in batches and compare_vi[0][0].prompt == "Thủ đô của Pháp là"  # the lesson's, in vi
    assert [r.settings.temperature for r in compare_vi[0]] == [0.5, 1] and compare_vi[0][0].settings.seed == 3
    assert scene_batch("lab", scenes.get("l13-top-k").query, "en") is None
