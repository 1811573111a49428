"""The native decode step (models/native_step.py, native/llama_step.c): built once and cached, its records laid out as
ctypes sees them, each kind of product equal to its torch layer's numbers, a lone row's step equal to transformers'
up to round-off in every precision (tiny random Llama and the embedded model), the KV cache handed back and forth with
transformers' (a room joined and left mid-run), and transformers' step wherever the native one would skip something:
a hook, the batch-invariant mode, NTP_NATIVE_STEP=false, a model it does not cover, a machine with no compiler."""

from __future__ import annotations

import ctypes

import pytest
import torch
import torch.nn.functional as F

from model_service.engine.invariant import make_batch_invariant
from model_service.engine.runner import Decoder
from model_service.models import native_build, native_step, precision
from model_service.models.native_step import NativeLlama, Run, prepare, step_rows, unsupported

from ..conftest import tiny_llama


@pytest.fixture(scope="module")
def lib():
    lib, _ = native_build.load()
    return lib


def _product(lib, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    holder = NativeLlama.__new__(NativeLlama)
    holder.keep = []
    matrix = holder._matrix(layer)
    y = torch.zeros(layer.out_features)
    xf = x.float().contiguous()
    lib.ntp_product(ctypes.byref(matrix), xf.data_ptr(), y.data_ptr())
    return y


def test_the_library_is_built_once_then_loaded_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    _, first = native_build.load()
    _, again = native_build.load()
    assert first > 0 and again == 0.0
    assert len(list((tmp_path / "native").glob("llama_step-*.so"))) == 1


def test_a_library_laid_out_otherwise_is_refused_with_the_reason(monkeypatch):
    real = native_build.ctypes.CDLL

    class Skewed:
        def __init__(self, path):
            self.inner = real(path)
            self.ntp_layout = lambda which: 7

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(native_build.ctypes, "CDLL", Skewed)
    with pytest.raises(native_build.BuildError, match="laid out"):
        native_build.load()


@pytest.mark.parametrize("kind", ["fp32", "bf16", "int8", "int4"])
@pytest.mark.parametrize("shape", [(192, 576), (48, 64), (40, 64), (33, 96)])
def test_each_kind_of_product_gives_its_torch_layers_numbers(lib, kind, shape):
    torch.manual_seed(1)
    out, inp = shape
    linear = torch.nn.Linear(inp, out, bias=False)
    x = torch.randn(inp)
    if kind == "fp32":
        got, want = _product(lib, linear, x), F.linear(x, linear.weight)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
        return
    linear = linear.to(torch.bfloat16)
    x = x.bfloat16()  # the bf16 modes' activations
    if kind == "int4" and not precision.fits("int4", linear):
        return  # the mode keeps such a layer in bfloat16
    layer = {"int8": precision.Int8Linear, "int4": precision.Int4Linear}.get(kind, lambda same: same)(linear)
    got = _product(lib, layer, x)
    exact = x.float() @ _dequantised(layer).t()  # the weights the kernel reads, summed in float32
    assert torch.allclose(got, exact, rtol=1e-4, atol=1e-4)
    torch_layer = layer(x[None]).float()[0]  # its own kernel: rounded to bfloat16 at the end
    assert torch.allclose(got, torch_layer, rtol=2 ** -7, atol=1e-2)


def _lengths(decoder) -> list[int] | None:
    """Each row's columns in its native run, or None where the decoder never stepped natively."""
    return None if decoder._rows is None else [run.length for run in decoder._rows.runs]


def _dequantised(layer) -> torch.Tensor:
    """The float32 weights a layer's kernel multiplies by (its `weight` is those rounded to bfloat16)."""
    if hasattr(layer, "q"):
        return layer.q.float() * layer.scale.float()[:, None]
    if hasattr(layer, "nibbles"):
        out, inp = layer.out_features, layer.in_features
        groups = layer.nibbles.reshape(out, inp // 32, 16)
        q = torch.cat([groups & 15, groups >> 4], dim=-1).float()  # low nibbles: the group's first 16
        scale, zero = layer.group_scale.float()[..., None], layer.group_zero.float()[..., None]
        return ((q - 8) * scale + zero).reshape(out, inp)
    return layer.weight.float()


def _greedy(model, prompt, steps, native):
    saved = model.ntp_native
    model.ntp_native = native
    try:
        decoder = Decoder(model)
        logits = [decoder.prefill([prompt])]
        tokens = []
        for _ in range(steps):
            tokens.append(int(logits[-1][0].argmax()))
            logits.append(decoder.step([tokens[-1]]))
        return tokens, torch.cat(logits[1:]), decoder
    finally:
        model.ntp_native = saved


def _tiny(mode="fp32", layers=2, **how):
    model = tiny_llama(layers=layers, **how)
    if mode != "fp32":
        model.to(torch.bfloat16)
        precision.quantise(model, mode)
    assert prepare(model).startswith("native")
    return model


@pytest.mark.parametrize("mode", ["fp32", "bf16", "int8", "int4"])
def test_a_lone_rows_native_step_is_transformers_step_up_to_round_off(mode):
    model = _tiny(mode)
    prompt = [1, 5, 9, 200, 17]
    eager, eager_logits, _ = _greedy(model, prompt, 12, None)
    native, native_logits, decoder = _greedy(model, prompt, 12, model.ntp_native)
    assert _lengths(decoder) == [len(prompt) + 12]  # it really stepped natively
    if mode == "fp32":
        assert native == eager
        assert (native_logits - eager_logits).abs().max() < 1e-4
    else:  # bfloat16 activations: a rounding may land one bfloat16 step apart; the first step shares its input
        assert native[:2] == eager[:2]
        first = (native_logits[0] - eager_logits[0]).abs().max()
        assert first <= 0.02 * eager_logits[0].abs().max()


def test_the_rows_go_to_a_room_and_back_and_the_tokens_are_the_eager_ones():
    model = _tiny()
    prompt, other = [1, 5, 9, 200, 17], [1, 44, 3]
    want, _, _ = _greedy(model, prompt, 10, None)
    decoder = Decoder(model)
    token = int(decoder.prefill([prompt])[0].argmax())
    got = [token]
    for _ in range(3):  # alone: native
        got.append(int(decoder.step([got[-1]])[0].argmax()))
    assert _lengths(decoder) == [len(prompt) + 3]
    newcomer = Decoder(model)
    newcomer.prefill([other])
    decoder.join(newcomer)  # a room: the newcomer's cache taken into a run of its own
    assert decoder.rows == 2 and _lengths(decoder) == [len(prompt) + 3, len(other)]
    for _ in range(3):
        got.append(int(decoder.step([got[-1], 0])[0].argmax()))
    decoder.keep([0])  # alone again
    for _ in range(3):
        got.append(int(decoder.step([got[-1]])[0].argmax()))
    assert _lengths(decoder) == [len(prompt) + 9]
    assert got == want[:10]
    keys = decoder.cache.layers[0].keys  # handed back as transformers keeps it
    assert keys.shape[2] == len(prompt) + 9


def test_a_hook_on_the_model_or_the_batch_invariant_mode_takes_transformers_step():
    model = _tiny()
    prompt = [1, 5, 9]
    seen = []
    handle = model.model.layers[0].register_forward_hook(lambda *a: seen.append(1))
    try:
        _, _, decoder = _greedy(model, prompt, 3, model.ntp_native)
    finally:
        handle.remove()
    assert len(seen) == 4 and decoder._rows is None  # the prefill and 3 steps, all transformers'
    make_batch_invariant(model, True)
    try:
        _, _, decoder = _greedy(model, prompt, 3, model.ntp_native)
        assert decoder._rows is None
    finally:
        make_batch_invariant(model, False)


def test_the_host_can_turn_it_off_and_an_uncovered_model_says_why(monkeypatch):
    model = tiny_llama()
    monkeypatch.setenv("NTP_NATIVE_STEP", "false")
    assert prepare(model) == "transformers' (NTP_NATIVE_STEP=false)" and model.ntp_native is None
    monkeypatch.delenv("NTP_NATIVE_STEP")
    model.config.hidden_act = "gelu"
    assert "activation gelu" in unsupported(model)
    model.config.hidden_act = "silu"
    model.model.layers[0].self_attn.q_proj.bias = torch.nn.Parameter(torch.zeros(32))
    assert unsupported(model) == "a Linear layer"


def test_no_compiler_keeps_transformers_step_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native_build, "COMPILERS", ("no-such-cc",))
    model = tiny_llama()
    said = prepare(model)
    assert said.startswith("transformers' (no native build: no C compiler") and model.ntp_native is None
    tokens, _, decoder = _greedy(model, [1, 5, 9], 3, None)
    assert len(tokens) == 3 and decoder._rows is None


def test_a_long_run_grows_the_cache_and_a_bad_token_names_itself(monkeypatch):
    monkeypatch.setattr(native_step.limits, "NATIVE_MIN_CAPACITY", 8)
    model = _tiny()
    eager, _, _ = _greedy(model, [1, 5, 9], 20, None)
    native, _, decoder = _greedy(model, [1, 5, 9], 20, model.ntp_native)
    run = decoder._rows.runs[0]
    assert native == eager and run.capacity == 32 and isinstance(run, Run)
    with pytest.raises(ValueError, match="token id 100000"):
        step_rows([run], [100000])


def test_the_embedded_model_decodes_natively_with_transformers_tokens():
    from model_service.models.loading import load

    model, tokenizer, info = load(precision="fp32")
    assert model.ntp_native is not None and "decode step: native C step" in info.describe()
    prompt = tokenizer("The capital of France is")["input_ids"]
    eager, eager_logits, _ = _greedy(model, prompt, 24, None)
    native, native_logits, decoder = _greedy(model, prompt, 24, model.ntp_native)
    assert _lengths(decoder) == [len(prompt) + 24]
    assert native == eager
    assert (native_logits - eager_logits).abs().max() < 1e-3


def test_a_copied_or_pickled_model_has_no_native_step_pointing_at_the_originals_weights():
    import copy
    import pickle

    model = _tiny()
    assert copy.deepcopy(model).ntp_native is None
    assert pickle.loads(pickle.dumps(model)).ntp_native is None
    assert model.ntp_native is not None


@pytest.mark.parametrize("mode", ["fp32", "bf16", "int8", "int4"])
def test_a_room_steps_natively_with_every_rows_alone_numbers_and_writes_no_cache_between(mode):
    model = _tiny(mode)
    first, second, third = [1, 5, 9, 200, 17], [1, 44, 3], [1, 7, 7, 7]
    room = Decoder(model)
    tokens = [int(room.prefill([first])[0].argmax())]
    alone = {0: [], 1: [], 2: []}
    history = {0: list(first), 1: list(second), 2: list(third)}
    live = [0]
    for step in range(9):
        for at, key, prompt in ((2, 1, second), (4, 2, third)):
            if step == at:  # a newcomer joins the running rows
                newcomer = Decoder(model)
                tokens.append(int(newcomer.prefill([prompt])[0].argmax()))
                room.join(newcomer)
                live.append(key)
        if step == 7:  # the first row leaves
            room.keep([1, 2])
            tokens, live = tokens[1:], live[1:]
        logits = room.step(tokens)
        assert room._rows.shown is None  # joins and leaves moved runs, not caches
        for row, key in enumerate(live):
            history[key].append(tokens[row])
            alone[key].append(logits[row])
        tokens = logits.argmax(dim=-1).tolist()
    for key, seen in alone.items():  # each row alone, fed the same tokens: the same numbers, bit for bit
        fed = history[key]
        prompt_len = {0: len(first), 1: len(second), 2: len(third)}[key]
        decoder = Decoder(model)
        decoder.prefill([fed[:prompt_len]])
        for j, logits in enumerate(seen):
            assert torch.equal(decoder.step([fed[prompt_len + j]])[0], logits)


@pytest.mark.parametrize("mode", ["fp32", "int8"])
def test_a_full_room_of_nine_rows_gives_each_row_its_alone_numbers(mode):
    """Nine rows: the float32 room's two-weight-rows-by-four kernel (eight rows or more), a row left over, and an LM
    head of an odd number of rows (257), bit for bit each row's numbers alone."""
    model = _tiny(mode, vocab_size=257)
    prompts = [[1, 5 + i, 9, 2 * i + 3][: 2 + i % 3] for i in range(9)]
    room, tokens = Decoder(model), []
    for prompt in prompts:  # each prompt read alone, as the scheduler reads a newcomer's
        newcomer = Decoder(model)
        tokens.append(int(newcomer.prefill([prompt])[0].argmax()))
        room.join(newcomer)
    fed = [[t] for t in tokens]
    seen = []
    for _ in range(3):
        logits = room.step([f[-1] for f in fed])
        seen.append(logits)
        for f, t in zip(fed, logits.argmax(dim=-1).tolist(), strict=True):
            f.append(t)
    assert room._native() and len(room._rows.runs) == 9
    for row, prompt in enumerate(prompts):
        alone = Decoder(model)
        alone.prefill([prompt])
        for step in range(3):
            assert torch.equal(alone.step([fed[row][step]])[0], seen[step][row])


@pytest.mark.parametrize("rows", [1, 3])
def test_a_hook_put_on_mid_run_takes_transformers_steps_then_the_rows_go_native_again(rows):
    """A lesson's hook mid-run (alone or in a room): the cache written from the runs at the mask's width before the
    transformers' pass (it once was written one column wide: a zero key the row attended to)."""
    model = _tiny()
    prompts = [[1, 5, 9, 200, 17], [1, 44, 3], [1, 7, 7]][:rows]

    def run(hook_steps, native):
        saved = model.ntp_native
        model.ntp_native = native
        try:
            room, tokens = Decoder(model), []
            for prompt in prompts:
                newcomer = Decoder(model)
                tokens.append(int(newcomer.prefill([prompt])[0].argmax()))
                room.join(newcomer)
            seen, natives = [], []
            for step in range(8):
                handle = (model.model.layers[1].register_forward_hook(lambda *a: None)
                          if step in hook_steps else None)
                logits = room.step(tokens)
                if handle is not None:
                    handle.remove()
                natives.append(room._native())
                seen.append(logits)
                tokens = logits.argmax(dim=-1).tolist()
            return torch.stack(seen), natives
        finally:
            model.ntp_native = saved

    eager, _ = run(set(), None)
    mixed, natives = run({3, 4}, model.ntp_native)
    assert natives == [True, True, True, False, False, True, True, True]
    assert torch.equal(eager.argmax(dim=-1), mixed.argmax(dim=-1))
    assert (eager - mixed).abs().max() < 1e-4
