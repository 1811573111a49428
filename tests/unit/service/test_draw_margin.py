"""Every draw's margin (records/step.py DrawInfo): how far u lies from the nearer edge of its token's interval,
on a hand-made 4-token bar whose edges are known, and the greedy step's gap between its top two logits."""

from __future__ import annotations

import math

import pytest
import torch

from model_service import SamplingSettings
from model_service.sampling.draw import draw
from model_service.sampling.pipeline import make_generator, run_stages

PROBS = [0.5, 0.25, 0.15, 0.1]  # the bar: [0, .5) [.5, .75) [.75, .9) [.9, 1)
EDGES = [0.0, 0.5, 0.75, 0.9, 1.0]


class FixedU:
    """A stand-in generator whose one draw is u (draw() reads torch.rand((), generator=g, device=g.device))."""

    device = torch.device("cpu")

    def __init__(self, u: float):
        self.u = u


@pytest.fixture()
def fixed_rand(monkeypatch):
    real = torch.rand

    def rand(*args, generator=None, **kwargs):
        if isinstance(generator, FixedU):
            return torch.tensor(generator.u, dtype=torch.float32)
        return real(*args, generator=generator, **kwargs)

    monkeypatch.setattr(torch, "rand", rand)


def stages_of(probs, greedy=False):
    logits = torch.tensor([math.log(p) for p in probs]).unsqueeze(0)
    return run_stages(logits, [SamplingSettings(temperature=0.0 if greedy else 1.0)])


@pytest.mark.parametrize("u, token", [(0.1, 0), (0.49, 0), (0.5000001, 1), (0.6, 1), (0.7499, 1), (0.8, 2), (0.95, 3)])
def test_the_margin_is_the_distance_to_the_nearer_edge_of_the_drawn_interval(fixed_rand, u, token):
    tokens, (info,) = draw(stages_of(PROBS), [False], [FixedU(u)])
    u32 = float(torch.tensor(u, dtype=torch.float32))  # u as the generator gives it
    assert int(tokens[0]) == token and info.u == u32
    expected = min(u32 - EDGES[token], EDGES[token + 1] - u32)
    assert info.margin == pytest.approx(expected, rel=1e-5, abs=1e-7)
    assert 0 <= info.margin <= (EDGES[token + 1] - EDGES[token]) / 2 + 1e-7
    assert info.logit_gap is None


def test_a_draw_next_to_an_edge_has_a_tiny_margin(fixed_rand):
    _, (info,) = draw(stages_of(PROBS), [False], [FixedU(0.50001)])
    assert info.rank == 1 and info.margin < 1e-4


def test_greedy_has_no_margin_but_the_gap_of_its_top_two_logits():
    _, (info,) = draw(stages_of(PROBS, greedy=True), [True], [make_generator(1)])
    assert info.u is None and info.margin is None
    assert info.logit_gap == pytest.approx(math.log(0.5) - math.log(0.25), rel=1e-5)


def test_the_lab_marks_a_knife_edge_draw_in_both_languages():
    from model_service.records.step import DrawInfo
    from playground.lab.run import knife_edge

    assert knife_edge(DrawInfo(0.3, 0, 0.0, 0.5, margin=0.2)) == ""
    assert "neighbour" in knife_edge(DrawInfo(0.50001, 1, 0.5, 0.75, margin=1e-5))
    assert "bên cạnh" in knife_edge(DrawInfo(0.50001, 1, 0.5, 0.75, margin=1e-5), "vi")
    assert "tie" in knife_edge(DrawInfo(None, 0, 0.0, 1.0, logit_gap=2e-5))
    assert knife_edge(DrawInfo(None, 0, 0.0, 1.0, logit_gap=0.5)) == ""
