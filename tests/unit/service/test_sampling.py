"""The sampling pipeline against its oracles (oracles.py): transformers' warpers for "hf" order, and plain
per-row implementations of the engines' chains (docs/sampling.md) for "vllm" and "llama.cpp"."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from transformers.generation.logits_process import (
    TopPLogitsWarper,
)

from model_service.records import knobs as knob_rows
from model_service.sampling import pipeline as sampling
from model_service.sampling import window as ranking
from model_service.sampling.pipeline import (
    SamplingSettings,
    draw,
    make_generator,
    pipeline,
    run_stages,
    sample,
    stage_names,
)

from .oracles import NEG, ORACLES, llamacpp_stages, one_hot_argmax, vllm_stages  # noqa: F401

GRID = [
    dict(temperature=t, top_k=k, top_p=p, min_p=m)
    for t, k, p, m in itertools.product([0.0, 0.005, 0.5, 1.0, 1.7], [0, 1, 7, 300], [1.0, 0.95, 0.6, 0.1], [0.0, 0.02, 0.3])
]


def random_logits(vocab, seed, scale):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(vocab, generator=g) * scale


def assert_stages_match(x, settings, oracle, context=None):
    got = dict(pipeline(x, settings, context))
    want = oracle(x, settings, context or ((), ()))
    assert list(got) == list(stage_names(settings.order))
    for name in got:
        torch.testing.assert_close(got[name], want[name], atol=1e-6, rtol=0, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("order", ["hf", "vllm", "llama.cpp"])
@pytest.mark.parametrize("vocab,scale", [(500, 3.0), (6000, 2.0), (6000, 6.0)])
def test_pipeline_matches_oracle_over_grid(order, vocab, scale):
    # vocab 500 fits the window; 6000 exercises the window and, for flat rows, the full-sort fallback.
    x = random_logits(vocab, seed=vocab + int(scale), scale=scale)
    for knobs in GRID:
        assert_stages_match(x, SamplingSettings(**knobs, order=order), ORACLES[order])


@pytest.mark.parametrize("order", ["hf", "vllm", "llama.cpp"])
def test_tiny_window_forces_every_fallback(order, monkeypatch):
    monkeypatch.setattr(ranking, "WINDOW", 4)
    x = random_logits(300, seed=1, scale=2.0)
    for knobs in GRID[::3]:
        assert_stages_match(x, SamplingSettings(**knobs, order=order), ORACLES[order])


def test_input_logits_are_not_modified():
    x = random_logits(100, seed=2, scale=3.0)
    before = x.clone()
    pipeline(x, SamplingSettings(temperature=0.5, top_k=5, top_p=0.5, min_p=0.1))
    assert torch.equal(x, before)


# --- hand-made 4-token rows: why each token survives ---

VOCAB = ["Paris", "Lyon", "the", "banana"]


def probs_of(p, settings):
    x = torch.tensor(p).log()
    return {name: [round(v, 4) for v in t.tolist()] for name, t in pipeline(x, settings)}


def test_top_k_keeps_the_k_best_and_renormalises():
    out = probs_of([0.5, 0.3, 0.15, 0.05], SamplingSettings(top_k=2))
    assert out["top_k"] == [0.625, 0.375, 0.0, 0.0]  # 0.5/0.8, 0.3/0.8


def test_top_k_keeps_every_token_tied_with_the_kth():
    out = pipeline(torch.tensor([2.0, 1.0, 1.0, 0.0]), SamplingSettings(top_k=2))
    kept = dict(out)["top_k"] > 0
    assert kept.tolist() == [True, True, True, False]  # "Lyon" and "the" tie for second place


def test_top_p_keeps_the_token_that_crosses_p():
    # cumulative from the top: 0.5, 0.8 -> "Lyon" crosses 0.75, so it stays; "the" and "banana" go.
    out = probs_of([0.5, 0.3, 0.15, 0.05], SamplingSettings(top_p=0.75))
    assert out["top_p"] == [0.625, 0.375, 0.0, 0.0]


def test_top_p_always_keeps_the_most_probable_token():
    out = probs_of([0.9, 0.05, 0.03, 0.02], SamplingSettings(top_p=0.01))
    assert out["top_p"] == [1.0, 0.0, 0.0, 0.0]


def test_min_p_is_relative_to_the_top_token():
    # threshold 0.5 * 0.5 = 0.25: "Lyon" (0.3) stays, "the" (0.15) goes.
    out = probs_of([0.5, 0.3, 0.15, 0.05], SamplingSettings(min_p=0.5))
    assert out["min_p"] == [0.625, 0.375, 0.0, 0.0]


def test_temperature_reshapes_without_reordering():
    cold = probs_of([0.5, 0.3, 0.15, 0.05], SamplingSettings(temperature=0.5))["temperature"]
    hot = probs_of([0.5, 0.3, 0.15, 0.05], SamplingSettings(temperature=2.0))["temperature"]
    assert cold[0] > 0.5 > hot[0]
    assert cold == sorted(cold, reverse=True) and hot == sorted(hot, reverse=True)


def test_vllm_order_can_keep_fewer_tokens_than_hf():
    # HF: top-p 0.75 on the full row keeps 3 (0.4 + 0.3 < 0.75), then min-p 0.3 (threshold 0.133) keeps them.
    # vLLM: min-p first drops "banana", the renormalised row 0.44/0.33/0.22 crosses 0.75 at "Lyon".
    p, knobs = [0.4, 0.3, 0.2, 0.1], dict(top_p=0.75, min_p=0.3)
    hf = probs_of(p, SamplingSettings(**knobs, order="hf"))["final"]
    vllm = probs_of(p, SamplingSettings(**knobs, order="vllm"))["final"]
    assert sum(v > 0 for v in hf) == 3 and sum(v > 0 for v in vllm) == 2


def test_llamacpp_cuts_before_temperature():
    # At T = 4 the HF row is so flat that top-p 0.6 keeps 3; llama.cpp cuts at T = 1 and keeps 2.
    p, knobs = [0.4, 0.3, 0.2, 0.1], dict(temperature=4.0, top_p=0.6)
    hf = probs_of(p, SamplingSettings(**knobs, order="hf"))["final"]
    cpp = probs_of(p, SamplingSettings(**knobs, order="llama.cpp"))["final"]
    assert sum(v > 0 for v in hf) == 3 and sum(v > 0 for v in cpp) == 2


def test_a_transform_that_is_off_still_appears_unchanged():
    out = pipeline(torch.tensor([1.0, 2.0, 0.5, -1.0]), SamplingSettings())
    names = [n for n, _ in out]
    assert names == ["raw", "logit_bias", "penalties", "no_repeat_ngram", "min_tokens", "temperature", "top_h", "top_k",
                     "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "final"]
    for _, p in out:
        assert torch.equal(p, out[0][1])


@pytest.mark.parametrize("order", ["hf", "vllm", "llama.cpp"])
def test_temperature_zero_is_greedy_with_ties_to_the_lowest_id(order):
    x = torch.tensor([1.0, 3.0, 3.0, 0.0])
    s = SamplingSettings(temperature=0, top_p=0.5, order=order)
    assert dict(pipeline(x, s))["final"].tolist() == [0.0, 1.0, 0.0, 0.0]
    tokens, (d,) = sample(x, s)
    assert tokens.tolist() == [1] and d.u is None and d.rank == 0


@pytest.mark.parametrize("order", ["hf", "vllm", "llama.cpp"])
@pytest.mark.parametrize("temperature", [1e-6, 1e-38, 1e-45])
def test_tiny_temperature_is_greedy_in_every_order_and_never_nan(order, temperature):
    # vLLM's rule (T < 1e-5 is greedy) for all orders: x / 1e-38 overflows float32 to inf and the
    # softmax to NaN, which drew a nonsense token; at 1e-6 HF's own warper is already one-hot.
    x = random_logits(50, seed=3, scale=1.0)
    settings = SamplingSettings(temperature=temperature, order=order)
    assert settings.greedy and not SamplingSettings(temperature=1e-5, order=order).greedy
    stages = dict(pipeline(x, settings))
    assert all(not torch.isnan(p).any() for p in stages.values())
    assert stages["final"].argmax() == x.argmax() and stages["final"].max() == 1.0
    token, (info,) = sample(x, settings)
    assert int(token) == int(x.argmax()) and info.u is None


# --- batches: per-row settings in one pass ---

MIXED = [
    SamplingSettings(temperature=0),
    SamplingSettings(temperature=0.8, top_p=0.95, seed=1),
    SamplingSettings(min_p=0.1, seed=2),
    SamplingSettings(temperature=1.8, top_k=40, seed=3),
    SamplingSettings(temperature=0.7, top_p=0.5, min_p=0.05, order="vllm", seed=4),
    SamplingSettings(temperature=1.3, top_k=10, top_p=0.9, order="llama.cpp", seed=5),
]


@pytest.mark.parametrize("vocab", [300, 5000])
def test_batch_rows_equal_each_row_alone(vocab):
    x = torch.stack([random_logits(vocab, seed=i, scale=3.0) for i in range(len(MIXED))])
    batched = run_stages(x, MIXED)
    for i, s in enumerate(MIXED):
        alone = dict(pipeline(x[i], s))
        for name in stage_names(s.order):
            torch.testing.assert_close(batched.probs[name][i], alone[name], atol=1e-7, rtol=0)


def test_batch_parameters_are_tensors_of_the_batch():
    params = sampling.BatchParams.from_settings(MIXED, "cpu")
    assert params.temperature.shape == (len(MIXED),)
    assert params.top_k.tolist() == [0, 0, 0, 40, 0, 10]
    assert params.greedy.tolist() == [True, False, False, False, False, False]


def test_seeded_row_draws_the_same_token_alone_and_in_any_batch():
    x = torch.stack([random_logits(2000, seed=i, scale=1.0) for i in range(len(MIXED))])
    seeded = MIXED[1]
    alone = [sample(x[1], seeded)[0].item() for _ in range(3)]
    assert len(set(alone)) == 1
    batch_tokens, _ = sample(x, MIXED)
    assert batch_tokens[1].item() == alone[0]
    others = [SamplingSettings(temperature=2.0, seed=99)] * len(MIXED)
    others[1] = seeded
    assert sample(x, others)[0][1].item() == alone[0]


def test_seeded_row_draws_alike_next_to_a_row_whose_cut_needs_the_full_ranking():
    # Row 0 samples with no filter from a flat row: most of its mass lies beyond the window. Row 1's top-p
    # cut falls beyond the window too, so their group is redone with the full ranking. Row 0's bar must
    # still be laid out as alone (window first, then id order), or its tail draws land on other tokens.
    flat, cut = random_logits(6000, seed=3, scale=0.5), random_logits(6000, seed=4, scale=0.5)
    plain, nucleus = SamplingSettings(), SamplingSettings(top_p=0.95)
    together = torch.stack([flat, cut])
    for seed in range(40):
        alone, _ = draw(run_stages(flat.unsqueeze(0), [plain]), [False], [make_generator(seed)])
        mixed, _ = draw(run_stages(together, [plain, nucleus]), [False, False], [make_generator(seed), make_generator(0)])
        assert mixed[0].item() == alone.item(), f"seed {seed}"


def test_only_the_rows_whose_cut_falls_beyond_the_window_are_ranked_wider(monkeypatch):
    # 6 rows, one of them flat with top-p 0.9 (its cut needs the full ranking), one with top-k 2000 > WINDOW; a
    # mixed batch of orders too. Each row's stages equal its own alone; only those two rows are ranked beyond the
    # first window, each alone: row 2 to 4 x WINDOW, row 3 to the whole vocabulary.
    vocab = 6000
    peaked = [random_logits(vocab, seed=i, scale=3.0) for i in range(6)]
    for row in peaked[1:]:
        row[:5] += 12  # most of the mass on five tokens: every cut falls inside the window
    peaked[3] = random_logits(vocab, seed=30, scale=0.5)  # flat
    settings = [SamplingSettings(top_p=0.9), SamplingSettings(temperature=0.7, top_p=0.9),
                SamplingSettings(top_k=2000, order="vllm"), SamplingSettings(top_p=0.9),
                SamplingSettings(min_p=0.05, order="llama.cpp"), SamplingSettings(top_k=40, top_p=0.8)]
    x = torch.stack(peaked)
    calls = []  # (rows ranked, width)
    ranked = ranking.ranked_window
    monkeypatch.setattr(ranking, "ranked_window", lambda z, width: calls.append(
        ([i for i in range(6) if any(torch.equal(r, x[i]) for r in z)], width)) or ranked(z, width))
    batched = run_stages(x, settings)
    first = ranking.WINDOW // 4
    assert calls[0] == (list(range(6)), first)  # the whole batch once, narrow
    wider = calls[1:]
    assert {r for rows, _ in wider for r in rows} == {2, 3} and all(len(rows) == 1 for rows, _ in wider), calls
    assert max(w for rows, w in wider if rows == [2]) == 4 * ranking.WINDOW
    assert max(w for rows, w in wider if rows == [3]) == vocab
    for i, s in enumerate(settings):
        alone = dict(pipeline(x[i], s))
        for name in stage_names(s.order):
            torch.testing.assert_close(batched.probs[name][i], alone[name], atol=1e-7, rtol=0)
    seeded = [make_generator(7 + i) for i in range(6)]
    tokens, _ = draw(batched, [False] * 6, seeded)
    for i, s in enumerate(settings):
        assert tokens[i].item() == draw(run_stages(x[i: i + 1], [s]), [False], [make_generator(7 + i)])[0].item()


def test_reading_the_narrow_window_first_draws_what_the_whole_bar_draws():
    # The draw reads the first, narrower window, and reads again on the bar only where it must. Every draw must
    # equal a draw read on the bar alone: token, interval and rank, for rows that land inside, beyond the window,
    # on tokens tied with its edge (logits rounded to halves: thousands of ties), greedy rows and rows whose cut
    # needed a wider ranking.
    import dataclasses

    vocab = 6000
    rows = [random_logits(vocab, seed=40, scale=0.5), (random_logits(vocab, seed=41, scale=3.0) * 2).round() / 2,
            random_logits(vocab, seed=42, scale=3.0), random_logits(vocab, seed=43, scale=1.0)]
    rows[2][:3] += 10
    x = torch.stack(rows)
    settings = [SamplingSettings(), SamplingSettings(top_p=0.99), SamplingSettings(temperature=0),
                SamplingSettings(top_k=3000, min_p=0.01)]
    stages = run_stages(x, settings)
    assert stages.window.shape[-1] < ranking.WINDOW  # the narrow window is what the draw reads first
    on_the_bar = dataclasses.replace(stages, window=stages.bar)
    greedy = [s.greedy for s in settings]
    landed_beyond = 0
    for seed in range(150):
        gens = [make_generator(seed * 4 + i) for i in range(4)]
        tokens, draws = draw(stages, greedy, gens)
        gens = [make_generator(seed * 4 + i) for i in range(4)]
        expected, expected_draws = draw(on_the_bar, greedy, gens)
        assert tokens.tolist() == expected.tolist(), seed
        assert draws == expected_draws, seed
        landed_beyond += sum(d.rank >= stages.window.shape[-1] for d in draws)
    assert landed_beyond > 50  # the bar was read again, often


def test_different_seeds_draw_differently():
    x = random_logits(2000, seed=5, scale=0.5)
    tokens = {sample(x, SamplingSettings(seed=s))[0].item() for s in range(20)}
    assert len(tokens) > 10


def test_draw_follows_the_final_distribution():
    # 20 000 draws from a known 4-token row: frequencies within 1.5 points of the probabilities.
    x = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    s = SamplingSettings(seed=0)
    stages = run_stages(x.unsqueeze(0), [s])
    gen = make_generator(0)
    counts = torch.zeros(4)
    for _ in range(20_000):
        token, (d,) = draw(stages, [False], [gen])
        counts[token] += 1
        assert d.low <= d.u < d.high
    assert torch.allclose(counts / counts.sum(), torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.015)


def test_draw_interval_is_the_tokens_probability_even_beyond_the_window(monkeypatch):
    monkeypatch.setattr(ranking, "WINDOW", 2)
    x = torch.zeros(10)  # uniform: most draws land beyond a 2-token window
    for seed in range(20):
        token, (d,) = sample(x, SamplingSettings(seed=seed))
        assert d.high - d.low == pytest.approx(0.1, abs=1e-9)
        assert d.low <= d.u < d.high
        assert d.rank == token.item()  # all tied: rank = position by id


# --- validation: errors name the field and the value ---


@pytest.mark.parametrize(
    "knobs,field",
    [
        (dict(temperature=-0.1), "temperature"),
        (dict(temperature=math.nan), "temperature"),
        (dict(temperature=math.inf), "temperature"),
        (dict(temperature="hot"), "temperature"),
        (dict(top_k=-1), "top_k"),
        (dict(top_k=2.5), "top_k"),
        (dict(top_k=True), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.01), "top_p"),
        (dict(top_p=math.nan), "top_p"),
        (dict(min_p=-0.1), "min_p"),
        (dict(min_p=1.5), "min_p"),
        (dict(seed=-1), "seed"),
        (dict(seed=1.5), "seed"),
        (dict(order="openai"), "order"),
    ],
)
def test_invalid_settings_name_field_and_value(knobs, field):
    with pytest.raises(ValueError, match=field) as err:
        SamplingSettings(**knobs)
    assert repr(next(iter(knobs.values())))[:4] in str(err.value) or "NaN" in str(err.value)


def test_integral_floats_are_accepted_as_integers():
    s = SamplingSettings(top_k=40.0, seed=7.0)
    assert s.top_k == 40 and isinstance(s.top_k, int) and s.seed == 7


def test_settings_are_frozen_and_picklable():
    import pickle

    s = SamplingSettings(temperature=0.7, top_p=0.9, seed=3)
    assert pickle.loads(pickle.dumps(s)) == s
    with pytest.raises(AttributeError):
        s.temperature = 1.0


def test_the_order_is_written_once_in_the_module_docstring():
    doc = " ".join(knob_rows.__doc__.split())  # ORDERS' picture, beside ORDERS
    for order, transforms in sampling.ORDERS.items():
        chain = ("raw", *transforms) if order == "custom" else ("raw", *transforms, "final")  # then its own chain
        assert " -> ".join(chain) in doc, order


def test_draw_rank_is_the_raw_rank_in_and_beyond_the_window(monkeypatch):
    monkeypatch.setattr(ranking, "WINDOW", 16)
    x = random_logits(400, seed=8, scale=0.5)  # flat: many draws fall beyond a 16-token window
    order = sorted(range(400), key=lambda i: (-x[i].item(), i))
    for seed in range(40):
        token, (d,) = sample(x, SamplingSettings(seed=seed))
        assert d.rank == order.index(token.item())


def test_top_p_cut_in_a_tie_at_the_windows_edge_still_keeps_the_lower_ids():
    # 250 distinct logits, then 40 tokens tied at 0 scattered over the vocabulary: the first window (256) holds
    # only 6 of the tied ones, whichever topk picked. A cut inside the tie must keep the lowest ids among all 40.
    vocab = 5000
    g = torch.Generator().manual_seed(11)
    ids = torch.randperm(vocab, generator=g)
    x = torch.full((vocab,), -30.0)
    x[ids[:250]] = torch.linspace(8.0, 1.0, 250)
    tied = ids[250:290]
    x[tied] = 0.0
    probs = x.softmax(-1)
    top_mass = probs[ids[:250]].sum().item()
    p = top_mass + 2.5 * probs[tied[0]].item()  # the cut falls after the third tied token
    kept = dict(pipeline(x, SamplingSettings(top_p=p)))["top_p"] > 0
    assert kept[tied].sum() == 3
    assert sorted(tied[kept[tied]].tolist()) == sorted(tied.tolist())[:3]


def test_top_p_cut_at_a_tie_keeps_the_lower_id():
    # p = [0.5, 0.25, 0.25]: top-p 0.6 needs the top token plus one of the two tied ones. Ours keeps
    # the lower id (1) and removes 2, deterministically; the kept mass (0.75) is what HF keeps too,
    # only the tied token that survives may differ (docs/sampling.md, "Ties").
    x = torch.log(torch.tensor([0.5, 0.25, 0.25]))
    stages = dict(pipeline(x, SamplingSettings(top_p=0.6)))
    assert stages["top_p"].tolist() == pytest.approx([2 / 3, 1 / 3, 0.0])
    hf = TopPLogitsWarper(top_p=0.6)(None, x.unsqueeze(0).clone())[0]
    assert torch.isinf(hf).sum() == 1 and hf[0] == x[0]  # HF also keeps two, the top one among them
