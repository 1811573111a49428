"""A CPU decode step as one call into C (native/llama_step.c, native/products.h), for Llama-family models: a lone
learner's and a room's rows together.

Why: an eager decode step of the embedded SmolLM2 launches ~700 torch operators from Python, and its one-row matrix
products read the weights at 16-31 GB/s (bench/bench_peer.py --kernels), where llama.cpp reads the same weights at
~38 GB/s on one thread. The C step does what transformers' LlamaForCausalLM does for one new token (RMSNorm, the
q/k/v products, rotary, attention over each row's KV cache, SwiGLU, the LM head) in one call that releases the GIL,
every weight read once for all the rows: the step costs the weights it reads (BENCHMARKS.md, "The native decode
step").

What it covers, and what keeps transformers' step (Decoder falls back per step, nothing else changes):
- on the CPU, a "llama" model with no biases, SiLU, a rotary embedding fixed at load; in every precision mode
  (models/precision.py), with the mode's own weights: float32, bfloat16 (activations rounded to bfloat16 where
  transformers' bfloat16 model rounds them), int8 (its int8 rows and scales) and int4 (its 4-bit groups, scales and
  zeros);
- never while a hook is on the model (the lessons' interventions, the attention trace), in the batch-invariant mode
  (whose promise is its own kernels), inside off() (a lesson that shows transformers' arithmetic), nor when
  NTP_NATIVE_STEP=false;
- prompts (prefill) stay transformers'.
Its numbers equal transformers' up to float round-off (tests/model/test_native_step.py bounds the difference; the
golden records hold), and a row's are the same alone or in any room, bit for bit (products.h sums every dot in one
order); a replay on another machine, or with the step off, may still draw another token near an edge, as with any
change of kernel (docs/sampling.md).

Each row's KV cache lives in its own Run (float32 buffers, doubled when full); the Decoder's DynamicCache is written
from the runs only when something reads it (Rows.show: views for a row alone, left-padded copies for a room), and a
cache changed since is taken into runs again before the next native step (Rows.ready).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import logging
import threading

import torch
from torch import nn

from .. import env, limits
from ..sampling import window as ranking
from . import native_build
from .native_layout import BF16, F32, I4, I8, PER_LAYER, Matrix, Model

log = logging.getLogger(__name__)

ROPE_TYPES = ("default", "linear", "llama3", "yarn")  # fixed at load: inv_freq and attention_scaling say it all


def unsupported(model: nn.Module) -> str | None:
    """Why this model cannot take the native step, or None when it can."""
    config = model.config.get_text_config()
    if next(model.parameters()).device.type != "cpu":
        return "not on the CPU"
    if config.model_type != "llama":
        return f"a {config.model_type} model (the native step is Llama's)"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return "biases in attention or MLP"
    if config.hidden_act != "silu" or getattr(config, "pretraining_tp", 1) != 1:
        return f"activation {config.hidden_act}"
    rotary = getattr(model.model, "rotary_emb", None)
    if rotary is None or getattr(rotary, "rope_type", "default") not in ROPE_TYPES:
        return f"rotary embedding {getattr(rotary, 'rope_type', None)}"
    for layer in model.model.layers:
        for name in PER_LAYER:
            if _matrix_kind(_linear(layer, name)) is None:
                return f"a {type(_linear(layer, name)).__name__} layer"
    return None


def _linear(layer: nn.Module, name: str) -> nn.Module:
    return getattr(layer.self_attn if name in PER_LAYER[:4] else layer.mlp, name)


def _matrix_kind(linear: nn.Module) -> int | None:
    if getattr(linear, "bias", None) is not None:
        return None
    if hasattr(linear, "q") and hasattr(linear, "scale"):  # precision.Int8Linear
        return I8
    if hasattr(linear, "nibbles"):  # precision.Int4Linear, in the groups of 32 the C step reads
        return I4 if limits.INT4_GROUP == 32 and linear.in_features % 32 == 0 else None
    weight = getattr(linear, "weight", None)
    if isinstance(linear, nn.Linear) and weight is not None and weight.is_contiguous():
        return {torch.float32: F32, torch.bfloat16: BF16}.get(weight.dtype)
    return None


class NativeLlama:
    """The compiled step bound to one model's weights (it holds references to every tensor it points at)."""

    def __init__(self, model: nn.Module, lib: ctypes.CDLL):
        self.model, self.lib = model, lib
        config = model.config.get_text_config()
        self.keep: list[torch.Tensor] = []  # every tensor the records point into: alive as long as this is
        layers = model.model.layers
        first = layers[0].self_attn
        self.round_bf16 = int(model.get_input_embeddings().weight.dtype != torch.float32)
        self.n_layers, self.n_kv = len(layers), config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.vocab = model.get_output_embeddings().weight.shape[0]
        mats = [self._matrix(_linear(layer, name)) for layer in layers for name in PER_LAYER]
        self.mats = (Matrix * len(mats))(*mats)
        norms = [self._floats(n.weight) for layer in layers for n in (layer.input_layernorm, layer.post_attention_layernorm)]
        self.norms = (ctypes.c_void_p * len(norms))(*norms)
        rotary = model.model.rotary_emb
        self.base = Model(
            n_layers=self.n_layers, hidden=config.hidden_size, inter=config.intermediate_size,
            n_heads=config.num_attention_heads, n_kv=self.n_kv, head_dim=self.head_dim, vocab=self.vocab,
            capacity=0, round_bf16=self.round_bf16, eps=float(layers[0].input_layernorm.variance_epsilon),
            scaling=float(first.scaling), rope_scaling=float(getattr(rotary, "attention_scaling", 1.0)),
            inv_freq=self._floats(rotary.inv_freq), embed=self._matrix(model.get_input_embeddings()),
            lm_head=self._matrix(model.get_output_embeddings()), final_norm=self._floats(model.model.norm.weight),
            norms=self.norms, mats=self.mats,
        )
        # every module's forward-hook dicts (a module keeps its own for life): one list to read each step
        self._hooks = [d for m in model.modules() for d in (m._forward_hooks, m._forward_pre_hooks)]

    def _pointer(self, tensor: torch.Tensor) -> int:
        self.keep.append(tensor)
        return tensor.data_ptr()

    def _floats(self, tensor: torch.Tensor) -> int:
        return self._pointer(tensor.detach().float().contiguous())

    def _matrix(self, linear: nn.Module) -> Matrix:
        kind = I8 if hasattr(linear, "q") else I4 if hasattr(linear, "nibbles") else None
        if kind == I8:
            rows, cols = linear.q.shape
            return Matrix(self._pointer(linear.q), self._pointer(linear.scale.contiguous()), None, I8, rows, cols, 0)
        if kind == I4:
            return Matrix(self._pointer(linear.nibbles), self._pointer(linear.group_scale),
                          self._pointer(linear.group_zero), I4, linear.out_features, linear.in_features, 32)
        weight = linear.weight.detach()
        kind = F32 if weight.dtype == torch.float32 else BF16
        return Matrix(self._pointer(weight), None, None, kind, weight.shape[0], weight.shape[1], 0)

    def __deepcopy__(self, memo) -> None:
        return None  # a copied model has weights of its own: it decodes with transformers' step until prepared

    def __reduce__(self):
        return _no_native, ()  # nor does a pickled one (the records point into this process's memory)

    def hooked(self) -> bool:
        """Whether a forward hook is on the model now (the native step would skip what it does)."""
        module = torch.nn.modules.module
        return bool(module._global_forward_hooks or module._global_forward_pre_hooks) or any(self._hooks)

    def rows(self) -> Rows:
        return Rows(self)


class Run:
    """One row's native decoding: its KV cache buffers (float32, (layers, kv heads, capacity, head dim)), its scratch,
    and its own copy of the Model record that points at them."""

    def __init__(self, native: NativeLlama):
        self.native = native
        self.length = 0  # columns of the cache that hold this row's keys and values
        self.capacity = 0
        self.keys = self.values = None
        self.record = Model.from_buffer_copy(native.base)

    def take(self, layers, row: int, length: int) -> None:
        """This row's last `length` columns of a DynamicCache's layers (left-padded: a row's own are its last)."""
        self._allocate(length + 1)
        for i, layer in enumerate(layers):
            self.keys[i, :, :length] = layer.keys[row, :, layer.keys.shape[2] - length:]
            self.values[i, :, :length] = layer.values[row, :, layer.values.shape[2] - length:]
        self.length = length

    def _allocate(self, least: int) -> None:
        """Buffers of at least `least` columns (a power of two, at least limits.NATIVE_MIN_CAPACITY), the columns
        held so far copied over."""
        capacity = max(limits.NATIVE_MIN_CAPACITY, self.capacity)
        while capacity < least:
            capacity *= 2
        if capacity == self.capacity:
            return
        n = self.native
        keys = torch.zeros((n.n_layers, n.n_kv, capacity, n.head_dim))
        values = torch.zeros_like(keys)
        if self.keys is not None:
            keys[:, :, : self.length] = self.keys[:, :, : self.length]
            values[:, :, : self.length] = self.values[:, :, : self.length]
        self.keys, self.values, self.capacity = keys, values, capacity
        self._k = (ctypes.c_void_p * n.n_layers)(*[keys[i].data_ptr() for i in range(n.n_layers)])
        self._v = (ctypes.c_void_p * n.n_layers)(*[values[i].data_ptr() for i in range(n.n_layers)])
        self.record.capacity, self.record.kcache, self.record.vcache = capacity, self._k, self._v
        self.scratch = torch.zeros(int(n.lib.ntp_scratch_floats(ctypes.byref(self.record))))
        self.record.scratch = self.scratch.data_ptr()


def step_rows(runs: list[Run], tokens: list[int]) -> torch.Tensor:
    """One native step of these rows, each feeding its token at its next column: their float32 logits (n, vocab).
    Each weight is read once for all of them; a row's numbers are those it would have alone (products.h)."""
    native = runs[0].native
    for run in runs:
        if run.length + 1 > run.capacity:
            run._allocate(run.length + 1)
    n = len(runs)
    records = (ctypes.c_void_p * n)(*[ctypes.addressof(run.record) for run in runs])
    ids = (ctypes.c_int32 * n)(*tokens)
    positions = (ctypes.c_int32 * n)(*[run.length for run in runs])
    logits = torch.empty((n, native.vocab))
    native.lib.ntp_threads(torch.get_num_threads())  # the host's model threads (loading.serving_threads), as torch's
    failed = native.lib.ntp_step_rows(records, n, ids, positions, logits.data_ptr())
    if failed:
        row = -1 - failed
        raise ValueError(f"token id {tokens[row]} at position {runs[row].length} (row {row}): outside the vocabulary "
                         f"or the cache")
    for run in runs:
        run.length += 1
    return logits


class Rows:
    """A decoder's rows as native runs, in its row order. While `shown` is None the runs hold the rows' caches and
    the decoder's DynamicCache is stale; show() writes it (a row alone: views of its buffers; a room: left-padded
    copies) for whatever reads it, and a later step checks that nobody changed it (else takes it again)."""

    def __init__(self, native: NativeLlama, runs: list[Run] | None = None):
        self.native, self.runs = native, runs or []
        self.shown: list | None = None  # the layers' (keys, values) show() put in the cache

    def ready(self, cache, rows: int, lengths) -> bool:
        """Whether the runs hold the decoder's `rows` rows (lengths(): each row's tokens), taking the DynamicCache's
        when they do not; False when it is not this model's cache (then the step is transformers'). While nothing
        has read the cache since the last native step (shown is None) the decoder changed the runs with its rows
        (keep, join): they are its rows, no check needed."""
        if self.shown is None and len(self.runs) == rows and rows:
            return True
        lengths = lengths()
        if len(self.runs) == len(lengths) and [run.length for run in self.runs] == lengths and all(
                layer.keys is k and layer.values is v for layer, (k, v) in zip(cache.layers, self.shown, strict=False)):
            self.shown = None
            return True
        n = self.native
        layers = getattr(cache, "layers", [])
        if len(layers) != n.n_layers or not all(getattr(layer, "is_initialized", False) and layer.keys.dim() == 4
                                                and layer.keys.shape[0] == len(lengths) for layer in layers):
            return False
        if any(length > layers[0].keys.shape[2] for length in lengths):
            return False
        self.runs = [Run(n) for _ in lengths]
        for row, (run, length) in enumerate(zip(self.runs, lengths, strict=True)):
            run.take(layers, row, length)
        self.shown = None
        return True

    def show(self, cache, width: int) -> None:
        """Write the rows into the DynamicCache, `width` columns, each row left-padded (before anything reads it)."""
        if self.shown is not None or not self.runs:
            return
        dtype = self.native.model.get_input_embeddings().weight.dtype
        shown = []
        for i in range(self.native.n_layers):
            if len(self.runs) == 1 and self.runs[0].length == width:
                k = self.runs[0].keys[i: i + 1, :, :width].to(dtype)
                v = self.runs[0].values[i: i + 1, :, :width].to(dtype)
            else:
                k = torch.zeros((len(self.runs), self.native.n_kv, width, self.native.head_dim), dtype=dtype)
                v = torch.zeros_like(k)
                for row, run in enumerate(self.runs):
                    k[row, :, width - run.length:] = run.keys[i, :, : run.length]
                    v[row, :, width - run.length:] = run.values[i, :, : run.length]
            if i < len(cache.layers) and cache.layers[i].is_initialized:
                cache.layers[i].keys, cache.layers[i].values = k, v
            else:  # a cache with no such layer yet (a decoder made by split): transformers makes it
                cache.update(k, v, i)
            shown.append((cache.layers[i].keys, cache.layers[i].values))
        self.shown = shown


_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("ntp_native_off", default=False)


def rebuilt(model: nn.Module, change):
    """Run `change()` (which moves the model's weights: huge_pages.Later) with the native step let go (its tensors
    held the old weights), then build it again on the weights where they are. No run may be alive (a run's record
    points at the old weights). Returns what `change` returns."""
    native = getattr(model, "ntp_native", None)
    lib = None if native is None else native.lib
    model.ntp_native = native = None
    try:
        return change()
    finally:
        if lib is not None:
            model.ntp_native = NativeLlama(model, lib)


@contextlib.contextmanager
def off():
    """This thread's decode steps take transformers' kernels (a lesson that shows their arithmetic: batch_effect)."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


def skipped() -> bool:
    """Whether this thread asked for transformers' kernels (off())."""
    return _OFF.get()


def _no_native() -> None:
    return None


_BUILDING = threading.Lock()


def prepare(model: nn.Module) -> str:
    """Give a CPU model its native step (model.ntp_native), building the C library if this machine has none yet
    (native_build.py; seconds, once). Returns what the model line says: "native C step" or why not."""
    model.ntp_native = None
    if not env.native_step():
        return "transformers' (NTP_NATIVE_STEP=false)"
    try:
        with _BUILDING:
            lib, seconds = native_build.load()
    except native_build.BuildError as e:
        log.warning("the native decode step is off: %s", e)
        return f"transformers' (no native build: {str(e)[:120]})"
    ranking.use_native(lib.ntp_rank)  # the sampler's window, whatever the model (native/rank.h)
    reason = unsupported(model)
    if reason is not None:
        return f"transformers' ({reason})"
    model.ntp_native = NativeLlama(model, lib)
    return "native C step" + (f" (built in {seconds:.0f} s)" if seconds >= 1 else "")


__all__ = ["NativeLlama", "Rows", "Run", "off", "prepare", "rebuilt", "skipped", "step_rows", "unsupported"]
