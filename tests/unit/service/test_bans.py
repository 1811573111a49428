"""The bans against their oracles: transformers' NoRepeatNGramLogitsProcessor and MinNewTokensLengthLogitsProcessor
for "hf", vLLM's min_tokens written out (oracles.plain_adjusters) for "vllm"; the plain reference step; 4-token
cases that say why each token is banned or not; each order refusing what its engine lacks, naming the field."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import torch

from model_service.records.settings import SamplingSettings, parse_settings, settings_from
from model_service.records.validation import InputError
from model_service.sampling.bans import ngram_banned
from model_service.sampling.penalties import RowContext
from model_service.sampling.pipeline import pipeline, run_stages, sample
from model_service.sampling.reference import reference_step

from .test_sampling import ORACLES, assert_stages_match, random_logits

EOS = frozenset({39})


def contexts(count: int, vocab: int = 12, seed: int = 0):
    """Random short contexts over a small vocabulary, so that n-grams repeat."""
    rng = random.Random(seed)
    for _ in range(count):
        prompt = [rng.randrange(vocab) for _ in range(rng.randrange(0, 8))]
        generated = [rng.randrange(vocab) for _ in range(rng.randrange(0, 8))]
        yield RowContext(prompt, generated, stop_ids=EOS)


GRID = [dict(order=o, no_repeat_ngram_size=n, min_tokens=m, temperature=t, top_k=k, repetition_penalty=r)
        for o, n, m, t, k, r in itertools.product(("hf", "vllm"), (0, 1, 2, 3, 5), (0, 1, 4, 9), (0.0, 0.9), (0, 5),
                                                   (1.0, 1.3))
        if not (o == "vllm" and n)]


@pytest.mark.parametrize("knobs", GRID, ids=lambda k: "-".join(str(v) for v in k.values()))
def test_every_stage_matches_its_engines_oracle(knobs):
    settings = SamplingSettings(**knobs, logit_bias=((1, 2.0),))
    x = random_logits(40, 3, 2.0)
    for context in contexts(12, seed=knobs["no_repeat_ngram_size"] * 10 + knobs["min_tokens"]):
        assert_stages_match(x, settings, ORACLES[settings.order], context)


@pytest.mark.parametrize("order", ["hf", "vllm"])
def test_the_pipeline_equals_the_plain_reference_step_with_bans(order):
    extra = dict(no_repeat_ngram_size=2) if order == "hf" else {}
    s = SamplingSettings(order=order, min_tokens=5, top_k=8, top_p=0.9, temperature=0.7, repetition_penalty=1.2, **extra)
    for i, context in enumerate(contexts(20, seed=7)):
        x = random_logits(40, i, 3.0)
        final = dict(pipeline(x, s, context))["final"]
        want, _ = reference_step(x, s, context=context[:2], stop_ids=context.stop_ids)
        torch.testing.assert_close(final, want, atol=1e-6, rtol=0)


def test_ngram_banned_says_why_each_token_goes():
    # context 1 2 3 1 2 | bigrams: (1,2) (2,3) (3,1) (1,2): the last token is 2, and 2 was followed by 3 once
    assert ngram_banned([1, 2, 3, 1, 2], 2) == {3}
    # trigrams: the last two tokens (1, 2) were followed by 3: token 3 would repeat "1 2 3"
    assert ngram_banned([1, 2, 3, 1, 2], 3) == {3}
    # n = 1: every token seen is banned
    assert ngram_banned([1, 2, 3, 1, 2], 1) == {1, 2, 3}
    # "1 2" never repeated as a 4-gram's head: nothing; a context shorter than n - 1 bans nothing
    assert ngram_banned([1, 2, 3, 1, 2], 4) == set() and ngram_banned([1], 3) == set()


def test_four_tokens_no_repeat_ngram_breaks_greedys_loop():
    # token 0 is the argmax, but "3 0" already happened and the context ends in 3: a 2-gram ban removes it
    x = torch.tensor([2.0, 1.9, -1.0, 0.5])
    context = RowContext((3, 0, 1), (3,))
    assert int(sample(x, SamplingSettings(temperature=0), context=context)[0][0]) == 0
    got = dict(pipeline(x, SamplingSettings(temperature=0, no_repeat_ngram_size=2), context))
    assert got["no_repeat_ngram"][0] == 0 and got["final"].argmax() == 1  # 1 was never after 3: it stays
    assert got["no_repeat_ngram"][2] > 0 and got["no_repeat_ngram"][3] > 0  # 2 and 3 never followed 3


def test_four_tokens_min_tokens_holds_the_end_token_back_then_lets_it_go():
    x = torch.tensor([3.0, 1.0, 0.0, -1.0])  # token 0 plays the end token
    s = SamplingSettings(order="vllm", temperature=0, min_tokens=2)
    early = dict(pipeline(x, s, RowContext((5,), (1,), stop_ids=frozenset({0}))))
    assert early["min_tokens"][0] == 0 and early["final"].argmax() == 1  # one token generated: 0 is held back
    late = dict(pipeline(x, s, RowContext((5,), (1, 2), stop_ids=frozenset({0}))))
    assert late["min_tokens"][0] > 0.8 and late["final"].argmax() == 0  # two generated: it may end
    # no end ids given (a request that ignores the end token): nothing is held back
    assert dict(pipeline(x, s, RowContext((5,), (1,))))["final"].argmax() == 0


def test_a_ban_counts_as_a_cut_kept_count_and_mass():
    x = random_logits(50, 1, 2.0)
    context = RowContext([1, 2, 3, 1, 2], [3, 1, 2], stop_ids=frozenset({4}))
    s = SamplingSettings(no_repeat_ngram_size=2, min_tokens=9)
    stages = run_stages(x[None], [s], contexts=[context])
    assert int(stages.dists["no_repeat_ngram"].count[0]) == 49  # 3 followed 2 before
    assert int(stages.dists["min_tokens"].count[0]) == 48 and int(stages.dists["final"].count[0]) == 48
    p = x.softmax(-1)
    assert float(stages.probs["no_repeat_ngram"][0].sum()) == pytest.approx(1.0, abs=1e-6)
    assert float(stages.probs["min_tokens"][0][4]) == 0 and float(p[4]) > 0


@pytest.mark.parametrize("order,field,message", [
    ("vllm", "no_repeat_ngram_size", "only transformers has a no-repeat n-gram ban"),
    ("llama.cpp", "no_repeat_ngram_size", "only transformers"),
    ("llama.cpp", "min_tokens", "llama.cpp has no min_tokens"),
    ("custom", "min_tokens", "a custom chain follows llama.cpp"),
])
def test_an_order_refuses_the_bans_its_engine_lacks_naming_the_field(order, field, message):
    chain = {"chain": ("top_k",)} if order == "custom" else {}
    with pytest.raises(InputError, match=f"^{field} is not part of the {order} order.*{message}"):
        SamplingSettings(order=order, **chain, **{field: 2})
    with pytest.raises(ValueError, match=f"^{field} is not part of"):
        settings_from({"order": order, **chain, field: 2})


@pytest.mark.parametrize("field,value", [("no_repeat_ngram_size", -1), ("no_repeat_ngram_size", 65),
                                         ("no_repeat_ngram_size", 1.5), ("min_tokens", 513), ("min_tokens", "many")])
def test_bad_values_are_refused_naming_the_field(field, value):
    with pytest.raises(InputError, match=f"^{field} must be a whole number"):
        SamplingSettings(**{field: value})
    with pytest.raises(InputError, match="^no-repeat n-gram"):
        parse_settings(1, 0, 1, 0, None, "hf", labels={"no_repeat_ngram_size": "no-repeat n-gram"},
                       no_repeat_ngram_size=-2)


def test_the_knobs_round_trip_as_json():
    s = SamplingSettings(no_repeat_ngram_size=3, min_tokens=4)
    assert settings_from(json.loads(json.dumps(s.to_dict()))) == s
    assert settings_from({"no_repeat_ngram_size": "3", "min_tokens": "4"}) == s  # text, as a table cell sends it
