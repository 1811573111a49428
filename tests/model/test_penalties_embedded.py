"""Bias and penalties on the embedded model: a repetition penalty breaks greedy's loop, each row of a room counts
its own context, and a biased token outside the vocabulary is refused naming the field."""

from __future__ import annotations

import pytest

from model_service.records.settings import Request, SamplingSettings

LOOP = "The cat sat on the mat. The cat sat on the"  # greedy repeats " mat. The cat sat on the mat."


def text(service, settings, prompt=LOOP, tokens=12):
    return list(service.generate(prompt, settings, max_new_tokens=tokens))


def test_a_repetition_penalty_breaks_greedys_loop(embedded):
    plain = text(embedded, SamplingSettings(temperature=0))
    assert plain[0].piece == " mat" and "The cat sat on the mat" in plain[-1].text
    penalised = text(embedded, SamplingSettings(temperature=0, repetition_penalty=1.3))
    first = penalised[0]
    assert first.piece != " mat" and "The cat sat" not in penalised[-1].text
    # the candidates are the raw ranking: " mat" stays first, its bar shrunk by the penalty
    assert first.candidates[0].piece == " mat"
    raw, after = first.stage("raw"), first.stage("penalties")
    assert after.probs[0] < raw.probs[0] / 10 and after.kept_mass == 1.0 and after.kept_count == raw.kept_count


def test_a_logit_bias_bans_and_forces_a_token(embedded):
    mat = text(embedded, SamplingSettings(temperature=0), tokens=1)[0].token_id
    banned = text(embedded, SamplingSettings(temperature=0, logit_bias=((mat, -100),)), tokens=1)[0]
    assert banned.token_id != mat and banned.stage("logit_bias").probs[0] < 1e-30
    forced = text(embedded, SamplingSettings(temperature=0, logit_bias=((42, 100),)), tokens=1)[0]
    assert forced.token_id == 42


def assert_each_row_runs_as_alone(service, rows, prompt=LOOP, tokens=8):
    """Each row of one batch draws the tokens it draws alone (its own context, its own seed)."""
    together: dict[int, list[int]] = {}
    for step in service.generate_batch([Request(prompt, s, tokens) for s in rows]):
        for i, record in enumerate(step.rows):
            if record is not None:
                together.setdefault(i, []).append(record.token_id)
    for i, s in enumerate(rows):
        alone = [r.token_id for r in text(service, s, prompt, tokens)]
        assert together[i][:len(alone)] == alone, i


def test_each_row_of_a_room_counts_its_own_context(embedded):
    # a penalised row, its plain twin and a vLLM row with a frequency penalty, in one batch and each alone
    assert_each_row_runs_as_alone(embedded, [SamplingSettings(temperature=0.8, repetition_penalty=1.3, seed=1),
                                             SamplingSettings(temperature=0.8, seed=1),
                                             SamplingSettings(temperature=0.8, frequency_penalty=0.8, order="vllm",
                                                              seed=2)])


def test_a_bias_beyond_the_vocabulary_is_refused_naming_it(embedded):
    vocab = embedded.info.vocab_size
    with pytest.raises(ValueError, match=f"logit_bias token id must be a whole number between 0 and {vocab - 1:,}"):
        text(embedded, SamplingSettings(logit_bias=((vocab, 1.0),)), tokens=1)
