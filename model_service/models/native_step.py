"""A lone learner's decode step on a CPU as one call into C (native/llama_step.c), for Llama-family models.

Why: an eager decode step of the embedded SmolLM2 launches ~700 torch operators from Python, and its one-row matrix
products read the weights at 16-31 GB/s (bench/bench_peer.py --kernels), where llama.cpp reads the same weights at
~38 GB/s on one thread. The C step does what transformers' LlamaForCausalLM does for one new token (RMSNorm, the
q/k/v products, rotary, attention over the row's KV cache, SwiGLU, the LM head) in one call that releases the GIL:
the step costs the weights it reads.

What it covers, and what keeps transformers' step (Decoder falls back per step, nothing else changes):
- one row only, on the CPU, a "llama" model with no biases, SiLU, a rotary embedding fixed at load; in every
  precision mode (models/precision.py), with the mode's own weights: float32, bfloat16 (activations rounded to
  bfloat16 where transformers' bfloat16 model rounds them), int8 (its int8 rows and scales) and int4 (its 4-bit
  groups, scales and zeros);
- never while a hook is on the model (the lessons' interventions, the attention trace) or in the batch-invariant
  mode (whose promise is its own kernels), nor when NTP_NATIVE_STEP=false;
- prompts (prefill) and a room's batches stay transformers'.
Its numbers equal transformers' up to float round-off (tests/model/test_native_step.py bounds the difference; the
golden records hold); a replay of a seeded run on another machine may still draw another token near an edge, as
with any change of kernel (docs/sampling.md).

The KV cache of a native row lives in this module's own buffers (float32, doubled when full); the Decoder's
DynamicCache is brought up to date only when something reads it (Run.expose), and a cache changed by anyone else
is copied in again before the next native step (Run.adopt).
"""

from __future__ import annotations

import ctypes
import logging
import threading

import torch
from torch import nn

from .. import env, limits
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

    def run(self) -> Run:
        return Run(self)


class Run:
    """One row's native decoding: its KV cache buffers (float32, (layers, kv heads, capacity, head dim)), its scratch,
    and its own copy of the Model record that points at them."""

    def __init__(self, native: NativeLlama):
        self.native = native
        self.length = 0  # columns of the cache that hold this row's keys and values
        self.capacity = 0
        self.keys = self.values = None
        self.shown: list | None = None  # the tensors expose() put in the DynamicCache (None: not shown since)
        self.record = Model.from_buffer_copy(native.base)

    def ready(self, cache, length: int) -> bool:
        """Whether the buffers hold this row's `length` columns (adopting the DynamicCache's when they do not):
        False when the cache is not one row of the model's shape (then this step is transformers')."""
        if self.shown is None and self.length == length and self.keys is not None:
            return True
        if self.shown is not None and self.length == length and all(
                layer.keys is k and layer.values is v for layer, (k, v) in zip(cache.layers, self.shown, strict=False)):
            return True
        return self.adopt(cache, length)

    def adopt(self, cache, length: int) -> bool:
        n = self.native
        layers = getattr(cache, "layers", [])
        shape = (1, n.n_kv, length, n.head_dim)
        if len(layers) != n.n_layers or not all(
                getattr(layer, "is_initialized", False) and tuple(layer.keys.shape) == shape for layer in layers):
            return False
        self._allocate(length + 1)
        for i, layer in enumerate(layers):
            self.keys[i, :, :length] = layer.keys[0]
            self.values[i, :, :length] = layer.values[0]
        self.length, self.shown = length, None
        return True

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

    def step(self, token: int) -> torch.Tensor:
        """Feed `token` at the next column; the float32 logits (1, vocab). Call ready() first."""
        if self.length + 1 > self.capacity:
            self._allocate(self.length + 1)
        logits = torch.empty((1, self.native.vocab))
        if self.native.lib.ntp_step(ctypes.byref(self.record), token, self.length, logits.data_ptr()) != 0:
            raise ValueError(f"token id {token} at position {self.length}: outside the vocabulary or the cache")
        self.length += 1
        self.shown = None
        return logits

    def expose(self, cache) -> None:
        """Bring the DynamicCache's layers up to this row's columns (views of the buffers; bfloat16 copies for a
        bfloat16 model, whose cache transformers keeps in bfloat16): before anything else reads or extends it."""
        if self.shown is not None or self.keys is None:
            return
        dtype = self.native.model.get_input_embeddings().weight.dtype
        shown = []
        for i, layer in enumerate(cache.layers):
            k = self.keys[i: i + 1, :, : self.length].to(dtype)
            v = self.values[i: i + 1, :, : self.length].to(dtype)
            layer.keys, layer.values = k, v
            shown.append((k, v))
        self.shown = shown


def _no_native() -> None:
    return None


_BUILDING = threading.Lock()


def prepare(model: nn.Module) -> str:
    """Give a CPU model its native step (model.ntp_native), building the C library if this machine has none yet
    (native_build.py; seconds, once). Returns what the model line says: "native C step" or why not."""
    model.ntp_native = None
    if not env.native_step():
        return "transformers' (NTP_NATIVE_STEP=false)"
    reason = unsupported(model)
    if reason is not None:
        return f"transformers' ({reason})"
    try:
        with _BUILDING:
            lib, seconds = native_build.load()
        model.ntp_native = NativeLlama(model, lib)
    except native_build.BuildError as e:
        log.warning("the native decode step is off: %s", e)
        return f"transformers' (no native build: {str(e)[:120]})"
    return "native C step" + (f" (built in {seconds:.0f} s)" if seconds >= 1 else "")


__all__ = ["NativeLlama", "Run", "prepare", "unsupported"]
