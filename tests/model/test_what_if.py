"""The live lab's what-if on the tiny random Llama (model_service/engine/what_if.py, engine/kept.py): a step of a
kept run redrawn with other settings is the run's own record under the run's settings, the pipeline on the step's
own logits under any other, and what a run with those settings records at that step after the same tokens; steps
let go are recomputed and said to be."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from model_service.engine.kept import KeptRuns, Missing
from model_service.records.validation import InputError
from model_service.sampling.pipeline import SamplingSettings, pipeline

PROMPT = "The capital of France is"
TIMINGS = ("forward_ms", "sampling_ms", "capture_ms", "batch_size")


def shown(record) -> dict:
    """A record's fields without its timings (a what-if takes no forward pass and is never batched)."""
    return {k: v for k, v in record.to_dict().items() if k not in TIMINGS}


def random_settings(rng: random.Random, seed: int) -> SamplingSettings:
    order = rng.choice(["hf", "vllm", "llama.cpp"])
    knobs = dict(temperature=rng.choice([0.0, 0.5, 1.0, 1.5]), top_k=rng.choice([0, 5, 40]),
                 top_p=rng.choice([1.0, 0.9, 0.5]), min_p=rng.choice([0.0, 0.05]),
                 repetition_penalty=rng.choice([1.0, 1.3]), seed=seed, order=order)
    if order != "hf":
        knobs["frequency_penalty"] = rng.choice([0.0, 0.5])
    if order == "llama.cpp":
        knobs |= dict(xtc_probability=rng.choice([0.0, 0.5]), xtc_threshold=0.1, dry_multiplier=rng.choice([0.0, 0.8]))
    if order == "hf":
        knobs["no_repeat_ngram_size"] = rng.choice([0, 2])
    return SamplingSettings(**knobs)


def kept_run(service, key, settings, n=8, prompt=PROMPT):
    return list(service.generate(prompt, settings, max_new_tokens=n, ignore_eos=False, keep=key))


def test_a_kept_step_under_the_runs_own_settings_is_the_runs_own_record(tiny_service):
    rng = random.Random(7)
    for case in range(12):
        settings = random_settings(rng, seed=case)
        run = kept_run(tiny_service, f"own-{case}", settings)
        for k in range(len(run)):
            taken = [r.token_id for r in run[:k]]
            what = tiny_service.what_if(PROMPT, settings, 8, continue_from=taken, keep=f"own-{case}")
            assert what.logits_from == "kept", (case, k)
            assert shown(what.record) == shown(run[k]), (case, k, settings)


def test_the_what_if_of_random_steps_under_random_settings_is_the_pipeline_on_the_steps_logits(tiny_service):
    rng = random.Random(11)
    for case in range(20):
        first, then = random_settings(rng, seed=100 + case), random_settings(rng, seed=100 + case)
        run = kept_run(tiny_service, "random", first)
        k = rng.randrange(len(run))
        taken = [r.token_id for r in run[:k]]
        what = tiny_service.what_if(PROMPT, then, 8, continue_from=taken, keep="random").record
        logits, u = tiny_service.kept.find("random", tiny_service.encode(PROMPT), taken)
        ids = tiny_service.encode(PROMPT)
        from model_service.engine.step import RowState

        row = RowState(tiny_service.loaded, then, 8, (), taken, seed=then.seed, device="cpu")
        row.prompt = tuple(ids)
        stages = dict(pipeline(logits, then, context=row.context()))
        final = stages[then.stages[-1]] if then.stages[-1] in stages else list(stages.values())[-1]
        expected = [float(final[c.id]) for c in what.candidates]
        assert list(what.stages[-1].probs) == pytest.approx(expected, abs=2e-6), (case, then)
        # the same step of a run with these settings after the same tokens (its logits recomputed by a prefill:
        # equal up to round-off)
        direct = next(iter(tiny_service.generate(PROMPT, then, max_new_tokens=8, continue_from=taken)))
        assert [c.id for c in direct.candidates[:5]] == [c.id for c in what.candidates[:5]]
        assert list(direct.stages[-1].probs) == pytest.approx(list(what.stages[-1].probs), abs=1e-4)
        assert direct.draw.u == what.draw.u


def test_the_runs_chips_are_unchanged_by_what_ifs_and_a_continued_run_keeps_the_steps_before(tiny_service):
    settings = SamplingSettings(temperature=1.0, seed=3)
    run = kept_run(tiny_service, "chips", settings)
    for t in (0.2, 0.7, 1.8, 0.0):
        tiny_service.what_if(PROMPT, dataclasses.replace(settings, temperature=t), 8,
                             continue_from=[r.token_id for r in run[:4]], keep="chips")
    again = kept_run(tiny_service, "chips-again", settings)
    assert [r.token_id for r in again] == [r.token_id for r in run]
    # Step: a run continued under the same key keeps the kept steps before it
    taken = [r.token_id for r in run[:5]]
    list(tiny_service.generate(PROMPT, settings, max_new_tokens=8, continue_from=taken, keep="chips"))
    for k in range(8):
        found = tiny_service.kept.find("chips", tiny_service.encode(PROMPT), [r.token_id for r in run[:k]])
        assert not isinstance(found, Missing), k


def test_a_step_never_kept_is_recomputed_once_and_kept_for_the_next_move(tiny_service):
    settings = SamplingSettings(temperature=1.2, seed=9)
    run = list(tiny_service.generate(PROMPT, settings, max_new_tokens=6))  # not kept: a branch, a run file
    taken = [r.token_id for r in run[:3]]
    first = tiny_service.what_if(PROMPT, settings, 6, continue_from=taken, keep="later")
    assert first.logits_from == "not_kept" and first.record.forward_ms > 0
    assert first.record.token_id == run[3].token_id and first.record.draw.u == run[3].draw.u
    second = tiny_service.what_if(PROMPT, dataclasses.replace(settings, temperature=0.3), 6, continue_from=taken,
                                  keep="later")
    assert second.logits_from == "kept" and second.record.forward_ms == 0


def test_the_caps_let_the_oldest_steps_then_the_oldest_pages_go_and_say_which():
    store = KeptRuns(page_bytes=3 * 40, total_bytes=2 * 3 * 40)
    row = torch.zeros(10)  # 40 bytes a step
    for page in ("a", "b", "c"):
        store.start(page, [1], [])
        for step in range(5):
            store.add(page, step, step, row, 0.5)
    assert store.bytes <= 2 * 3 * 40
    assert store.find("a", [1], []) is Missing.ROOM  # the page used longest ago
    assert store.find("c", [1], []) is Missing.PAGE  # its oldest steps went
    assert not isinstance(store.find("c", [1], [0, 1, 2, 3]), Missing)
    assert store.find("c", [2], []) is Missing.NOT_KEPT  # another prompt


@pytest.mark.parametrize("keep", ["has space", "x" * 65, 12, "<b>"])
def test_a_bad_keep_key_is_named(tiny_service, keep):
    with pytest.raises(InputError, match="keep"):
        tiny_service.what_if(PROMPT, None, 4, keep=keep)
