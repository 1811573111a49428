"""The one reader of the environment. Every variable the model service reads is named here, with what it means
and how it is parsed (the page's own are named in playground/config.py, which reads them through this module);
no other module touches os.environ. Values are read when asked (so a test's
monkeypatch.setenv, or a Space's variables, count), and a bad value is a ValueError that names the variable.
Flags win over variables: app.py reads both once, into playground/config.py's Config.

torch-free, and light: app.py reads it before anything touches CUDA (ZeroGPU needs `spaces` first).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from . import limits
from .records import validation

# ---- the model's, with a flag of app.py (the page's own variables are named in playground/config.py) ------------
MODEL = "NTP_MODEL"  # the model to start with: a catalog key, a directory or a Hugging Face id
MODELS = "NTP_MODELS"  # the model picker's allowlist, comma-separated
DEVICE = "NTP_DEVICE"  # cpu or cuda
MAX_ROWS = "NTP_MAX_ROWS"  # rows in one forward pass
QUEUE_SIZE = "NTP_QUEUE_SIZE"  # requests that may wait for a row
SCHEDULER = "NTP_SCHEDULER"  # auto, process or thread
PRECISION = "NTP_PRECISION"  # fp32, bf16, int8 or int4: the weights' precision (default by device)
# ---- the model's process, no flag ------------------------------------------------------------------------------
CACHE_DIR = "NTP_CACHE_DIR"  # where dequantised GGUF weights are kept
THREADS = "NTP_THREADS"  # CPU threads for the model (default: all cores but one)
BATCH_INVARIANT = "NTP_BATCH_INVARIANT"  # true/false: a row's logits bit-identical in any batch (default by device)
CUDA_GRAPHS = "NTP_CUDA_GRAPHS"  # true/false: the room's decode step at static shapes, CUDA graphs (default by device)
NATIVE_STEP = "NTP_NATIVE_STEP"  # true/false: a lone row's CPU decode step compiled from C (default: on)
# ---- set by others: Hugging Face (Spaces, the Hub client), Gradio -----------------------------------------
SPACE_ID = "SPACE_ID"
SPACE_HOST = "SPACE_HOST"  # the Space's own address (owner-name.hf.space)
SYSTEM = "SYSTEM"  # Gradio reads SYSTEM=spaces as "on a Space"
ZERO_GPU = "SPACES_ZERO_GPU"  # the `spaces` package's: true when "1", "t" or "true"
ACCELERATOR = "ACCELERATOR"  # a Space's GPU flavour (l4x1, a10g-small, ...); absent or "none" on a CPU
TOKENS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
HUB_OFFLINE = "HF_HUB_OFFLINE"
PYTHONPATH = "PYTHONPATH"


def variables() -> Mapping[str, str]:
    """The whole environment, for readers that take a mapping (hosting.detect, tests pass their own)."""
    return os.environ


def text(name: str, default: str | None = None) -> str | None:
    """A variable's text; unset or blank is `default`."""
    value = os.environ.get(name)
    return default if value is None or not value.strip() else value


def flag(name: str) -> bool:
    """true/1/yes/on or false/0/no/off (unset or blank = off); anything else is a ValueError naming it."""
    value = text(name)
    return False if value is None else validation.boolean(name, value)


def whole(name: str, default, low: int, high: int):
    """A whole number in [low, high]; unset or blank is `default`."""
    value = text(name)
    return default if value is None else validation.number(name, value, integer=True, low=low, high=high)


def max_rows() -> int | None:
    """NTP_MAX_ROWS, or None (then the service sizes rows for its device)."""
    return whole(MAX_ROWS, None, 1, limits.MAX_ROWS_CEILING)


def queue_size() -> int:
    return whole(QUEUE_SIZE, limits.QUEUE_SIZE, 0, limits.QUEUE_SIZE_CEILING)



def threads() -> int | None:
    """NTP_THREADS, or None (then all cores but one)."""
    return whole(THREADS, None, 1, limits.MAX_THREADS)


def batch_invariant() -> bool | None:
    """NTP_BATCH_INVARIANT as true or false, or None when unset (then the device's default, limits.py)."""
    value = text(BATCH_INVARIANT)
    return None if value is None else validation.boolean(BATCH_INVARIANT, value)


def precision() -> str | None:
    """NTP_PRECISION, one of limits.PRECISIONS, or None when unset (then the device's default, limits.py)."""
    value = text(PRECISION)
    return None if value is None else validation.choice(PRECISION, value.strip(), limits.PRECISIONS)


def cuda_graphs() -> bool | None:
    """NTP_CUDA_GRAPHS as true or false, or None when unset (then the device's default, limits.py)."""
    value = text(CUDA_GRAPHS)
    return None if value is None else validation.boolean(CUDA_GRAPHS, value)


def native_step() -> bool:
    """Whether a CPU model may decode a lone row through the compiled C step (models/native_step.py): on unless
    NTP_NATIVE_STEP says false."""
    value = text(NATIVE_STEP)
    return True if value is None else validation.boolean(NATIVE_STEP, value)



def zero_gpu(env: Mapping[str, str] | None = None) -> bool:
    """On a ZeroGPU Space: SPACES_ZERO_GPU as the `spaces` package reads it ("1", "t" or "true")."""
    env = variables() if env is None else env
    return (env.get(ZERO_GPU) or "").strip().lower() in ("1", "t", "true")


def cache_dir() -> Path:
    return Path(text(CACHE_DIR) or Path.home() / ".cache" / "next-token-playground")


def hub_offline() -> bool:
    return (text(HUB_OFFLINE) or "").strip().lower() in ("1", "true", "yes", "on")


def has_token(env: Mapping[str, str] | None = None) -> bool:
    env = variables() if env is None else env
    return any((env.get(name) or "").strip() for name in TOKENS)


__all__ = [
    "ACCELERATOR", "BATCH_INVARIANT", "CACHE_DIR", "CUDA_GRAPHS", "DEVICE", "HUB_OFFLINE", "MAX_ROWS", "MODEL", "MODELS",
    "PYTHONPATH", "QUEUE_SIZE", "SCHEDULER", "SPACE_HOST", "SPACE_ID", "SYSTEM",
    "THREADS", "TOKENS", "ZERO_GPU", "cache_dir", "cuda_graphs", "flag", "has_token", "hub_offline", "max_rows",
    "queue_size", "text", "threads", "variables", "whole", "zero_gpu",
]
