"""Interventions (forward_pass/attribution.py, knockout.py) on the tiny Llama and both offline models: the
attribution adds up to the model's own logit difference, a knock-out equals the model with that part's weights
removed, and bad targets are named."""

from __future__ import annotations

import copy

import pytest
import torch

from model_service import ModelService, SamplingSettings
from model_service.forward_pass.attribution import parts
from model_service.records.intervention import Attribution, Knockout, KnockoutResult

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def gemma():
    return ModelService.load("gemma3-270m")


def model_logits(service, ids, model=None) -> torch.Tensor:
    with torch.inference_mode():
        out = (model or service.model)(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0, -1].float()


@pytest.mark.parametrize("which", ["tiny", "embedded", "gemma"])
def test_the_parts_add_up_to_the_logit_difference_and_the_heads_to_their_block(which, request):
    service = request.getfixturevalue({"tiny": "tiny_service", "embedded": "embedded", "gemma": "gemma"}[which])
    prompt = "hello world" if which == "tiny" else PROMPT
    a = service.attribute(prompt)
    logits = model_logits(service, service.encode(prompt))
    top = logits.topk(2).indices.tolist()
    assert (a.candidate.id, a.rival.id) == tuple(top)
    assert a.logit_diff == pytest.approx(float(logits[top[0]] - logits[top[1]]), abs=1e-4)
    total = a.embedding + sum(a.attention) + sum(a.mlp) + a.bias
    assert total == pytest.approx(a.logit_diff, abs=1e-4 * max(1.0, abs(a.logit_diff))) and a.residual_error < 1e-3
    assert a.lens[-1] == pytest.approx(a.logit_diff, abs=1e-4)  # the lens after the last block is the model's own
    n = service.model.config.get_text_config().num_hidden_layers
    assert len(a.attention) == len(a.mlp) == len(a.lens) == n
    assert a.head_note == "" and len(a.heads) == parts(service.model, a.head_block).heads
    assert sum(a.heads) == pytest.approx(a.attention[a.head_block - 1], abs=1e-3)
    other = service.attribute(prompt, candidate=top[1], rival=top[0], head_block=1)
    assert other.logit_diff == pytest.approx(-a.logit_diff, abs=1e-4) and other.head_block == 1
    assert Attribution.from_dict(a.to_dict()) == a


def surgery(model, target: Knockout):
    """A copy of the model with the target's weights set to zero: an oracle that shares no code with the hooks."""
    copied = copy.deepcopy(model)
    layer_parts = parts(copied, target.block)
    with torch.no_grad():
        if target.kind == "mlp":
            layer_parts.mlp.down_proj.weight.zero_()
        elif target.kind == "attention":
            layer_parts.out_proj.weight.zero_()
        else:
            size = layer_parts.out_proj.in_features // layer_parts.heads
            layer_parts.out_proj.weight[:, (target.head - 1) * size:target.head * size] = 0
    return copied


@pytest.mark.parametrize("which", ["embedded", "gemma"])
@pytest.mark.parametrize("target", [Knockout("mlp", 3), Knockout("attention", 2), Knockout("head", 4, 2)])
def test_a_knockout_equals_the_model_with_that_parts_weights_removed(which, target, request):
    service = request.getfixturevalue(which)
    result = service.knock_out(PROMPT, target, SamplingSettings(temperature=1.0, top_p=0.9, seed=7))
    ids = service.encode(PROMPT)
    oracle = model_logits(service, ids, surgery(service.model, target))
    before = model_logits(service, ids)
    assert result.max_abs_dlogit == pytest.approx(float((oracle - before).abs().max()), rel=1e-3, abs=1e-3)
    after_p = float(oracle.softmax(-1)[result.candidate.id])
    assert result.prob_after == pytest.approx(after_p, rel=1e-3, abs=1e-6)
    assert result.candidate.id == int(before.argmax()) and result.rank_before == 1
    assert result.after.stage("raw").probs[0] == pytest.approx(float(oracle.softmax(-1).max()), rel=1e-3)
    assert KnockoutResult.from_dict(result.to_dict()) == result


def test_the_mean_of_a_part_replaces_it_at_every_position(tiny_service):
    ids = tiny_service.encode("hello world")
    layer = parts(tiny_service.model, 1)
    seen = {}
    handle = layer.mlp.register_forward_hook(lambda _m, _a, out: seen.setdefault("mlp", out.detach().clone()))
    model_logits(tiny_service, ids)
    handle.remove()

    class Mean(torch.nn.Module):
        def forward(self, x):
            return seen["mlp"].mean(dim=1, keepdim=True).expand_as(seen["mlp"])

    copied = copy.deepcopy(tiny_service.model)
    copied.model.layers[0].mlp = Mean()
    oracle = model_logits(tiny_service, ids, copied)
    result = tiny_service.knock_out("hello world", {"kind": "mlp", "block": 1, "mode": "mean"}, {"temperature": 0})
    assert result.prob_after == pytest.approx(float(oracle.softmax(-1)[result.candidate.id]), rel=1e-4)


def test_before_is_the_runs_own_first_step_at_the_same_seed(embedded):
    settings = SamplingSettings(temperature=0.8, top_k=20, seed=11)
    first = next(iter(embedded.generate(PROMPT, settings, max_new_tokens=1)))
    result = embedded.knock_out(PROMPT, Knockout("mlp", 30), settings)
    assert result.before.token_id == first.token_id and result.before.draw.u == first.draw.u
    assert result.before.stage("final").probs == pytest.approx(first.stage("final").probs, abs=1e-5)
    assert result.after.draw.u == first.draw.u  # the same u: a change of token is the knock-out's


@pytest.mark.parametrize("target, field", [
    ({"kind": "neuron", "block": 1}, "kind"), ({"kind": "mlp", "block": 0}, "block"),
    ({"kind": "mlp", "block": 2.5}, "block"), ({"kind": "head", "block": 1, "head": 99}, "head"),
    ({"kind": "head", "block": 1}, "head"), ({"kind": "mlp", "block": 1, "mode": "half"}, "mode"),
    ({"kind": "mlp", "block": 1, "layer": 2}, "layer"), ("mlp", "target"), ({"block": 1}, "kind")])
def test_a_bad_target_is_named(tiny_service, target, field):
    with pytest.raises(ValueError, match=field):
        tiny_service.knock_out("hello", target)


def test_bad_tokens_are_named(tiny_service):
    with pytest.raises(ValueError, match="candidate"):
        tiny_service.attribute("hello", candidate=10**6)
    with pytest.raises(ValueError, match="rival"):
        tiny_service.attribute("hello", candidate=5, rival=5)
    with pytest.raises(ValueError, match="head_block"):
        tiny_service.attribute("hello", head_block=9)
    with pytest.raises(ValueError, match="candidate"):
        tiny_service.knock_out("hello", Knockout("mlp", 1), candidate=-1)


@pytest.mark.parametrize("which", ["embedded", "gemma"])
def test_patching_every_position_after_the_last_block_gives_the_source_its_own_next_token(which, request):
    service = request.getfixturevalue(which)
    source = "The capital of Italy is"
    n = service.model.config.get_text_config().num_hidden_layers
    r = service.patch(PROMPT, source, [(None, n), (None, 1), (0, n)])
    own, other = model_logits(service, service.encode(PROMPT)), model_logits(service, service.encode(source))
    assert r.candidate.id == int(own.argmax()) and r.source == pytest.approx(
        (float(other.softmax(-1)[r.candidate.id]), float(other.softmax(-1)[r.source_answer.id])), rel=1e-4, abs=1e-7)
    every_last, every_first, first_last = r.cells
    assert every_last.source_answer == pytest.approx(r.source[1], rel=1e-4, abs=1e-7)
    assert every_first.source_answer == pytest.approx(r.source[1], rel=1e-3, abs=1e-6)  # (after block 1: all of it)
    assert first_last.candidate == pytest.approx(r.clean[0], rel=1e-4)  # position 0 after the last block: unread


def test_the_subject_carries_rome_until_the_last_position_takes_it(embedded):
    """The lesson's picture on SmolLM2: " Italy"'s stream brings " Rome" back early on, the last position's late."""
    r = embedded.patch(PROMPT, "The capital of Italy is", [(p, b) for p in (3, 4) for b in (2, 12, 29)])
    p = {(c.position, c.block): c.source_answer for c in r.cells}
    assert r.candidate.piece == " Paris" and r.source_answer.piece == " Rome"
    assert p[(3, 2)] > r.source[1] / 2 > p[(4, 2)] and p[(4, 29)] > r.source[1] / 2 > p[(3, 29)]


@pytest.mark.parametrize("source, cells, field", [
    ("The capital of Italy is now", [(0, 1)], "source must have as many tokens"), ("The capital of Italy is", [], "cells"),
    ("The capital of Italy is", [(9, 1)], "position"), ("The capital of Italy is", [(0, 0)], "block"),
    ("The capital of Italy is", [5], "cells"), ("", [(0, 1)], "source")])
def test_a_bad_patch_is_named(embedded, source, cells, field):
    with pytest.raises(ValueError, match=field):
        embedded.patch(PROMPT, source, cells)


def test_a_steered_run_beside_its_plain_twin(embedded):
    settings = SamplingSettings(temperature=0.7, seed=3)
    prompt, towards, away = "I think that this movie is", "I love this. It is wonderful", "I hate this. It is terrible"
    room = [r.token_id for r in embedded.generate(prompt, settings, max_new_tokens=8)]
    still = embedded.steer(prompt, towards, away, 10, 0.0, settings, 8)
    assert [r.token_id for r in still.plain] == [r.token_id for r in still.steered] == room  # the room's own run
    assert still.parted_at is None and still.seed == 3
    pushed = embedded.steer(prompt, towards, away, 10, 4.0, settings, 8)
    assert pushed.parted_at is not None and [r.token_id for r in pushed.plain] == room
    i = pushed.parted_at
    assert pushed.plain[i].draw.u == pushed.steered[i].draw.u  # the same u: the direction moved the bar
    assert pushed.direction_norm > 0 and pushed.stream_norm > 0
    from model_service.records.intervention import SteerResult
    assert SteerResult.from_dict(pushed.to_dict()) == pushed


@pytest.mark.parametrize("kwargs, field", [({"block": 0}, "block"), ({"scale": 99}, "scale"), ({"towards": ""}, "towards"),
                                           ({"max_new_tokens": 500}, "max_new_tokens"), ({"away": 5}, "away")])
def test_a_bad_steer_is_named(tiny_service, kwargs, field):
    args = {"prompt": "hello", "towards": "good", "away": "bad", "block": 1, "scale": 1.0, **kwargs}
    with pytest.raises(ValueError, match=field):
        tiny_service.steer(**args)


def test_steering_reads_the_last_blocks_stream_before_the_final_norm(tiny_service):
    """transformers' hidden_states[L] already has the final norm; the steering hook adds to the block's output."""
    from model_service.forward_pass.lm_head import final_norm
    from model_service.forward_pass.steering import stream_after

    model, ids = tiny_service.model, tiny_service.encode("hello world")
    n = model.config.get_text_config().num_hidden_layers
    with torch.inference_mode():
        hidden = model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False).hidden_states
        last = stream_after(model, ids, n)
        assert torch.allclose(final_norm(model)(last[None])[0], hidden[n][0, -1].float(), atol=1e-5)
        assert torch.allclose(stream_after(model, ids, 1), hidden[1][0, -1].float(), atol=1e-6)
