"""One-row products on a CPU (models/row_products.py): a RowLinear layer's one-row product through its kernel gives
F.linear's numbers up to float32 round-off, more rows and autograd take F.linear itself, a tied head stays tied, the
load-time choice swaps the layers only where numpy's BLAS measured faster by the margin, the batch-invariant switch
keeps the layer's own kernel when the mode is off, and numpy's BLAS threads follow torch's."""

from __future__ import annotations

import json
import logging

import pytest
import torch
import torch.nn.functional as F

from model_service import limits
from model_service.engine.invariant import make_batch_invariant, mode
from model_service.engine.runner import Decoder
from model_service.models import row_products
from model_service.models.row_products import RowLinear, blas_threads, fastest, plain_linears, rows_through

from ..conftest import blas_threads_now, tiny_llama


def _layer(out: int = 96, inp: int = 64, bias: bool = True, seed: int = 0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(inp, out, bias=bias)


@pytest.mark.parametrize("kernel", ["blas", "mv"])
@pytest.mark.parametrize("bias", [True, False])
def test_one_row_through_the_kernel_is_f_linear_up_to_round_off_and_more_rows_are_f_linear(kernel, bias):
    linear = _layer(bias=bias)
    row = RowLinear.of(linear, kernel)
    assert row.weight is linear.weight and row.bias is linear.bias
    with torch.inference_mode():
        for shape in ((1, 1, 64), (64,), (1, 64)):  # a decode step's row, however it is shaped
            x = torch.randn(*shape)
            got, want = row(x), F.linear(x, linear.weight, linear.bias)
            assert got.shape == want.shape
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
        for shape in ((1, 3, 64), (2, 1, 64)):  # a prompt and a batch: F.linear's own numbers
            x = torch.randn(*shape)
            assert torch.equal(row(x), F.linear(x, linear.weight, linear.bias))


def test_the_blas_kernel_is_the_one_that_runs(monkeypatch):
    """Not F.linear under another name: a one-row product reaches numpy's matmul (and only a one-row product)."""
    calls = []
    real = torch.Tensor.numpy

    def spy(self, *args, **kwargs):
        calls.append(tuple(self.shape))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "numpy", spy)
    row = RowLinear.of(_layer(), "blas")
    with torch.inference_mode():
        row(torch.randn(1, 1, 64))
        assert calls == [(96, 64), (64,)]
        row(torch.randn(1, 2, 64))
    assert len(calls) == 2


def test_autograd_and_another_dtype_take_f_linear():
    linear = _layer()
    row = RowLinear.of(linear, "blas")
    x = torch.randn(1, 1, 64, requires_grad=True)
    y = row(x)
    assert y.grad_fn is not None and torch.equal(y, F.linear(x, linear.weight, linear.bias))
    y.sum().backward()
    assert x.grad is not None
    with torch.inference_mode():  # a bfloat16 row by a float32 layer: numpy has no bfloat16, torch.mv casts
        x16 = torch.randn(1, 1, 64, dtype=torch.bfloat16)
        assert torch.allclose(row(x16), F.linear(x16.float(), linear.weight, linear.bias), rtol=1e-5, atol=1e-6)


def test_a_compiled_graph_traces_the_layer_whole():
    row = RowLinear.of(_layer(), "blas")
    compiled = torch.compile(row, backend="aot_eager", fullgraph=True)
    x = torch.randn(1, 1, 64)
    with torch.inference_mode():
        assert torch.allclose(compiled(x), row(x), rtol=1e-5, atol=1e-6)


def test_a_bad_kernel_is_refused_by_name():
    with pytest.raises(ValueError, match="kernel must be one of"):
        RowLinear.of(_layer(), "fast")


def test_a_tied_head_stays_tied_and_a_model_decodes_the_same_tokens():
    model = tiny_llama(layers=2)
    model.lm_head.weight = model.model.embed_tokens.weight
    plain = tiny_llama(layers=2)
    plain.lm_head.weight = plain.model.embed_tokens.weight
    assert rows_through(model, "blas") == 2 * 7 + 1
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not plain_linears(model)  # every layer swapped; none left plain
    ids = [[1, 5, 9, 42, 7, 100]]
    ours, theirs = Decoder(model, 0), Decoder(plain, 0)
    a, b = ours.prefill(ids), theirs.prefill(ids)
    for _ in range(6):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5) and int(a.argmax()) == int(b.argmax())
        token = int(a.argmax())
        a, b = ours.step([token]), theirs.step([token])


@pytest.mark.parametrize("gain, swapped", [(limits.ROW_BLAS_GAIN + 0.5, 15), (limits.ROW_BLAS_GAIN - 0.2, 0)])
def test_the_load_time_choice_takes_numpy_only_past_the_margin(monkeypatch, caplog, gain, swapped):
    timed = {"torch": gain * 1e-3, "blas": 1e-3}
    monkeypatch.setattr(row_products, "time_one_row", lambda weights, kernel, **how: timed[kernel])
    model = tiny_llama(layers=2)
    with caplog.at_level(logging.INFO, logger=row_products.__name__):
        assert fastest(model) == swapped
    assert sum(type(m) is RowLinear for m in model.modules()) == swapped
    assert f"({gain:.2f}x)" in caplog.text
    # what the model card says: the kernel and its gain, only where it was taken
    said = getattr(model, "ntp_row_products", "")
    assert said == (f"numpy's BLAS ({gain:.1f}x torch's)" if swapped else "")


def test_a_kept_gain_is_read_back_at_a_later_start_and_a_spoilt_one_measured_again(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(row_products, "time_one_row",
                        lambda weights, kernel, **how: calls.append(kernel) or {"torch": 2e-3, "blas": 1e-3}[kernel])
    assert fastest(tiny_llama(layers=2), tmp_path) == 15 and len(calls) == 2 * limits.ROW_TIMING_ROUNDS
    kept = list(tmp_path.iterdir())
    assert len(kept) == 1 and json.loads(kept[0].read_text())["gain"] == 2.0
    calls.clear()
    model = tiny_llama(layers=2)
    assert fastest(model, tmp_path) == 15 and calls == []  # read back: nothing timed
    assert model.ntp_row_products == "numpy's BLAS (2.0x torch's)"
    assert fastest(tiny_llama(layers=1), tmp_path) == 8 and calls  # other layers: measured for themselves
    calls.clear()
    kept[0].write_text("{not json")
    assert fastest(tiny_llama(layers=2), tmp_path) == 15 and len(calls) == 2 * limits.ROW_TIMING_ROUNDS


def test_the_model_card_names_the_one_row_kernel_of_a_float32_cpu_load():
    from model_service.models.loading import load

    model, _, info = load(precision="fp32")
    blas = [m for m in model.modules() if type(m) is RowLinear and m.kernel == "blas"]
    assert bool(blas) == bool(info.row_products)  # on this CPU or not: the card says what the layers run
    native = model.ntp_native is not None  # a lone row's step in C (native_step.py): the card names that instead
    assert ("decode step: native C step" in info.describe()) == native
    assert ("one-row products: numpy's BLAS" in info.describe()) == (bool(blas) and not native)
    assert info.dtype == "float32"


def test_the_choice_is_measured_on_the_models_own_layers_and_a_bf16_model_is_not_timed(monkeypatch):
    seen, timer = [], row_products.time_one_row
    monkeypatch.setattr(row_products, "time_one_row",
                        lambda weights, kernel, **how: seen.append((len(weights), kernel, how["warm"])) or 1.0)
    fastest(tiny_llama(layers=2))
    # interleaved, each warmed once: torch, numpy, torch, numpy, ...
    assert seen == [(15, k, n == 0) for n in range(limits.ROW_TIMING_ROUNDS) for k in ("torch", "blas")]
    seen.clear()
    assert fastest(tiny_llama(layers=2).to(torch.bfloat16)) == 0 and seen == []
    assert timer([_layer().weight.detach()], "blas", rounds=1) > 0 < timer([_layer().weight.detach()], "torch", 1, False)


def test_the_batch_invariant_switch_keeps_the_layers_own_kernel_when_the_mode_is_off(monkeypatch):
    calls = []
    own = RowLinear.forward
    monkeypatch.setattr(RowLinear, "forward", lambda self, x: calls.append(x.shape) or own(self, x))
    model = tiny_llama(layers=1)
    rows_through(model, "blas")
    make_batch_invariant(model, on=False, switchable=True)
    with mode(False):
        Decoder(model, 0).prefill([[1, 5, 9]])
    assert len(calls) == 7 + 1
    calls.clear()
    with mode(True):  # the mode's tiles instead
        Decoder(model, 0).prefill([[1, 5, 9]])
    assert calls == []


def test_numpy_blas_threads_follow_the_number_given():
    before = blas_threads_now()
    try:
        blas_threads(1)
        assert blas_threads_now() == {1}
    finally:
        blas_threads(max(before) if before else 1)
