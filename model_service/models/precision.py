"""The weights' precision, chosen by the host (--precision / NTP_PRECISION): what a decode step reads.

On a CPU a decode step is bounded by the bytes of weights it reads (bench/bench_peer.py: torch's fp32 matrix-vector
products alone take most of a step), so fewer bytes per weight is the one large gain:

- fp32: the CPU's default; the lessons' numbers as the model's own arithmetic gives them (on a CPU, its one-row
  products through the kernel that measured fastest at load: row_products.py).
- bf16: every weight and activation in bfloat16 (the GPU's default).
- int8: the decoder blocks' linear layers as int8 weights with one scale per output row, bfloat16 activations
  (torch's `_weight_int8pack_mm`).
- int4: the decoder blocks' linear layers as 4-bit weights in groups of limits.INT4_GROUP along the input, each
  group with its own scale and zero, bfloat16 activations (torch's CPU int4 kernel, `_weight_int4pack_mm_for_cpu`,
  the one torchao's CPU int4 layout calls). The embedded SmolLM2 ships as Q4_1 (4-bit groups of 32 with a scale and
  a minimum): its weights are such groups already, so int4 here costs about what bf16 costs (docs/precision.md).

The embeddings and the LM head stay in bfloat16 in every mode below fp32: the lessons read the LM head's rows
(attribution, the logit lens), and 4-bit rows moved the logits ten times more than bf16 did (BENCHMARKS.md).
int8 and int4 run on the CPU only (their kernels are the CPU's). A quantised layer stays an nn.Linear whose
`weight` is what its kernel multiplies by (the dequantised weight), so whatever reads a weight (attribution per
head, the batch-invariant linear) reads the numbers the model runs with.
"""

from __future__ import annotations

import torch
from torch import nn

from .. import limits
from .row_products import plain_linears, rows_through

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.bfloat16, "int4": torch.bfloat16}
QUANTISED = ("int8", "int4")  # weight-only: the linear layers of the decoder blocks


def describe(precision: str) -> str:
    """How the model card says it: "float32", "int4 weights (groups of 32), bfloat16 activations"."""
    if precision == "int4":
        return f"int4 weights (groups of {limits.INT4_GROUP}), bfloat16 activations"
    if precision == "int8":
        return "int8 weights (a scale per row), bfloat16 activations"
    return str(DTYPES[precision]).replace("torch.", "")


class Int8Linear(nn.Linear):
    """y = x W^T + b with W stored as int8, one bfloat16 scale per output row (symmetric, round to nearest)."""

    def __init__(self, linear: nn.Linear):
        w = linear.weight.detach().float()
        super().__init__(w.shape[1], w.shape[0], bias=linear.bias is not None, device=w.device, dtype=torch.bfloat16)
        scale = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.bfloat16).tiny).bfloat16()
        q = (w / scale.float()[:, None]).round().clamp(-127, 127).to(torch.int8)
        self.register_buffer("q", q, persistent=False)
        self.register_buffer("scale", scale, persistent=False)
        with torch.no_grad():
            self.weight.copy_(q.float() * scale.float()[:, None])
            if linear.bias is not None:
                self.bias.copy_(linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        y = torch.ops.aten._weight_int8pack_mm(flat, self.q, self.scale).reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


class Int4Linear(nn.Linear):
    """y = x W^T + b with W in 4-bit groups along the input: w = (q - 8) * scale + zero per group of
    limits.INT4_GROUP, q in 0..15 (asymmetric: the group's minimum and maximum map to 0 and 15)."""

    def __init__(self, linear: nn.Linear):
        w = linear.weight.detach().float()
        out, inp = w.shape
        group = limits.INT4_GROUP
        super().__init__(inp, out, bias=linear.bias is not None, device=w.device, dtype=torch.bfloat16)
        groups = w.reshape(out, inp // group, group)
        low, high = groups.amin(-1, keepdim=True), groups.amax(-1, keepdim=True)
        scale = ((high - low) / 15).clamp(min=1e-12)
        q = ((groups - low) / scale).round().clamp(0, 15)
        # the kernel's form: (q - 8) * scale + zero, so zero = low + 8 * scale; both kept as bfloat16
        scale_b, zero_b = scale.bfloat16(), (low + 8 * scale).bfloat16()
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32).reshape(out, inp), 1)
        scales_zeros = torch.stack([scale_b.squeeze(-1).t(), zero_b.squeeze(-1).t()], dim=-1).contiguous()
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scales_zeros", scales_zeros, persistent=False)
        # the same numbers for the native step (native_step.py, groups of 32): byte j of a group holds its element j
        # in the low nibble and j + 16 in the high one (llama.cpp's Q4 layout), 16 bytes a group
        halves = q.to(torch.uint8).reshape(out, inp // group, 2, group // 2)
        self.register_buffer("nibbles", (halves[:, :, 0] | (halves[:, :, 1] << 4)).reshape(out, inp // 2).contiguous(),
                             persistent=False)
        self.register_buffer("group_scale", scale_b.reshape(out, -1).contiguous(), persistent=False)
        self.register_buffer("group_zero", zero_b.reshape(out, -1).contiguous(), persistent=False)
        with torch.no_grad():
            self.weight.copy_(((q - 8) * scale_b.float() + zero_b.float()).reshape(out, inp))
            if linear.bias is not None:
                self.bias.copy_(linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.packed, limits.INT4_GROUP, self.scales_zeros)
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


def fits(precision: str, linear: nn.Linear) -> bool:
    """Whether this layer can take the mode's kernel (int4 packs the input in groups and the output in 16s)."""
    if precision == "int4":
        return linear.in_features % limits.INT4_GROUP == 0 and linear.out_features % 16 == 0  # torch packs N in 16s
    return True


def quantise(model: nn.Module, precision: str) -> int:
    """Swap the linear layers inside the decoder blocks for the mode's weight-only kernels, in place (the model
    already in bfloat16), and on a CPU every bfloat16 layer left (the LM head; every layer in bf16) for row_products.RowLinear.
    Returns how many took a weight-only kernel; a layer the kernel cannot take stays in bfloat16."""
    if precision == "fp32":
        return 0
    cpu = next(model.parameters()).device.type == "cpu"
    if precision in QUANTISED and not cpu:
        raise ValueError(f"precision {precision} runs on the CPU only; on a GPU use bf16 or fp32")
    kind = {"int4": Int4Linear, "int8": Int8Linear}.get(precision)
    head = model.get_output_embeddings()
    swapped = 0
    for parent, name, child in plain_linears(model):
        if kind is not None and child is not head and fits(precision, child):
            setattr(parent, name, kind(child))
            swapped += 1
    if cpu:
        rows_through(model, "mv")  # every bfloat16 layer left: its one-row product through torch.mv
    return swapped


__all__ = ["DTYPES", "Int4Linear", "Int8Linear", "QUANTISED", "describe", "fits", "quantise"]
