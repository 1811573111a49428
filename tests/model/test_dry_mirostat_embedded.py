"""DRY, mirostat and a custom chain on the embedded model: DRY stops greedy's repeated phrase and says which token
it hit, mirostat's mu moves step by step as its records say and a run continued from a record's mu draws what
the whole run drew, and each row of a room keeps its own mu."""

from __future__ import annotations

import pytest

from model_service.records.settings import Request, SamplingSettings

LOOP = "The cat sat on the mat. The cat sat on the"  # greedy repeats " mat. The cat sat on the mat."


def run(service, settings, prompt=LOOP, tokens=12, **kw):
    return list(service.generate(prompt, settings, max_new_tokens=tokens, **kw))


def test_dry_stops_a_repeated_phrase_and_names_the_token_it_hit(embedded):
    plain = run(embedded, SamplingSettings(temperature=0, order="llama.cpp"))
    assert plain[0].piece == " mat"
    dry = run(embedded, SamplingSettings(temperature=0, order="llama.cpp", dry_multiplier=0.8))
    first = dry[0]
    assert first.piece != " mat" and "The cat sat on the mat" not in dry[-1].text
    # " mat" would extend " cat sat on the" (4 tokens: the prompt's first "The" has no space): it loses
    # 0.8 x 1.75^(4 - 2) = 2.45 from its logit
    mat = plain[0].token_id
    moved = dict(first.adjusted)
    assert moved[mat] == pytest.approx(-0.8 * 1.75 ** 2, rel=1e-4)
    assert first.candidates[0].id == mat and first.stage("dry").probs[0] < first.stage("raw").probs[0] / 5
    # a repeat does not run back across a breaker (":" is one of llama.cpp's four): 3 tokens count, not 5
    colon = "The cat: sat on the mat. The cat: sat on the"
    for breakers, length in ((("\n", ":", '"', "*"), 3), ((), 5)):
        s = SamplingSettings(temperature=0, order="llama.cpp", dry_multiplier=0.8, dry_sequence_breakers=breakers)
        first = run(embedded, s, prompt=colon, tokens=1)[0]
        assert dict(first.adjusted)[mat] == pytest.approx(-0.8 * 1.75 ** (length - 2), rel=1e-4), breakers


def test_mirostat_mu_follows_each_draw_and_a_continued_run_replays_it(embedded):
    s = SamplingSettings(temperature=1.0, order="llama.cpp", mirostat=2, mirostat_tau=3.0, seed=21)
    records = run(embedded, s, prompt="The capital of France is", tokens=10)
    mu = 2 * s.mirostat_tau
    for r in records:
        assert r.stage("mirostat").applied == pytest.approx(mu, abs=1e-5)  # the cut used the mu carried in
        # it kept the candidates at most mu bits surprising after temperature, and removed the others
        for before, after in zip(r.stage("temperature").probs, r.stage("mirostat").probs):
            assert (after > 0) == (before >= 2 ** -mu) or abs(before - 2 ** -mu) < 1e-5 * before
        mu = s.next_mu(mu, r.draw.high - r.draw.low)
        assert r.mirostat_mu == pytest.approx(mu, abs=1e-9)
    # continued from step 4 with the mu its record carries: the whole run's tokens
    k = 4
    rest = run(embedded, SamplingSettings(**{**s.to_dict(), "mirostat_mu": records[k - 1].mirostat_mu}),
               prompt="The capital of France is", tokens=10, continue_from=[r.token_id for r in records[:k]])
    assert [r.token_id for r in rest] == [r.token_id for r in records[k:]]
    # mu to the forward pass's round-off: a prefill of prompt + prefix sums in another order than step-by-step decoding
    assert [r.mirostat_mu for r in rest] == pytest.approx([r.mirostat_mu for r in records[k:]], abs=1e-5)


def test_each_row_of_a_room_keeps_its_own_mu_and_chain(embedded):
    rows = [SamplingSettings(temperature=1.0, order="llama.cpp", mirostat=2, mirostat_tau=2.0, seed=1),
            SamplingSettings(temperature=1.0, order="llama.cpp", mirostat=1, mirostat_tau=5.0, seed=2),
            SamplingSettings(temperature=0.8, order=["min_p", "temperature", "top_k"], min_p=0.05, top_k=20, seed=3),
            SamplingSettings(temperature=0.8, order="llama.cpp", dry_multiplier=1.0, seed=4)]
    together: dict[int, list] = {}
    for step in embedded.generate_batch([Request(LOOP, s, 8) for s in rows]):
        for i, record in enumerate(step.rows):
            if record is not None:
                together.setdefault(i, []).append((record.token_id, record.mirostat_mu))
    for i, s in enumerate(rows):
        alone = [(r.token_id, r.mirostat_mu) for r in run(embedded, s, tokens=8)]
        mine = together[i][:len(alone)]
        assert [t for t, _ in mine] == [t for t, _ in alone], i
        assert [m or 0.0 for _, m in mine] == pytest.approx([m or 0.0 for _, m in alone], abs=1e-5), i


def test_a_custom_chain_with_llama_cpps_order_draws_llama_cpps_tokens(embedded):
    knobs = dict(temperature=0.9, top_k=40, top_p=0.9, min_p=0.05, seed=17)
    llama = run(embedded, SamplingSettings(order="llama.cpp", **knobs), tokens=8)
    custom = run(embedded, SamplingSettings(order="top_k > top_p > min_p > temperature", **knobs), tokens=8)
    assert [r.token_id for r in custom] == [r.token_id for r in llama]
    assert [s.name for s in custom[0].stages] == ["raw", "top_k", "top_p", "min_p", "temperature", "final"]
    assert custom[0].order == "custom"
