"""The busy-room lesson's measurement (model_service/forward_pass/batch_effect.py), through the service: the step
alone and in a room of 16, in both arithmetics, with the run's own u; the model is left as it was."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model_service import ModelService, SamplingSettings
from model_service.engine.invariant import invariant_attention, switchable
from model_service.records.batch_effect import BatchEffect

from ..conftest import byte_tokenizer, tiny_llama

SEEDED = SamplingSettings(temperature=1.0, top_p=0.95, seed=11)


def untouched(model) -> bool:
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return (model.config._attn_implementation == "sdpa" and not hasattr(model, "ntp_batch_invariant")
            and not any("forward" in m.__dict__ for m in linears)
            and not any("ntp_model" in m.__dict__ for m in model.modules()))


@pytest.fixture(scope="module")
def tiny_service():
    return ModelService(tiny_llama(layers=2), byte_tokenizer(), batch_invariant=False)


def test_the_step_alone_and_in_a_room_with_the_runs_own_u(tiny_service):
    records = list(tiny_service.generate("Hello there", SEEDED, 4, ignore_eos=True))
    for i in (0, 3):
        effect = tiny_service.batch_effect("Hello there", SEEDED, continue_from=[r.token_id for r in records[:i]])
        assert effect.step == i and effect.seed == 11 and effect.rows == 16
        assert effect.u == records[i].draw.u  # the u the run read at this step
        assert effect.invariant is not None and effect.invariant.max_delta == 0 and effect.invariant.changed == 0
        assert effect.invariant.alone == effect.invariant.room and effect.invariant.edge_shift == 0
        assert effect.invariant.alone.id == records[i].token_id
        assert len(effect.default.deltas) == len(effect.candidates) == len(effect.probs)
        assert BatchEffect.from_dict(effect.to_dict()) == effect  # crosses a process boundary as JSON
    assert untouched(tiny_service.model)


def test_greedy_has_no_u_and_bad_input_names_its_field(tiny_service):
    effect = tiny_service.batch_effect("Hi", {"temperature": 0})
    assert effect.u is None and effect.default.alone_draw.logit_gap is not None
    with pytest.raises(ValueError, match="continue_from"):
        tiny_service.batch_effect("Hi", SEEDED, continue_from=[10**9])
    with pytest.raises(ValueError, match="temperature"):
        tiny_service.batch_effect("Hi", {"temperature": -1})


def test_on_the_embedded_model_the_default_moves_every_logit_and_the_mode_none(embedded):
    effect = embedded.batch_effect("Once upon a time", SEEDED, continue_from=[28])
    assert 0 < effect.default.max_delta < 1e-3 and effect.default.changed > 1000  # a measurement: round-off
    assert effect.invariant.max_delta == 0 and effect.invariant.alone == effect.invariant.room
    assert effect.room_invariant == embedded.batch_invariant
    # the figure shows transformers' kernels; the note says the room itself decodes natively (bit for bit its own)
    assert effect.room_native == (embedded.model.ntp_native is not None and not embedded.batch_invariant)
    if not embedded.batch_invariant:
        assert untouched(embedded.model)


def test_switchable_puts_the_model_back_even_after_an_error():
    model = tiny_llama(layers=1)
    with pytest.raises(RuntimeError):
        with switchable(model):
            assert model.config._attn_implementation != "sdpa"
            raise RuntimeError("boom")
    assert untouched(model)


def test_invariant_attention_gives_a_row_its_own_numbers_beside_rows_of_its_length():
    """sdpa gives a row other numbers in a call of several rows: the mode calls it one row at a time."""

    class Attention(torch.nn.Module):
        num_key_value_groups = 3

    torch.manual_seed(0)
    q, k, v = torch.randn(4, 9, 1, 64), torch.randn(4, 3, 12, 64), torch.randn(4, 3, 12, 64)
    mask = torch.ones(4, 1, 1, 12, dtype=torch.bool)
    alone, _ = invariant_attention(Attention(), q[:1], k[:1], v[:1], mask[:1], scaling=0.125)
    batched, _ = invariant_attention(Attention(), q, k, v, mask, scaling=0.125)
    assert torch.equal(alone[0], batched[0])
    kk, vv = k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1)
    plain = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, scale=0.125).transpose(1, 2)
    assert torch.allclose(plain[0], alone[0], atol=1e-6)  # the same attention, up to round-off
