"""The one reader of the environment. Every variable the playground reads is named here, with what it means
and how it is parsed; every other module asks this one. Values are read when asked (so a test's
monkeypatch.setenv, or a Space's variables, count), and a bad value is a ValueError that names the variable.
Flags win over variables: app.py passes a flag's value where one was given.

torch-free, and light: app.py reads it before anything touches CUDA (ZeroGPU needs `spaces` first).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from . import limits
from .records import validation

# ---- the app's own (each has a flag of app.py; docs/workshop.md lists them) ---------------------------------
MODEL = "NTP_MODEL"  # the model to start with: a catalog key, a directory or a Hugging Face id
MODELS = "NTP_MODELS"  # the model picker's allowlist, comma-separated
DEVICE = "NTP_DEVICE"  # cpu or cuda
HOST = "NTP_HOST"  # the address to serve on
PORT = "NTP_PORT"
SHARE = "NTP_SHARE"  # a public gradio.live link: true/1/yes/on or false/0/no/off
MAX_ROWS = "NTP_MAX_ROWS"  # rows in one forward pass
QUEUE_SIZE = "NTP_QUEUE_SIZE"  # requests that may wait for a row
SCHEDULER = "NTP_SCHEDULER"  # auto, process or thread
LANG = "NTP_LANG"  # the page's language for every visitor
HOST_KEY = "NTP_HOST_KEY"  # the key that lets the host switch the model
SERVICE = "NTP_SERVICE"  # a model service elsewhere (Ray Serve): this process runs only the page
SCENES = "NTP_SCENES"  # the host's scene files, comma-separated
# ---- the app's own, with no flag (a secret: a flag shows in process lists) -------------------------------------
API_KEY = "NTP_API_KEY"  # the key scripts send to the OpenAI-compatible API (/v1/...) when the app serves a room
# ---- the model's process --------------------------------------------------------------------------------------
CACHE_DIR = "NTP_CACHE_DIR"  # where dequantised GGUF weights are kept
THREADS = "NTP_THREADS"  # CPU threads for the model (default: all cores but one)
BATCH_INVARIANT = "NTP_BATCH_INVARIANT"  # true/false: a row's logits bit-identical in any batch (default by device)
CUDA_GRAPHS = "NTP_CUDA_GRAPHS"  # true/false: the room's decode step at static shapes, CUDA graphs (default by device)
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


def port() -> int:
    return whole(PORT, limits.DEFAULT_PORT, 1, 65535)


def threads() -> int | None:
    """NTP_THREADS, or None (then all cores but one)."""
    return whole(THREADS, None, 1, limits.MAX_THREADS)


def batch_invariant() -> bool | None:
    """NTP_BATCH_INVARIANT as true or false, or None when unset (then the device's default, limits.py)."""
    value = text(BATCH_INVARIANT)
    return None if value is None else validation.boolean(BATCH_INVARIANT, value)


def cuda_graphs() -> bool | None:
    """NTP_CUDA_GRAPHS as true or false, or None when unset (then the device's default, limits.py)."""
    value = text(CUDA_GRAPHS)
    return None if value is None else validation.boolean(CUDA_GRAPHS, value)


def api_key() -> str | None:
    """NTP_API_KEY without surrounding spaces (a secret pasted with its newline), or None when unset or blank."""
    value = text(API_KEY)
    return None if value is None else value.strip()


def cache_dir() -> Path:
    return Path(text(CACHE_DIR) or Path.home() / ".cache" / "next-token-playground")


def hub_offline() -> bool:
    return (text(HUB_OFFLINE) or "").strip().lower() in ("1", "true", "yes", "on")


def has_token(env: Mapping[str, str] | None = None) -> bool:
    env = variables() if env is None else env
    return any((env.get(name) or "").strip() for name in TOKENS)


__all__ = [
    "ACCELERATOR", "API_KEY", "BATCH_INVARIANT", "CACHE_DIR", "CUDA_GRAPHS", "DEVICE", "HOST", "HOST_KEY", "HUB_OFFLINE", "LANG", "MAX_ROWS", "MODEL", "MODELS",
    "PORT", "PYTHONPATH", "QUEUE_SIZE", "SCENES", "SCHEDULER", "SERVICE", "SHARE", "SPACE_HOST", "SPACE_ID", "SYSTEM",
    "THREADS", "TOKENS", "ZERO_GPU", "api_key", "cache_dir", "cuda_graphs", "flag", "has_token", "hub_offline", "max_rows", "port",
    "queue_size", "text", "threads", "variables", "whole",
]
