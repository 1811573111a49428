"""Sampling a frozen step many times on the tiny random Llama: the sampler draws what its distribution
says (chi-square at alpha = 0.001, 10,000 draws, 20 random settings), a wrong distribution is rejected,
and the recomputed step is the run's own step."""

from __future__ import annotations

import random

import pytest
import torch

from model_service import limits
from model_service.records.step import json_size
from model_service.records.validation import InputError
from model_service.sampling.many_draws import chi_square, draw_many
from model_service.sampling.pipeline import SamplingSettings, make_generator, run_stages

ALPHA = 0.001
PROMPTS = ["Hello", "The capital of France is", "Xin chào", "1 2 3"]


def random_settings(rng: random.Random) -> SamplingSettings:
    return SamplingSettings(
        temperature=round(rng.uniform(0.3, 2.0), 2), top_k=rng.choice([0, 0, 5, 40, 120]),
        top_p=rng.choice([1.0, 1.0, 0.9, 0.6]), min_p=rng.choice([0.0, 0.0, 0.02, 0.1]),
        seed=rng.randrange(1 << 30), order=rng.choice(["hf", "vllm", "llama.cpp"]),
    )


def test_twenty_random_settings_are_not_rejected_and_each_step_is_the_runs_own(tiny_service):
    rng = random.Random(2026)
    tested = 0
    for case in range(60):
        if tested == 20:
            break
        settings, prompt = random_settings(rng), rng.choice(PROMPTS)
        run = list(tiny_service.generate(prompt, settings, max_new_tokens=4, ignore_eos=True))
        step = rng.randrange(len(run))
        taken = [r.token_id for r in run[:step]]
        many = tiny_service.sample_many(prompt, settings, continue_from=taken, n=10_000, seed=case)
        assert many.step == step and many.token_id == run[step].token_id, (case, settings)
        if many.support == 1:  # the filters left one token: every draw is it, nothing to test
            assert many.counts == (10_000,) and many.p_value is None
            continue
        assert many.dof >= 1 and many.p_value > ALPHA, (case, settings, many.chi2, many.dof)
        tested += 1
        assert sum(many.counts) + many.other_count == 10_000
        assert many.distinct <= many.support == run[step].stage("final").kept_count
        final = run[step].stage("final").probs
        assert list(many.probs) == pytest.approx(final[: len(many.probs)], abs=1e-5)
    assert tested == 20


def test_a_deliberately_wrong_distribution_is_rejected(tiny_service):
    ids = tiny_service.encode("The capital of France is")
    with torch.inference_mode():
        logits = tiny_service.model(torch.tensor([ids])).logits[:, -1].float()
    right = run_stages(logits, [SamplingSettings(temperature=1.0)])
    wrong = run_stages(logits, [SamplingSettings(temperature=1.25)])  # a quarter hotter than what was drawn
    u = torch.rand(10_000, generator=make_generator(0), dtype=torch.float64)
    counts = torch.bincount(draw_many(right.probs["final"][0], right.window[0], u), minlength=logits.shape[-1])
    assert chi_square(counts, right.probs["final"][0])[2] > ALPHA
    assert chi_square(counts, wrong.probs["final"][0])[2] < ALPHA


def test_greedy_has_one_bin_and_every_draw_is_the_argmax(tiny_service):
    run = list(tiny_service.generate("Hello", SamplingSettings(temperature=0), max_new_tokens=2))
    many = tiny_service.sample_many("Hello", SamplingSettings(temperature=0), continue_from=[run[0].token_id], n=500)
    assert many.token_id == run[1].token_id and many.counts == (500,) and many.p_value is None
    assert many.distinct == many.support == 1


def test_bad_draw_counts_name_the_field(tiny_service):
    for n in (limits.MIN_MANY_DRAWS - 1, limits.MAX_MANY_DRAWS + 1, "many", 1.5):
        with pytest.raises(InputError, match="draws"):
            tiny_service.sample_many("Hello", SamplingSettings(), n=n)
    with pytest.raises(ValueError, match="continue_from"):
        tiny_service.sample_many("Hello", SamplingSettings(), continue_from=[10**9])


def test_step_records_carry_the_candidates_raw_logits_and_stay_small(tiny_service):
    run = list(tiny_service.generate("Hello", SamplingSettings(temperature=0.8, seed=1), max_new_tokens=3))
    ids = tiny_service.encode("Hello")
    with torch.inference_mode():
        logits = tiny_service.model(torch.tensor([ids])).logits[0, -1].float()
    first = run[0]
    assert len(first.logits) == len(first.candidates)
    assert list(first.logits) == pytest.approx(logits[[t.id for t in first.candidates]].tolist(), rel=1e-4, abs=1e-4)
    assert 0 < first.capture_ms <= first.sampling_ms
    assert all(json_size(r) <= 8192 for r in run)
    info = tiny_service.info
    assert info.head_bytes == info.vocab_size * info.hidden_size * 4  # float32 head
