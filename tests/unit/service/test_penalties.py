"""Logit bias and the penalties against their oracles: transformers' SequenceBiasLogitsProcessor and
RepetitionPenaltyLogitsProcessor for "hf", vLLM's apply_penalties and llama.cpp's penalties sampler written out
token by token (test_sampling.plain_adjusters) for the other two; small cases that say why each token moves."""

from __future__ import annotations

import itertools

import pytest
import torch

from model_service.records.settings import SamplingSettings, parse_settings, settings_from
from model_service.records.validation import InputError
from model_service.sampling.pipeline import pipeline, run_stages, sample
from model_service.sampling.reference import reference_step

from .test_sampling import ORACLES, assert_stages_match, random_logits

PROMPT, GENERATED = (5, 7, 7, 9, 2), (7, 3, 3, 3, 11)  # tokens 7 and 3 repeat; 3 only in what was generated
CONTEXT = (PROMPT, GENERATED)


def with_negatives(vocab=40, seed=0):
    x = random_logits(vocab, seed, 2.0)
    x[[5, 7, 3]] = torch.tensor([-1.5, 2.5, 0.0])  # a negative, a positive and a zero logit among the counted
    return x


GRID = [dict(order=o, repetition_penalty=r, frequency_penalty=f, presence_penalty=p, penalty_last_n=n,
             temperature=t, top_p=tp)
        for o, r, (f, p), n, t, tp in itertools.product(
            ("hf", "vllm", "llama.cpp"), (1.0, 0.7, 1.3, 2.0), ((0.0, 0.0), (0.5, 0.0), (0.0, 1.0), (-0.4, 0.6)),
            (-1, 0, 3, 64), (0.0, 0.8), (1.0, 0.9))
        if not (o == "hf" and (f, p) != (0.0, 0.0)) and not (o != "llama.cpp" and n != 64)]


@pytest.mark.parametrize("knobs", GRID, ids=lambda k: "-".join(str(v) for v in k.values()))
def test_every_stage_matches_its_engines_oracle(knobs):
    settings = SamplingSettings(**knobs, logit_bias=((1, 3.0), (7, -2.0)))
    assert_stages_match(with_negatives(), settings, ORACLES[settings.order], CONTEXT)


@pytest.mark.parametrize("order", ["hf", "vllm", "llama.cpp"])
def test_the_pipeline_equals_the_plain_reference_step_with_bias_and_penalties(order):
    extra = {} if order == "hf" else dict(frequency_penalty=0.3, presence_penalty=0.2)
    for seed in range(5):
        x = random_logits(300, seed, 3.0)
        s = SamplingSettings(order=order, repetition_penalty=1.4, top_k=20, top_p=0.9, temperature=0.7,
                             logit_bias=((4, 5.0), (299, -100.0)), penalty_last_n=4, **extra)
        final = dict(pipeline(x, s, CONTEXT))["final"]
        want, _ = reference_step(x, s, context=CONTEXT)
        torch.testing.assert_close(final, want, atol=1e-6, rtol=0)


def test_a_repetition_penalty_breaks_greedys_loop():
    # token 0 was said already: 2.0 / 1.5 = 1.33 falls under token 1's 1.9, so greedy moves on to token 1
    x = torch.tensor([2.0, 1.9, -1.0, 0.5])
    assert int(sample(x, SamplingSettings(temperature=0))[0]) == 0
    tokens, _ = sample(x, SamplingSettings(temperature=0, repetition_penalty=1.5), context=((0,), ()))
    assert int(tokens[0]) == 1


def test_a_negative_logit_is_multiplied_not_divided():
    # dividing -1.0 by 2 would make token 2 likelier; every engine multiplies a negative logit instead: -2.0
    x = torch.tensor([2.0, 1.0, -1.0, 0.0])
    for order in ("hf", "vllm", "llama.cpp"):
        stages = dict(pipeline(x, SamplingSettings(repetition_penalty=2.0, order=order), ((2, 3), ())))
        want = torch.tensor([2.0, 1.0, -2.0, 0.0]).softmax(-1)  # a zero logit stays zero
        torch.testing.assert_close(stages["penalties"], want)


def test_which_tokens_count_is_each_engines_rule():
    x = torch.zeros(6)
    prompt, generated = (1, 1, 2), (3, 3)

    def logits_after(order, **knobs):
        p = dict(pipeline(x, SamplingSettings(order=order, **knobs), (prompt, generated)))["penalties"]
        return (p.log() - p.log()[0]).tolist()  # logits up to a constant: token 0 never counted

    # vLLM's frequency penalty counts generated tokens only: token 3 twice, token 1 (the prompt's) not at all
    assert logits_after("vllm", frequency_penalty=0.5) == pytest.approx([0, 0, 0, -1.0, 0, 0], abs=1e-6)
    # llama.cpp counts prompt and generated tokens alike, within its window: the last 3 are 2, 3, 3
    assert logits_after("llama.cpp", frequency_penalty=0.5, penalty_last_n=3) == pytest.approx(
        [0, 0, -0.5, -1.0, 0, 0], abs=1e-6)
    assert logits_after("llama.cpp", presence_penalty=0.5, penalty_last_n=-1) == pytest.approx(
        [0, -0.5, -0.5, -0.5, 0, 0], abs=1e-6)
    assert logits_after("llama.cpp", presence_penalty=0.5, penalty_last_n=0) == pytest.approx([0] * 6, abs=1e-6)


def test_a_batch_of_orders_and_contexts_gives_each_row_what_it_gets_alone():
    rows = [SamplingSettings(repetition_penalty=1.3, top_k=5), SamplingSettings(),
            SamplingSettings(order="vllm", frequency_penalty=0.4, min_p=0.05, temperature=0.8),
            SamplingSettings(order="llama.cpp", presence_penalty=0.7, penalty_last_n=2, top_p=0.8),
            SamplingSettings(logit_bias=((3, 4.0),), temperature=0)]
    contexts = [((1, 2), (3,)), ((), ()), ((4,), (4, 4, 0)), ((0, 1, 2), (3, 3)), ((), (5,))]
    x = torch.stack([random_logits(500, seed, 2.0) for seed in range(len(rows))])
    batch = run_stages(x, rows, contexts=contexts)
    for i, (s, c) in enumerate(zip(rows, contexts, strict=True)):
        alone = run_stages(x[i:i + 1], [s], contexts=[c])
        torch.testing.assert_close(batch.probs["final"][i], alone.probs["final"][0], atol=1e-7, rtol=0)
        torch.testing.assert_close(batch.raw[i], x[i])  # the raw logits stay the model's
        assert batch.shown[i, :5].tolist() == x[i].topk(5).indices.tolist()  # candidates: the raw ranking


def test_greedy_reads_the_adjusted_logits_and_the_raw_stage_stays_the_models():
    x = torch.tensor([3.0, 1.0, 0.0, -1.0])
    s = SamplingSettings(temperature=0, logit_bias=((2, 5.0),))
    stages = dict(pipeline(x, s))
    torch.testing.assert_close(stages["raw"], x.softmax(-1))
    assert stages["final"].tolist() == [0, 0, 1, 0]


def test_an_order_without_a_knob_refuses_it_naming_it():
    with pytest.raises(InputError, match="frequency_penalty is not part of the hf order .transformers has no"):
        SamplingSettings(frequency_penalty=0.5)
    with pytest.raises(InputError, match="presence penalty is not part of the hf order"):
        parse_settings(1, 0, 1, 0, None, "hf", labels={"presence_penalty": "presence penalty"}, presence_penalty=0.2)
    assert SamplingSettings(order="vllm", presence_penalty=0.2).presence_penalty == 0.2


@pytest.mark.parametrize("value, says", [
    ("13:-100, 42", "logit_bias must map token ids to biases"),
    ("x:1", "logit_bias: a token id must be a whole number between 0 and"),
    ("13:-101", "logit_bias: the bias of token 13 must be a number between -100 and 100, got '-101'"),
    ({"13": 1, 13: 2}, "logit_bias: token 13 is given twice"),
    ({str(i): 1 for i in range(301)}, "logit_bias: at most 300 tokens may be biased, got 301"),
    (["13"], "logit_bias must map token ids to biases"),
])
def test_a_bad_logit_bias_is_refused_naming_the_field(value, says):
    with pytest.raises(InputError, match=says.replace("(", r"\(")):
        settings_from({"logit_bias": value})


def test_the_logit_bias_reads_every_form_a_caller_sends():
    want = ((13, -100.0), (42, 2.5))
    for value in ("42:2.5; 13:-100", {"13": -100, "42": 2.5}, {13: -100, 42: 2.5}, [[13, -100], [42, 2.5]]):
        assert settings_from({"logit_bias": value}).logit_bias == want
    assert settings_from({"logit_bias": SamplingSettings(logit_bias=want).to_dict()["logit_bias"]}).logit_bias == want
    assert SamplingSettings(logit_bias="").logit_bias == ()


def test_a_flat_list_of_token_ids_is_the_context_read_as_generated():
    x = with_negatives()
    s = SamplingSettings(order="vllm", repetition_penalty=1.3, frequency_penalty=0.4)
    flat = dict(pipeline(x, s, [*PROMPT, *GENERATED]))
    split = dict(pipeline(x, s, ((), (*PROMPT, *GENERATED))))
    torch.testing.assert_close(flat["penalties"], split["penalties"], atol=0, rtol=0)
    assert not torch.equal(flat["penalties"], dict(pipeline(x, s, CONTEXT))["penalties"])  # the split counts less
    assert torch.equal(dict(pipeline(x, s, torch.tensor([7, 3])))["final"], dict(pipeline(x, s, [7, 3]))["final"])
