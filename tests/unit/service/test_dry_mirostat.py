"""DRY, mirostat and a custom chain: DRY's Z-algorithm against a brute-force search, llama.cpp's whole chain with
both against the plain oracle (oracles.py), small rows that say why each token is penalised or kept, mirostat's mu
update, and a custom chain that runs the stages in the learner's order."""

from __future__ import annotations

import math
import random

import pytest
import torch

from model_service.records.settings import SamplingSettings, parse_settings, settings_from
from model_service.sampling.penalties import dry_penalties
from model_service.sampling.pipeline import pipeline, run_stages

from .oracles import ORACLES, ref_dry
from .test_sampling import assert_stages_match, random_logits


def test_dry_matches_a_brute_force_search_over_random_contexts():
    rng = random.Random(0)
    for trial in range(400):
        tokens = [rng.randrange(4 if trial % 2 else 8) for _ in range(rng.randrange(0, 60))]
        breakers = frozenset(rng.sample(range(8), rng.randrange(0, 2)))
        s = SamplingSettings(order="llama.cpp", dry_multiplier=rng.choice([0.5, 1.0]), dry_base=rng.choice([1.0, 1.75]),
                             dry_allowed_length=rng.randrange(1, 4), dry_penalty_last_n=rng.choice([-1, 5, 20]))
        got = dry_penalties(tokens, breakers, s.dry_multiplier, s.dry_base, s.dry_allowed_length, s.dry_penalty_last_n)
        want = ref_dry(tokens, breakers, s)
        assert got.keys() == want.keys(), (tokens, breakers, s)
        for t in got:
            assert math.isclose(got[t], want[t], rel_tol=1e-12), (tokens, t)


def test_dry_penalises_the_token_that_would_extend_a_repeat_by_how_long_it_is():
    # "1 2 3 9 ... 1 2 3": emitting 9 again would repeat "1 2 3 9": the repeat is 3 long, one past the allowed 2
    assert dry_penalties([1, 2, 3, 9, 5, 1, 2, 3], frozenset(), 0.8, 1.75, 2, -1) == {9: pytest.approx(0.8 * 1.75)}
    # a repeat of 1 token is below the allowed length: nothing
    assert dry_penalties([1, 9, 5, 1], frozenset(), 0.8, 1.75, 2, -1) == {}
    # the longest repeat a token would extend counts: "2 3" -> 7 (2 long), "1 2 3" -> 9 (3 long)
    got = dry_penalties([2, 3, 7, 1, 2, 3, 9, 1, 2, 3], frozenset(), 1.0, 2.0, 2, -1)
    assert got == {7: 1.0, 9: 2.0}
    # a breaker ends a repeat: after "\n" (token 4) only the tokens since it can repeat
    assert dry_penalties([1, 2, 3, 9, 4, 2, 3], frozenset({4}), 1.0, 2.0, 2, -1) == {9: 1.0}
    assert dry_penalties([1, 2, 3, 9, 2, 4, 3], frozenset({4}), 1.0, 2.0, 2, -1) == {}
    # a breaker token is never penalised, and the window bounds the search
    assert dry_penalties([1, 2, 4, 5, 1, 2], frozenset({4}), 1.0, 2.0, 2, -1) == {}
    assert dry_penalties([1, 2, 3, 9, 5, 1, 2, 3], frozenset(), 1.0, 2.0, 2, 4) == {}


@pytest.mark.parametrize("vocab, scale", [(300, 3.0), (3000, 1.5)])
def test_llama_cpp_chain_with_dry_and_mirostat_matches_its_oracle(vocab, scale):
    x = random_logits(vocab, seed=vocab, scale=scale)
    context = ((5, 6, 7, 8, 1, 2), (3, 4, 5, 6, 7), 0.0, frozenset({3}))
    grid = [dict(dry_multiplier=m, dry_base=b, dry_allowed_length=a, temperature=t, top_k=k)
            for m in (0.0, 0.8, 3.0) for b in (1.0, 1.75) for a in (1, 2) for t in (0.0, 0.7) for k in (0, 40)]
    grid += [dict(mirostat=v, mirostat_tau=tau, temperature=t) for v in (1, 2) for tau in (0.5, 3.0, 8.0)
             for t in (0.0, 0.6, 1.2)]
    for knobs in grid:
        s = SamplingSettings(order="llama.cpp", **knobs)
        assert_stages_match(x, s, ORACLES["llama.cpp"], context)
        for mu in (0.2, 4.0, 11.0):  # a mu carried from earlier steps
            assert_stages_match(x, s, ORACLES["llama.cpp"], (*context, mu))


def test_mirostat_v2_keeps_the_tokens_whose_surprise_is_at_most_mu():
    x = torch.tensor([0.5, 0.25, 0.125, 0.125]).log()  # surprises 1, 2, 3, 3 bits
    s = SamplingSettings(order="llama.cpp", mirostat=2)
    for mu, kept in ((0.5, [1, 0, 0, 0]), (2.0, [1, 1, 0, 0]), (2.99, [1, 1, 0, 0]), (3.0, [1, 1, 1, 1])):
        final = dict(pipeline(x, s, ((), (), 0.0, frozenset(), mu)))["final"]
        assert (final > 0).int().tolist() == kept, mu


def test_mirostat_v1_keeps_the_top_k_its_zipf_estimate_gives():
    # an exact Zipf row p_i ~ 1 / i^s: the estimate is s itself, so k is the formula's
    vocab, s_true, mu = 1000, 1.3, 6.0
    x = -s_true * torch.arange(1, vocab + 1, dtype=torch.float64).log()
    eps = s_true - 1
    k = int((eps * 2 ** mu / (1 - vocab ** -eps)) ** (1 / s_true))
    final = dict(pipeline(x.float(), SamplingSettings(order="llama.cpp", mirostat=1), ((), (), 0.0, frozenset(), mu)))
    assert int((final["final"] > 0).sum()) == k == 10  # (0.3 x 2^6 / (1 - 1000^-0.3))^(1 / 1.3) = 10.77


def test_mu_follows_the_observed_surprise():
    s = SamplingSettings(order="llama.cpp", mirostat=2, mirostat_tau=5.0, mirostat_eta=0.1)
    assert s.next_mu(10.0, 0.25) == pytest.approx(10.0 - 0.1 * (2 - 5))  # a 2-bit token: below tau, mu grows
    assert s.next_mu(10.0, 2 ** -9) == pytest.approx(10.0 - 0.1 * (9 - 5))  # a 9-bit token: mu shrinks
    stages = run_stages(torch.zeros(1, 8), [s])
    assert stages.applied["mirostat"].tolist() == [10.0]  # mu starts at 2 tau


def test_mirostat_replaces_the_chain_and_is_llama_cpp_only():
    with pytest.raises(ValueError, match="^top_p is not applied with mirostat on"):
        settings_from({"order": "llama.cpp", "mirostat": 2, "top_p": 0.9})
    with pytest.raises(ValueError, match="^mirostat is not part of the vllm order"):
        settings_from({"order": "vllm", "mirostat": 1})
    with pytest.raises(ValueError, match="^DRY multiplier is not part of the hf order"):
        parse_settings(1, 0, 1, 0, None, "hf", labels={"dry_multiplier": "DRY multiplier"}, dry_multiplier=0.8)
    with pytest.raises(ValueError, match="^dry_sequence_breakers: at most 16 strings"):
        settings_from({"order": "llama.cpp", "dry_sequence_breakers": ["x"] * 17})
    with pytest.raises(ValueError, match="^mirostat must be a whole number between 0 and 2"):
        settings_from({"order": "llama.cpp", "mirostat": 3})


def test_a_custom_chain_runs_the_stages_in_the_learners_order():
    x = random_logits(400, seed=3, scale=3.0)
    # llama.cpp's own cuts as a custom chain: the same distributions
    llama = SamplingSettings(order="llama.cpp", temperature=0.7, top_k=40, top_p=0.9, min_p=0.05)
    custom = settings_from({"order": ["top_k", "top_p", "min_p", "temperature"], "temperature": 0.7, "top_k": 40,
                            "top_p": 0.9, "min_p": 0.05})
    assert custom.order == "custom" and custom.chain == ("top_k", "top_p", "min_p", "temperature")
    a, b = dict(pipeline(x, llama)), dict(pipeline(x, custom))
    torch.testing.assert_close(a["final"], b["final"])
    # min-p after a sharpening temperature keeps fewer tokens than min-p before it
    late = parse_settings(0.5, 0, 1, 0.05, None, "temperature > min_p")
    early = parse_settings(0.5, 0, 1, 0.05, None, "min_p -> temperature")
    assert [n for n, _ in pipeline(x, late)] == ["raw", "logit_bias", "penalties", "dry", "temperature", "min_p", "final"]
    kept_late = int((dict(pipeline(x, late))["final"] > 0).sum())
    kept_early = int((dict(pipeline(x, early))["final"] > 0).sum())
    assert kept_late < kept_early
    # each row of a mixed batch runs its own chain: together as alone
    rows = [late, early, llama, SamplingSettings(temperature=0.9, top_p=0.8)]
    xs = torch.stack([random_logits(400, seed=i, scale=2.0) for i in range(4)])
    together = run_stages(xs, rows).probs["final"]
    for i, s in enumerate(rows):
        torch.testing.assert_close(together[i], run_stages(xs[i:i + 1], [s]).probs["final"][0])


def test_a_custom_chain_refuses_a_knob_whose_stage_it_lacks():
    with pytest.raises(ValueError, match="^top_k is 5 but the chain has no top_k stage"):
        settings_from({"order": ["temperature"], "top_k": 5})
    with pytest.raises(ValueError, match="^chain: 'beam' is not a stage a chain can order"):
        settings_from({"order": "custom", "chain": ["beam"]})
    with pytest.raises(ValueError, match="^order: top_k appears twice"):
        settings_from({"order": "top_k, top_k"})
    assert settings_from({"order": ["top_p"], "temperature": 0}).greedy  # greedy needs no temperature stage
    s = settings_from({"order": "top_k > temperature", "top_k": 3})
    assert settings_from(s.to_dict()) == s and s.order_text == "top_k > temperature"
