"""The host's --precision (models/precision.py) and what it does to the next token (forward_pass/precision_effect.py):
the weight-only layers compute what their dequantised weights say, int4 keeps weights that are 4-bit groups already,
a quantised model stays near its float32 self, bad choices are refused by name, and the embedded model in int4 still
says " Paris" with the check beside it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model_service import limits
from model_service.forward_pass.precision_effect import compare, last_logits
from model_service.models import loading
from model_service.models.precision import Int4Linear, Int8Linear, describe, quantise
from model_service.models.row_products import RowLinear

from ..conftest import tiny_llama


def _linear(out: int, inp: int, seed: int = 0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(inp, out, bias=False)


@pytest.mark.parametrize("kind", [Int4Linear, Int8Linear])
def test_a_weight_only_layer_computes_what_its_dequantised_weight_says(kind):
    layer = kind(_linear(64, 96))
    x = torch.randn(3, 5, 96, dtype=torch.bfloat16)
    expected = F.linear(x.float(), layer.weight.float())
    got = layer(x).float()
    assert got.shape == (3, 5, 64)
    assert torch.allclose(got, expected, atol=0.05, rtol=0.02), float((got - expected).abs().max())


def test_int4_rounds_each_weight_within_half_a_step_of_its_group():
    linear = _linear(16, 64)
    layer = Int4Linear(linear)
    w = linear.weight.detach().reshape(16, 2, 32)
    step = (w.amax(-1, keepdim=True) - w.amin(-1, keepdim=True)) / 15
    error = (layer.weight.float().reshape(16, 2, 32) - w).abs()
    assert bool((error <= step / 2 + step * 0.02 + 1e-3).all())  # + the scale's and zero's bf16 rounding


def test_int4_keeps_weights_that_are_4_bit_groups_already():
    """As the embedded GGUF's Q4_1 blocks: every group d * q + m with q in 0..15 comes back to within bf16 rounding."""
    torch.manual_seed(1)
    q = torch.randint(0, 16, (32, 64)).float()
    q[:, ::32], q[:, 1::32] = 0, 15  # every group reaches both ends, as a block that spans its range
    d = torch.rand(32, 2).repeat_interleave(32, 1).bfloat16().float() / 8  # representable scales
    m = -torch.rand(32, 2).repeat_interleave(32, 1).bfloat16().float()
    linear = torch.nn.Linear(64, 32, bias=False)
    with torch.no_grad():
        linear.weight.copy_(d * q + m)
    error = (Int4Linear(linear).weight.float() - linear.weight).detach().abs().max()
    assert float(error) <= float(linear.weight.detach().abs().max()) * 2 ** -7


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_quantise_swaps_the_blocks_linear_layers_not_the_head_and_stays_near_fp32(precision):
    model = tiny_llama()
    ids = [1, 5, 9, 42, 7, 100]
    fp32 = last_logits(model, ids)
    quantised = tiny_llama().to(torch.bfloat16)
    swapped = quantise(quantised, precision)
    assert swapped == 7 * 2  # q, k, v, o, gate, up, down in each of the 2 blocks
    assert type(quantised.lm_head) is RowLinear  # the head stays in bfloat16, its one-row product through torch.mv
    here = last_logits(quantised, ids)
    spread = float(fp32.max() - fp32.min())
    assert float((here - fp32).abs().max()) < 0.1 * spread
    assert int(here.argmax()) == int(fp32.argmax())


def test_a_layer_int4_cannot_pack_stays_in_bf16():
    model = torch.nn.Sequential(torch.nn.Linear(48, 16), torch.nn.Linear(16, 64))
    model.get_output_embeddings = lambda: None
    assert quantise(model.to(torch.bfloat16), "int4") == 0  # 48 is no multiple of 32; 16 neither
    assert all(type(m) is RowLinear for m in model)


def test_a_bf16_layer_takes_one_row_through_mv_and_more_through_linear_with_the_same_numbers_and_ties_kept():
    model = tiny_llama().to(torch.bfloat16)
    model.lm_head.weight = model.model.embed_tokens.weight  # tied, as SmolLM2's
    plain = {name: (m.weight.clone(), m) for name, m in model.named_modules() if type(m) is torch.nn.Linear}
    assert quantise(model, "bf16") == 0  # no weight-only kernel in bf16: every layer keeps its weights
    assert model.lm_head.weight is model.model.embed_tokens.weight
    for name, m in model.named_modules():
        if name in plain:
            assert type(m) is RowLinear and torch.equal(m.weight, plain[name][0])
            for rows in ((1, 1), (1, 3), (2, 1)):  # one row (mv), a prompt and a batch (F.linear)
                x = torch.randn(*rows, m.in_features, dtype=torch.bfloat16)
                expected = F.linear(x.float(), m.weight.float())
                assert torch.allclose(m(x).float(), expected, atol=0.05, rtol=0.02)


def test_a_bad_precision_is_refused_by_name(monkeypatch):
    with pytest.raises(loading.ModelLoadError, match="precision must be one of fp32, bf16, int8, int4, got 'int3'"):
        loading.pick_precision("int3", torch.device("cpu"))
    with pytest.raises(loading.ModelLoadError, match="precision int4 runs on the CPU only"):
        loading.pick_precision("int4", torch.device("cuda"))
    monkeypatch.setenv("NTP_PRECISION", "fp16")
    with pytest.raises(loading.ModelLoadError, match="NTP_PRECISION must be one of"):
        loading.pick_precision(None, torch.device("cpu"))
    monkeypatch.setenv("NTP_PRECISION", "bf16")
    assert loading.pick_precision(None, torch.device("cpu")) == "bf16"
    monkeypatch.delenv("NTP_PRECISION")
    assert loading.pick_precision(None, torch.device("cpu")) == limits.PRECISION_DEFAULT["cpu"] == "fp32"


def test_the_check_against_itself_is_exact_and_against_bf16_is_not():
    model = tiny_llama()
    pieces = lambda i: type("T", (), {"id": i})()  # noqa: E731 - only ids are read here
    ids = [1, 5, 9, 42, 7, 100]
    fp32 = last_logits(model, ids)
    same = compare(fp32, fp32, pieces, len(ids), "fp32")
    assert same.max_abs_dlogit == 0 and same.same_greedy
    assert [r.rank for r in same.top] == [r.rank_fp32 for r in same.top] == sorted(r.rank for r in same.top)
    half = tiny_llama().to(torch.bfloat16)
    effect = compare(last_logits(half, ids), fp32, pieces, len(ids), "bf16")
    assert 0 < effect.max_abs_dlogit < 1
    assert effect.described == describe("bf16") == "bfloat16"
    assert abs(sum(r.prob_fp32 for r in effect.top) - sum(r.prob_fp32 for r in same.top)) < 1e-6  # the same tokens
    assert effect.top[0].prob_fp32 == max(r.prob_fp32 for r in effect.top)


@pytest.fixture(scope="module")
def int4_service():
    from model_service import ModelService

    service = ModelService.load(precision="int4", scheduler="thread")
    yield service
    service.close()


def test_the_embedded_model_in_int4_says_paris_and_shows_what_int4_did(int4_service):
    from model_service import SamplingSettings

    assert int4_service.info.precision == "int4"
    assert "int4 weights (groups of 32), bfloat16 activations" in int4_service.description
    effect = int4_service.precision_effect("The capital of France is")
    assert effect.precision == "int4" and effect.same_greedy and effect.greedy.piece == " Paris"
    assert 0 < effect.max_abs_dlogit < 1.0  # measured 0.34: SmolLM2's weights are 4-bit groups already
    assert abs(effect.top[0].prob - effect.top[0].prob_fp32) < 0.03
    other = int4_service.precision_effect("The capital of France is", precision="bf16")  # a copy, loaded in bf16
    assert (other.precision, other.running) == ("bf16", "int4") and other.greedy.piece == " Paris"
    assert other.top[0].prob_fp32 == effect.top[0].prob_fp32  # the same float32 side
    on_cpu = int4_service._precision_effect("The capital of France is", False, None, on_cpu=True)  # ZeroGPU's way
    assert on_cpu.max_abs_dlogit == effect.max_abs_dlogit and on_cpu.top == effect.top  # a copy loaded the same way
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, int4, got 'int2'"):
        int4_service.precision_effect("The capital of France is", precision="int2")
    records = list(int4_service.generate("The capital of France is", SamplingSettings(temperature=0), max_new_tokens=3,
                                         ignore_eos=True))
    assert records[0].piece == " Paris"
