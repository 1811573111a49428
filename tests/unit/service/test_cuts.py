"""typical-p, the epsilon and eta cutoffs, top-n-sigma, XTC and the dynamic temperature against their oracles
(oracles.py: transformers' TypicalLogitsWarper, EpsilonLogitsWarper and EtaLogitsWarper for "hf"; llama.cpp's
samplers written out from its source for "llama.cpp"), and small rows that say why each token goes or stays."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from model_service.records.settings import SamplingSettings, settings_from
from model_service.records.validation import InputError
from model_service.sampling import transforms
from model_service.sampling import window as ranking
from model_service.sampling.penalties import RowContext
from model_service.sampling.pipeline import pipeline, run_stages

from .oracles import ORACLES
from .test_sampling import assert_stages_match, random_logits

HF_GRID = [dict(typical_p=t, epsilon_cutoff=e, eta_cutoff=a, temperature=temp, top_k=k)
           for t, e, a, temp, k in itertools.product((1.0, 0.9, 0.5, 0.2), (0.0, 3e-4, 0.01, 0.2), (0.0, 3e-4, 0.05),
                                                     (0.0, 0.7, 1.3), (0, 20))]
LLAMA_GRID = [dict(top_n_sigma=n, typical_p=t, xtc_probability=xp, xtc_threshold=xt, dynatemp_range=d,
                   dynatemp_exponent=de, temperature=temp, top_p=p)
              for n, t, (xp, xt), (d, de), temp, p in itertools.product(
                  (0.0, 0.5, 2.0), (1.0, 0.9, 0.3), ((0.0, 0.1), (1.0, 0.05), (1.0, 0.2), (0.5, 0.1), (1.0, 0.6)),
                  ((0.0, 1.0), (0.5, 1.0), (1.5, 2.0)), (0.0, 0.8), (1.0, 0.9))]


@pytest.mark.parametrize("vocab, scale", [(300, 3.0), (3000, 1.0)])
def test_the_hf_cuts_match_transformers_warpers(vocab, scale):
    x = random_logits(vocab, seed=vocab, scale=scale)
    for knobs in HF_GRID:
        assert_stages_match(x, SamplingSettings(**knobs), ORACLES["hf"])


@pytest.mark.parametrize("vocab, scale, chance", [(300, 3.0, 0.3), (3000, 1.0, 0.7), (300, 6.0, 0.0)])
def test_the_llamacpp_samplers_match_its_source(vocab, scale, chance):
    x = random_logits(vocab, seed=vocab + 1, scale=scale)
    for knobs in LLAMA_GRID:
        assert_stages_match(x, SamplingSettings(order="llama.cpp", **knobs), ORACLES["llama.cpp"],
                            RowContext((), (), chance))


@pytest.mark.parametrize("order", ["hf", "llama.cpp"])
def test_a_tiny_window_gives_the_same_stages(order, monkeypatch):
    # typical-p and XTC rank again after they cut; XTC on a flat row passes the window's edge; typical-p ranks 4
    # tokens first and widens, and a row of many equal logits puts ties at every edge
    monkeypatch.setattr(ranking, "WINDOW", 4)
    monkeypatch.setattr(transforms, "TYPICAL_FIRST", 4)
    ties = torch.cat([torch.full((120,), 0.5), random_logits(80, seed=6, scale=1.0)])
    grid = HF_GRID[::7] if order == "hf" else LLAMA_GRID[::5]
    for x in (random_logits(200, seed=5, scale=0.3), ties):
        for knobs in grid:
            if x is ties and knobs.get("top_p", 1) < 1:
                continue  # top-p's oracle sorts unstably: which of tied tokens it cuts is its sort's whim
            assert_stages_match(x, SamplingSettings(order=order, **knobs), ORACLES[order], RowContext((), (), 0.2))


def test_a_batch_of_rows_with_every_knob_gives_each_what_it_gets_alone():
    rows = [SamplingSettings(typical_p=0.5, eta_cutoff=0.01), SamplingSettings(top_k=5),
            SamplingSettings(order="llama.cpp", xtc_probability=1.0, xtc_threshold=0.05, top_n_sigma=1.0),
            SamplingSettings(order="llama.cpp", dynatemp_range=1.0, typical_p=0.8, temperature=0.7),
            SamplingSettings(order="vllm", min_p=0.1), SamplingSettings(epsilon_cutoff=0.02, temperature=0)]
    contexts = [RowContext((), (), 0.4 * i / len(rows)) for i in range(len(rows))]
    x = torch.stack([random_logits(800, seed, 2.5) for seed in range(len(rows))])
    batch = run_stages(x, rows, contexts=contexts)
    for i, (s, c) in enumerate(zip(rows, contexts, strict=True)):
        alone = run_stages(x[i:i + 1], [s], contexts=[c])
        torch.testing.assert_close(batch.probs["final"][i], alone.probs["final"][0], atol=1e-7, rtol=0)


# ---- small rows: why each token goes or stays ------------------------------------------------------------------


def stage(x, settings, name, context=None):
    return dict(pipeline(torch.tensor(x), settings, context))[name]


def test_xtc_removes_the_top_choices_but_the_least_of_them():
    # p = 0.48, 0.32, 0.12, 0.08: three pass the threshold 0.1, so the first two go and 0.12 leads
    x = torch.tensor([0.48, 0.32, 0.12, 0.08]).log().tolist()
    s = SamplingSettings(order="llama.cpp", xtc_probability=0.5, xtc_threshold=0.1)
    fired = stage(x, s, "xtc", RowContext((), (), 0.4))
    assert fired.tolist() == pytest.approx([0, 0, 0.6, 0.4])
    assert stage(x, s, "xtc", RowContext((), (), 0.6)).tolist() == pytest.approx([0.48, 0.32, 0.12, 0.08])  # no luck


def test_typical_sampling_can_remove_the_most_probable_token():
    # H = 1.505 nats; the top's surprise -ln 0.4 = 0.92 lies further from it than the others' -ln 0.15 = 1.90, so
    # the typical set is made of the 0.15s: transformers keeps every token tied with its edge (all four),
    # llama.cpp stops at the first token past the mass (three)
    x = torch.tensor([0.4, 0.15, 0.15, 0.15, 0.15]).log().tolist()
    for order, count in (("hf", 4), ("llama.cpp", 3)):
        kept = stage(x, SamplingSettings(typical_p=0.3, order=order), "typical_p")
        assert kept[0] == 0 and int((kept > 0).sum()) == count, order


def test_epsilon_keeps_the_top_token_even_below_the_cutoff():
    x = [0.1] + [0.0] * 7  # every token near 1/8, below the cutoff: the top stays, and so would its ties
    assert (stage(x, SamplingSettings(epsilon_cutoff=0.2), "epsilon_cutoff") > 0).tolist() == [True] + [False] * 7


def test_eta_cuts_deeper_in_a_peaked_row_than_in_a_flat_one():
    # eta = min(e, sqrt(e) exp(-H)): a flat row (high entropy) gets a low threshold and keeps its tail
    peaked = torch.tensor([0.9, 0.06, 0.03, 0.01]).log().tolist()
    flat = torch.tensor([0.3, 0.26, 0.24, 0.2]).log().tolist()
    s = SamplingSettings(eta_cutoff=0.05)
    assert (stage(peaked, s, "eta_cutoff") > 0).sum() == 2 and (stage(flat, s, "eta_cutoff") > 0).sum() == 4


def test_top_n_sigma_keeps_the_logits_near_the_largest():
    x = [10.0, 9.0, 2.0, 1.0, 0.0]  # mean 4.4, std 4.13: within one sigma of 10 lie 10 and 9 only
    kept = stage(x, SamplingSettings(order="llama.cpp", top_n_sigma=1.0), "top_n_sigma")
    assert (kept > 0).tolist() == [True, True, False, False, False]


def test_the_dynamic_temperature_follows_the_entropy_and_the_record_says_it():
    s = SamplingSettings(order="llama.cpp", temperature=1.0, dynatemp_range=0.5)
    flat, peaked = torch.zeros(1, 50), torch.tensor([[8.0] + [0.0] * 49])
    t_flat = run_stages(flat, [s]).applied["temperature"].item()
    t_peaked = run_stages(peaked, [s]).applied["temperature"].item()
    assert t_flat == pytest.approx(1.5) and 0.5 < t_peaked < 0.6  # H / log n = 1 and ~0.03 (exponent 1)


@pytest.mark.parametrize("order, knob, value", [
    ("vllm", "typical_p", 0.9), ("vllm", "top_n_sigma", 1.0), ("hf", "xtc_probability", 0.5),
    ("hf", "dynatemp_range", 0.5), ("llama.cpp", "epsilon_cutoff", 0.01), ("vllm", "eta_cutoff", 0.01)])
def test_a_knob_the_orders_engine_lacks_is_refused_naming_it(order, knob, value):
    with pytest.raises(InputError, match=f"{knob} is not part of the {order} order"):
        settings_from({"order": order, knob: value})


def test_every_knob_is_range_checked_naming_it():
    for knob, bad in (("typical_p", 0), ("epsilon_cutoff", 0.6), ("top_n_sigma", -1), ("xtc_threshold", 1.5),
                      ("dynatemp_exponent", 0)):
        with pytest.raises(InputError, match=f"^{knob} must be a number"):
            settings_from({"order": "llama.cpp" if knob != "epsilon_cutoff" else "hf", knob: bad})
    assert math.isclose(settings_from({"order": "llama.cpp", "xtc_threshold": "0.2"}).xtc_threshold, 0.2)


# --- Top-H (transformers' TopHLogitsWarper): its own oracle, in the hf order and in a custom chain ---

TOP_H_GRID = [dict(top_h=h, temperature=t, top_k=k, top_p=p)
              for h, t, k, p in itertools.product((0.0, 0.05, 0.4, 0.8, 1.0), (0.0, 0.6, 1.0, 1.4), (0, 5, 150),
                                                  (1.0, 0.9))]


@pytest.mark.parametrize("vocab, scale", [(60, 2.0), (500, 3.0), (3000, 1.0)])
def test_top_h_matches_transformers_warper_in_the_hf_order(vocab, scale):
    # vocab 60: fewer tokens than Top-H's 100 candidates; a top_k of 150 after it finds fewer survivors than k
    x = random_logits(vocab, seed=vocab + 7, scale=scale)
    for knobs in TOP_H_GRID:
        assert_stages_match(x, SamplingSettings(**knobs), ORACLES["hf"])


def test_top_h_keeps_a_head_that_grows_with_h_and_never_more_than_100_tokens():
    x = random_logits(2000, seed=11, scale=1.0)  # flat: 100 candidates hold little of the mass
    kept = [int((dict(pipeline(x, SamplingSettings(top_h=h)))["top_h"] > 0).sum()) for h in (0.05, 0.3, 0.7, 1.0)]
    assert kept == sorted(kept) and kept[0] >= 1 and kept[-1] <= transforms.TOP_H_CANDIDATES
    ranked = x.argsort(descending=True)
    head = dict(pipeline(x, SamplingSettings(top_h=0.3)))["top_h"][ranked] > 0
    assert head[:kept[1]].all() and not head[kept[1]:].any()  # a head of the ranking, nothing after it


def test_top_h_in_a_custom_chain_is_transformers_cut_where_the_chain_puts_it():
    x = random_logits(800, seed=12, scale=2.5)
    tempered = x / 0.7  # temperature then top_h, as transformers applies them
    want = x.masked_fill(transforms.top_h(tempered.unsqueeze(0), torch.tensor([0.5]))[0], float("-inf"))
    custom = settings_from({"order": "temperature > top_h", "temperature": 0.7, "top_h": 0.5})
    got = dict(pipeline(x, custom))["top_h"] > 0
    assert torch.equal(got, torch.isfinite(want))
    with pytest.raises(InputError, match="^top_h is 0.5 but the chain has no top_h stage"):
        settings_from({"order": ["temperature"], "top_h": 0.5})


@pytest.mark.parametrize("order", ["vllm", "llama.cpp"])
def test_top_h_is_refused_where_the_engine_lacks_it_and_range_checked(order):
    with pytest.raises(InputError, match=f"top_h is not part of the {order} order \\(only transformers has top-H\\)"):
        settings_from({"order": order, "top_h": 0.4})
    with pytest.raises(InputError, match="^top_h must be a number"):
        settings_from({"top_h": 1.5})
