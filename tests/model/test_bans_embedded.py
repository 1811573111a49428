"""The bans on the embedded model: a no-repeat n-gram breaks greedy's loop and no n-gram repeats, min_tokens holds
the end token back until enough tokens are generated (and not when the request ignores it), a banned token is named
in the record as banned (null in JSON), and each row of a room bans by its own context."""

from __future__ import annotations

import json

from model_service.records.settings import SamplingSettings
from model_service.records.step import StepRecord

from .test_penalties_embedded import assert_each_row_runs_as_alone

LOOP = "The cat sat on the mat. The cat sat on the"  # greedy repeats " mat. The cat sat on the mat."
SHORT = "What is 2+2? Answer with a number only."  # greedy's chat answer "2 + 2 = 4" ends within 8 tokens


def run(service, settings, prompt=LOOP, tokens=12, chat=False, **kw):
    return list(service.generate(prompt, settings, max_new_tokens=tokens, chat=chat, **kw))


def test_a_no_repeat_ngram_breaks_greedys_loop_and_no_trigram_repeats(embedded):
    plain = run(embedded, SamplingSettings(temperature=0))
    assert plain[0].piece == " mat"
    records = run(embedded, SamplingSettings(temperature=0, no_repeat_ngram_size=3))
    first = records[0]
    assert first.piece != " mat" and first.candidates[0].piece == " mat"  # the candidates stay the raw ranking
    ban = first.stage("no_repeat_ngram")
    assert ban.probs[0] == 0 and ban.kept_count == first.stage("raw").kept_count - 1 and ban.kept_mass < 0.9
    assert (first.candidates[0].id, None) in first.adjusted  # named as banned, not as a number
    ids = embedded.encode(LOOP) + [r.token_id for r in records]
    trigrams = [tuple(ids[i:i + 3]) for i in range(len(ids) - 2)]
    assert len(set(trigrams[-len(records):])) == len(records) and not set(trigrams[-len(records):]) & set(
        trigrams[: -len(records)])


def test_min_tokens_holds_the_end_token_back(embedded):
    plain = run(embedded, SamplingSettings(temperature=0), SHORT, 20, chat=True)
    assert plain[-1].stop_reason == "eos" and len(plain) < 10
    eos = plain[-1].token_id
    for order in ("vllm", "hf"):
        held = run(embedded, SamplingSettings(temperature=0, min_tokens=10, order=order), SHORT, 20, chat=True)
        assert all(r.stop_reason != "eos" for r in held[:10]), order
        assert held[len(plain) - 1].token_id != eos and (eos, None) in held[len(plain) - 1].adjusted
        assert all((eos, None) not in r.adjusted for r in held[10:])  # from the 11th token on, it may end
    # a request that ignores the end token has none to hold back: the step is the plain one
    ignored = run(embedded, SamplingSettings(temperature=0, min_tokens=10, order="vllm"), SHORT, 3, chat=True,
                  ignore_eos=True)
    assert all(r.adjusted == () for r in ignored)


def test_a_banned_token_reads_null_in_json_and_round_trips(embedded):
    first = run(embedded, SamplingSettings(temperature=0, no_repeat_ngram_size=2), tokens=1)[0]
    text = json.dumps(first.to_dict(), allow_nan=False)  # strict JSON: no -Infinity
    back = StepRecord.from_dict(json.loads(text))
    assert back == first and any(v is None for _, v in back.adjusted)


def test_each_row_of_a_room_bans_by_its_own_context(embedded):
    assert_each_row_runs_as_alone(embedded, [SamplingSettings(temperature=0.9, no_repeat_ngram_size=2, seed=3),
                                             SamplingSettings(temperature=0.9, seed=3),
                                             SamplingSettings(temperature=0.9, min_tokens=6, order="vllm", seed=4)])


def test_vllm_looks_for_stop_strings_only_after_min_tokens_and_hf_at_once(embedded):
    def ends(settings):
        records = run(embedded, settings, SHORT, 20, chat=True, stop=["="])
        return len(records), records[-1].stop_reason, records[-1].text

    n, reason, text = ends(SamplingSettings(temperature=0, order="vllm"))
    assert reason == "stop_string" and n < 6 and text == "2 + 2 "
    assert ends(SamplingSettings(temperature=0, order="hf", min_tokens=6)) == (n, reason, text)  # transformers
    n_held, reason_held, text_held = ends(SamplingSettings(temperature=0, order="vllm", min_tokens=6))
    assert n_held > 6 and "=" in text_held  # the "=" came before min_tokens: vLLM does not stop on it
