"""The pipeline against the plain reference step (model_service/sampling/reference.py): a second oracle beside
transformers' warpers, for every order, on random rows; and the reference itself on the lesson's numbers."""

from __future__ import annotations

import random

import pytest
import torch

from model_service.records.settings import SamplingSettings
from model_service.sampling.draw import draw, make_generator
from model_service.sampling.pipeline import run_stages
from model_service.sampling.reference import reference_step

VOCAB = 300  # under the ranking window: the bar's order is the whole ranking's


def random_settings(rng: random.Random) -> SamplingSettings:
    return SamplingSettings(
        temperature=rng.choice([0.0, 0.3, 0.7, 1.0, 1.5]), top_k=rng.choice([0, 1, 5, 40, 299, 400]),
        top_p=rng.choice([1.0, 0.95, 0.6, 0.1, 0.001]), min_p=rng.choice([0.0, 0.01, 0.2, 0.9]),
        seed=rng.randrange(2**31), order=rng.choice(["hf", "vllm", "llama.cpp"]))


@pytest.mark.parametrize("round_", range(4))
def test_the_pipeline_matches_the_reference_step(round_):
    rng = random.Random(round_)
    torch.manual_seed(round_)
    settings = [random_settings(rng) for _ in range(24)]
    logits = torch.randn(len(settings), VOCAB) * rng.choice([1.0, 3.0, 8.0])
    stages = run_stages(logits, settings)
    tokens, _ = draw(stages, [s.greedy for s in settings], [make_generator(s.seed) for s in settings])
    for i, s in enumerate(settings):
        u = float(torch.rand((), generator=make_generator(s.seed)))
        final, token = reference_step(logits[i], s, u)
        assert torch.allclose(stages.probs["final"][i], final, atol=1e-6), (i, s)
        assert int(tokens[i]) == token, (i, s)


def test_the_reference_on_the_lesson():
    # the toy vocabulary's logits: Paris far ahead, the rest behind
    logits = torch.tensor([5.0, 3.2, 2.1, 1.0, 0.5])
    plain, _ = reference_step(logits, SamplingSettings())
    assert torch.allclose(plain, logits.softmax(-1))
    cold, _ = reference_step(logits, SamplingSettings(temperature=0.5))
    assert cold[0] > plain[0]  # T < 1 sharpens
    top2, _ = reference_step(logits, SamplingSettings(top_k=2))
    assert (top2[2:] == 0).all() and torch.isclose(top2.sum(), torch.tensor(1.0))
    nucleus, _ = reference_step(logits, SamplingSettings(top_p=0.5))
    assert (nucleus > 0).tolist() == [True, False, False, False, False]  # Paris alone holds more than half
    greedy, token = reference_step(logits, SamplingSettings(temperature=0))
    assert token == 0 and greedy[0] == 1
