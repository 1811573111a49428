"""draw_at reads a given u on a hand-made bar; u_at gives the u a seeded run reads at a step."""

from __future__ import annotations

import pytest
import torch

from model_service.records.settings import SamplingSettings
from model_service.sampling.draw import draw, draw_at, make_generator, u_at
from model_service.sampling.pipeline import run_stages

LOGITS = torch.tensor([[2.0, 1.0, 0.5, -1.0]]).log_softmax(-1)  # p ≈ 0.61, 0.22, 0.14, 0.03


def test_u_picks_the_token_whose_interval_holds_it_and_says_its_margin():
    stages = run_stages(LOGITS, [SamplingSettings()], capture=False)
    p = LOGITS.exp()[0].tolist()
    for u, token in ((0.0, 0), (p[0] - 1e-3, 0), (p[0] + 1e-3, 1), (p[0] + p[1] + 1e-3, 2), (0.999, 3)):
        tokens, (info,) = draw_at(stages, [u])
        assert int(tokens[0]) == token
        assert abs(info.margin - min(u - info.low, info.high - u)) < 1e-6
    tokens, (info,) = draw_at(stages, [None])  # greedy: the argmax, the gap of the top two instead of a margin
    assert int(tokens[0]) == 0 and info.margin is None and abs(info.logit_gap - 1.0) < 1e-5


def test_u_at_is_the_u_a_seeded_run_draws_at_that_step():
    stages = run_stages(LOGITS, [SamplingSettings()], capture=False)
    generator = make_generator(1234)
    seen = [draw(stages, [False], [generator])[1][0].u for _ in range(20)]
    assert [u_at(1234, step) for step in range(20)] == seen


def test_a_greedy_rows_gap_is_its_top_two_apart_in_a_room_of_every_kind():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 3000, generator=g) * 4
    logits[2, :2] = 20.0  # a tie at the top: gap 0
    settings = [SamplingSettings(temperature=0), SamplingSettings(temperature=0.8, top_k=5),
                SamplingSettings(temperature=0), SamplingSettings(temperature=0, repetition_penalty=1.3),
                SamplingSettings(temperature=0.7, top_p=0.9, order="llama.cpp"), SamplingSettings(temperature=0)]
    stages = run_stages(logits, settings, capture=False)
    _, infos = draw_at(stages, [None if s.greedy else 0.5 for s in settings])
    top = stages.logits.topk(2, dim=-1).values.double()
    for i, (s, info) in enumerate(zip(settings, infos)):
        assert info.logit_gap is None if not s.greedy else info.logit_gap == pytest.approx(float(top[i, 0] - top[i, 1]), rel=1e-5, abs=1e-6)


def test_a_room_of_greedy_rows_draws_what_the_general_path_draws(monkeypatch):
    from model_service.sampling import draw as draw_module

    g = torch.Generator().manual_seed(5)
    logits = torch.randn(5, 3000, generator=g) * 4
    logits[1, :2] = 30.0  # a tie at the top
    settings = [SamplingSettings(temperature=0), SamplingSettings(temperature=0),
                SamplingSettings(temperature=0, repetition_penalty=1.3), SamplingSettings(temperature=0, top_k=3),
                SamplingSettings(temperature=0, order="llama.cpp")]
    stages = run_stages(logits, settings, capture=False)
    fast = draw_at(stages, [None] * 5)
    monkeypatch.setattr(draw_module, "all", lambda values: False, raising=False)  # the general path, every row
    general = draw_at(stages, [None] * 5)
    assert torch.equal(fast[0], general[0]) and fast[1] == general[1]
    assert [d.rank for d in fast[1]] == [0] * 5 and int(fast[0][1]) == 0
