"""Many draws from one frozen step: the vectorised draw against the one-at-a-time draw, and Pearson's
chi-square on hand-made 4-token distributions."""

from __future__ import annotations

import math

import pytest
import torch

from model_service.records.step import Token
from model_service.sampling.many_draws import chi_square, draw_many, sample_step
from model_service.sampling.pipeline import SamplingSettings, draw, make_generator, run_stages


def _pieces(i: int) -> Token:
    return Token(id=i, piece=f"t{i}")


@pytest.mark.parametrize("settings", [
    SamplingSettings(),
    SamplingSettings(temperature=0.7, top_k=3),
    SamplingSettings(top_p=0.8, order="vllm"),
    SamplingSettings(temperature=1.5, min_p=0.2, order="llama.cpp"),
])
def test_draw_many_picks_what_draw_picks_for_the_same_u(settings):
    # ties (1.0, 1.0) and a tail beyond a narrow window: the bar's layout matters
    logits = torch.tensor([[1.0, 3.0, 1.0, -2.0, 0.5, 2.0]])
    for width in (6, 2):
        stages = run_stages(logits, [settings])
        if width < 6:  # a narrow window puts tokens beyond it, laid out in id order as draw() does
            stages.window = stages.window[:, :width]
        seeds = range(200)
        expected = [int(draw(stages, [False], [make_generator(s)])[0][0]) for s in seeds]
        u = torch.tensor([float(torch.rand((), generator=make_generator(s))) for s in seeds], dtype=torch.float64)
        got = draw_many(stages.probs["final"][0], stages.window[0], u).tolist()
        assert got == expected


def test_draw_many_never_picks_a_removed_token_even_at_the_end_of_the_bar():
    final = torch.tensor([0.5, 0.0, 0.5, 0.0])
    window = torch.tensor([0, 2, 1, 3])
    u = torch.tensor([0.0, 0.4999, 0.5, 0.999999999, 1.0 - 1e-16], dtype=torch.float64)
    assert draw_many(final, window, u).tolist() == [0, 0, 2, 2, 2]


def test_chi_square_by_hand():
    # expected 25 each: (5² + 5² + 0 + 0) / 25 = 2.0 with 3 degrees of freedom; P(χ²₃ > 2) = 0.5724
    chi2, dof, p, bins = chi_square(torch.tensor([30, 20, 25, 25]), torch.tensor([0.25] * 4))
    assert (chi2, dof, bins) == (pytest.approx(2.0), 3, 4)
    assert p == pytest.approx(0.5724, abs=1e-4)
    # the 1 % critical value of χ²₃ is 11.345
    counts = torch.tensor([25 + 8, 25 - 8, 25 + 8, 25 - 8])  # chi2 = 4 * 64 / 25 = 10.24
    assert chi_square(counts, torch.tensor([0.25] * 4))[2] == pytest.approx(0.01663, abs=1e-4)


def test_small_expected_counts_are_pooled_and_an_undersized_pool_joins_the_smallest_bin():
    probs = torch.tensor([0.9, 0.06, 0.03, 0.01])  # n = 100: expected 90, 6, 3, 1 -> bins 90, 6 + (3 + 1)
    chi2, dof, p, bins = chi_square(torch.tensor([88, 7, 4, 1]), probs)
    assert (bins, dof) == (2, 1)
    assert chi2 == pytest.approx(2**2 / 90 + 2**2 / 10)
    probs = torch.tensor([0.5, 0.3, 0.1, 0.1])  # n = 100: every bin big enough
    chi2, dof, _, _ = chi_square(torch.tensor([50, 30, 10, 10]), probs)
    assert (chi2, dof) == (pytest.approx(0.0, abs=1e-9), 3)
    probs = torch.tensor([0.9, 0.04, 0.03, 0.03])  # n = 100: 90 alone, the rest pooled (10)
    assert chi_square(torch.tensor([90, 4, 3, 3]), probs)[3] == 2


def test_one_bin_is_nothing_to_test_and_a_draw_of_an_impossible_token_rejects():
    assert chi_square(torch.tensor([0, 100, 0, 0]), torch.tensor([0.0, 1.0, 0.0, 0.0])) == (0.0, 0, None, 1)
    chi2, dof, p, _ = chi_square(torch.tensor([45, 45, 0, 10]), torch.tensor([0.5, 0.5, 0.0, 0.0]))
    assert math.isinf(chi2) and p == 0.0


def test_ten_thousand_draws_fit_their_own_distribution_and_reject_a_wrong_one():
    logits = torch.tensor([[2.0, 1.7, 1.3, 0.6]])  # p ≈ 0.43, 0.32, 0.21, 0.10 (hf order, T = 1)
    stages = run_stages(logits, [SamplingSettings()])
    final = stages.probs["final"][0]
    wrong = torch.tensor([2.0, 1.7, 1.3, 0.8]).softmax(-1)  # one logit off by 0.2
    for seed in range(5):
        u = torch.rand(10_000, generator=make_generator(seed), dtype=torch.float64)
        counts = torch.bincount(draw_many(final, stages.window[0], u), minlength=4)
        assert chi_square(counts, final)[2] > 0.001
        assert chi_square(counts, wrong)[2] < 0.001


def test_sample_step_record():
    logits = torch.tensor([[2.0, 1.7, 1.3, 0.6, -1.0]])
    stages = run_stages(logits, [SamplingSettings(top_k=3)])
    record = sample_step(stages, 10_000, 7, 2, _pieces, step=4, token_id=1, forward_ms=12.5)
    assert [t.id for t in record.tokens] == [0, 1] and record.n == 10_000 and record.seed == 7
    assert sum(record.counts) + record.other_count == 10_000
    assert record.support == 3 and record.distinct == 3 and record.dof == 2
    assert record.probs[0] + record.probs[1] + record.other_prob == pytest.approx(1.0)
    assert 0.001 < record.p_value <= 1 and record.draw_ms > 0
    again = sample_step(stages, 10_000, 7, 2, _pieces, step=4, token_id=1, forward_ms=12.5)
    assert again.counts == record.counts  # seeded
    assert record.to_dict()["tokens"][0] == {"id": 0, "piece": "t0", "special": False, "bytes_hex": ""}
