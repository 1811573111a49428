"""The native step's records as ctypes sees them: Matrix and Model of native/llama_step.c, field for field.

load() checks the compiled library's sizes and offsets against these before the first call, so a C file edited
without this one fails at load with a message, not with a wrong pointer mid-step.
"""

from __future__ import annotations

import ctypes

F32, BF16, I8, I4 = 0, 1, 2, 3  # a Matrix's kind (llama_step.c's K_*)
PER_LAYER = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")  # Model.mats' order


class Matrix(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("scale", ctypes.c_void_p),
        ("zero", ctypes.c_void_p),
        ("kind", ctypes.c_int32),
        ("rows", ctypes.c_int32),
        ("cols", ctypes.c_int32),
        ("group", ctypes.c_int32),
    ]


class Model(ctypes.Structure):
    _fields_ = [
        ("n_layers", ctypes.c_int32),
        ("hidden", ctypes.c_int32),
        ("inter", ctypes.c_int32),
        ("n_heads", ctypes.c_int32),
        ("n_kv", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("vocab", ctypes.c_int32),
        ("capacity", ctypes.c_int32),
        ("round_bf16", ctypes.c_int32),
        ("eps", ctypes.c_float),
        ("scaling", ctypes.c_float),
        ("rope_scaling", ctypes.c_float),
        ("inv_freq", ctypes.c_void_p),
        ("embed", Matrix),
        ("lm_head", Matrix),
        ("final_norm", ctypes.c_void_p),
        ("norms", ctypes.POINTER(ctypes.c_void_p)),
        ("mats", ctypes.POINTER(Matrix)),
        ("kcache", ctypes.POINTER(ctypes.c_void_p)),
        ("vcache", ctypes.POINTER(ctypes.c_void_p)),
        ("scratch", ctypes.c_void_p),
    ]


def layout_mismatch(lib) -> str | None:
    """Why the library does not lay Model and Matrix out as this module does, or None when it does."""
    ours = (ctypes.sizeof(Model), ctypes.sizeof(Matrix), Model.scratch.offset, Model.lm_head.offset)
    theirs = tuple(lib.ntp_layout(i) for i in range(4))
    return None if ours == theirs else f"the compiled step's records are laid out as {theirs}, this module's as {ours}"


__all__ = ["BF16", "F32", "I4", "I8", "PER_LAYER", "Matrix", "Model", "layout_mismatch"]
