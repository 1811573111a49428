"""The step's summary (engine/step.py:summarise) against the plain whole-vocabulary definitions: each stage's top-N
probabilities, kept count, kept mass (its survivors' mass under the stage before, in the row's own order),
entropy and the chosen token's probability; the same for a row alone and among rows of other orders and greedy
rows; and read on the window or over the vocabulary alike (sampling/distribution.py)."""

from __future__ import annotations

import math

import pytest
import torch

from model_service.engine.step import summarise
from model_service.records.settings import LESSON_STAGES, SamplingSettings, stage_names
from model_service.sampling import window as ranking
from model_service.sampling.pipeline import pipeline, run_stages

ROWS = [
    SamplingSettings(temperature=0.8, top_p=0.9, seed=1),
    SamplingSettings(temperature=1.5, top_k=40, min_p=0.05, order="vllm", seed=2),
    SamplingSettings(temperature=0.0, seed=3),  # greedy: final is one-hot on the argmax
    SamplingSettings(temperature=1.2, top_k=20, top_p=0.95, order="llama.cpp", seed=4),
    SamplingSettings(temperature=1.0, seed=5),  # nothing cut: every stage is the whole vocabulary
    SamplingSettings(temperature=2.0, min_p=0.001, seed=6),  # a cut that keeps more than the window
    SamplingSettings(temperature=0.9, typical_p=0.8, eta_cutoff=0.001, seed=7),  # typical-p may drop the top
    SamplingSettings(order="llama.cpp", top_n_sigma=1.5, xtc_probability=1.0, xtc_threshold=0.02, dynatemp_range=0.4,
                     seed=8),  # XTC drops the top; the temperature is the entropy's
    SamplingSettings(order="vllm", logit_bias=((3, 4.0), (7, -50.0)), top_p=0.9, seed=9),  # the ranking changes
]


def plain(logits: torch.Tensor, settings: SamplingSettings, token: int, top_n: int):
    """The definitions, over the whole vocabulary, on the row's own stages (each a softmax of the whole vocabulary)."""
    stages = pipeline(logits, settings)
    ids = logits.argsort(descending=True, stable=True)[:top_n]
    out, before = [], None
    for name, p in stages:
        p = p.double()
        kept = p > 0
        mass = 1.0 if before is None or name == "temperature" else float(before[kept].sum())
        entropy = float(-(p[kept] * p[kept].log2()).sum())
        out.append((name, [float(p[i]) for i in ids], int(kept.sum()), min(mass, 1.0), entropy, float(p[token])))
        before = p
    return out


def logits_for(seed: int, rows: int, vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, vocab, generator=g) * 3


def check(stage, want, what: str):
    name, probs, count, mass, entropy, chosen = want
    assert stage.name == name
    assert stage.kept_count == count, f"{what} {name}: kept count"
    assert stage.probs == pytest.approx(probs, abs=2e-6), f"{what} {name}: top-N"
    assert stage.kept_mass == pytest.approx(mass, abs=2e-6), f"{what} {name}: kept mass"
    assert stage.entropy_bits == pytest.approx(entropy, abs=2e-5), f"{what} {name}: entropy"
    assert stage.chosen_prob == pytest.approx(chosen, abs=2e-6), f"{what} {name}: chosen"


@pytest.mark.parametrize("window", [ranking.WINDOW, 4])  # 4: every cut outgrows the window, read wide
def test_every_row_of_a_mixed_batch_is_summarised_by_the_definitions(window, monkeypatch):
    monkeypatch.setattr(ranking, "WINDOW", window)
    x = logits_for(0, len(ROWS), 3000)
    stages = run_stages(x, ROWS, min_window=5)
    tokens = torch.tensor([int(x[i].argsort(descending=True)[i]) for i in range(len(ROWS))])  # any token
    summaries = summarise(stages, tokens, [5] * len(ROWS), [s.order for s in ROWS])
    for i, (settings, summary) in enumerate(zip(ROWS, summaries)):
        wants = plain(x[i], settings, int(tokens[i]), 5)
        names = [s.name for s in summary.stages]
        assert set(LESSON_STAGES) <= set(names) and names == [n for n in stage_names(settings.order) if n in names]
        for stage in summary.stages:
            check(stage, next(w for w in wants if w[0] == stage.name), f"row {i} ({settings.order})")
        for before, want in zip(wants, wants[1:]):  # a stage left out changed nothing the record shows
            if want[0] not in names:
                flat = lambda w: [*w[1], w[2], w[4], w[5]]  # noqa: E731 - probs, count, entropy, chosen
                assert flat(want) == pytest.approx(flat(before), rel=1e-4, abs=2e-5), f"row {i}: {want[0]} was left out"


def test_a_stage_beyond_the_lesson_is_recorded_when_it_moves_what_is_shown_beyond_round_off():
    """A bias on a token of p 2e-5 moves the other probabilities by 2e-5 of themselves: their sixth digits, nothing the
    page shows. Recorded on such a change (the rule was: the rounded numbers differ), the stage came and went with the
    logits' round-off, wherever the change sat near a rounding edge (the golden records flipped on another one-row
    kernel). Now it is recorded from limits.STAGE_SHOWN_CHANGE of a value; a bias on the top token is."""
    x = logits_for(3, 1, 500)
    rest = torch.logsumexp(torch.cat([x[0, :7], x[0, 8:]]), dim=0)
    x[0, 7] = rest + math.log(2e-5)  # p(7) = 2e-5 / (1 + 2e-5)
    top = int(x[0].argmax())
    names = []
    for bias in ((7, -5.0), (top, -5.0)):
        settings = SamplingSettings(temperature=1.0, logit_bias=(bias,), seed=1)
        (summary,) = summarise(run_stages(x, [settings], min_window=5), torch.tensor([top]), [5], ["hf"])
        names.append([s.name for s in summary.stages])
    assert "logit_bias" not in names[0] and "logit_bias" in names[1]


def test_a_row_is_summarised_alike_alone_and_among_rows_of_other_orders():
    x = logits_for(1, len(ROWS), 2000)
    tokens = x.argmax(dim=-1)
    together = summarise(run_stages(x, ROWS, min_window=5), tokens, [5] * len(ROWS), [s.order for s in ROWS])
    for i, settings in enumerate(ROWS):
        (alone,) = summarise(run_stages(x[i: i + 1], [settings], min_window=5), tokens[i: i + 1], [5], [settings.order])
        for a, b in zip(alone.stages, together[i].stages, strict=True):
            assert (a.name, a.kept_count) == (b.name, b.kept_count)
            for field in ("kept_mass", "entropy_bits", "chosen_prob"):
                assert getattr(a, field) == pytest.approx(getattr(b, field), abs=2e-6), f"row {i} {a.name} {field}"


def test_greedy_final_keeps_the_argmax_and_its_mass_under_the_stage_before():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.5]])  # a tie: argmax is the lower id, 1
    (summary,) = summarise(run_stages(x, [SamplingSettings(temperature=0)], min_window=4), torch.tensor([1]), [4], ["hf"])
    final = summary.stages[-1]
    p = torch.softmax(x[0], -1)
    assert (final.kept_count, final.probs[0], final.chosen_prob, final.entropy_bits) == (1, 1.0, 1.0, 0.0)
    assert final.kept_mass == pytest.approx(float(p[1]), abs=1e-6)
    assert summary.stages[0].entropy_bits == pytest.approx(float(-(p * p.log2()).sum()), abs=1e-6)
    assert math.isclose(sum(summary.stages[0].probs), 1.0, abs_tol=4e-6)  # four numbers rounded to 6 digits
