"""Where the app runs, and the defaults that follow: a laptop, a Hugging Face Space on a CPU, on a
dedicated GPU (L4, A10G, A100, ...) or on ZeroGPU. Locally nothing changes; on a Space the app serves a
room (0.0.0.0) with a GPU model where there is a GPU.

Read from the environment only (no torch here: on ZeroGPU `spaces` must be imported before anything
touches CUDA, and app.py asks this module first). The variables are the ones Spaces set (hub-docs
spaces-overview "Built-in environment variables": SPACE_ID, SPACE_HOST, ACCELERATOR, CPU_CORES, MEMORY;
Gradio also reads SYSTEM=spaces) and the one the `spaces` package reads for ZeroGPU (SPACES_ZERO_GPU,
true when it is "1", "t" or "true", any case).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from model_service import env as environment
from playground import limits

LOCAL_ADDRESS = "127.0.0.1"
ROOM_ADDRESS = "0.0.0.0"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class Machine:
    """The machine as its environment describes it."""

    space_id: str | None = None  # "owner/name" on a Space
    zero_gpu: bool = False
    accelerator: str | None = None  # a Space's hardware flavour ("l4x1", "a10g-small", ...); None on a CPU
    space_host: str | None = None  # "owner-name.hf.space" on a Space

    @property
    def on_space(self) -> bool:
        return self.space_id is not None

    @property
    def gpu(self) -> bool:
        """A GPU serves this Space (False off a Space: there, torch is asked)."""
        return self.zero_gpu or self.accelerator is not None

    def describe(self) -> str:
        if not self.on_space:
            return "this machine"
        hardware = "ZeroGPU" if self.zero_gpu else self.accelerator or "CPU"
        return f"the Space {self.space_id} ({hardware})"


def detect(env: Mapping[str, str] | None = None) -> Machine:
    env = environment.variables() if env is None else env
    space = (env.get(environment.SPACE_ID) or "").strip()
    if not space and env.get(environment.SYSTEM) == "spaces":
        space = "unknown/space"
    accelerator = (env.get(environment.ACCELERATOR) or "").strip().lower()
    return Machine(
        space_id=space or None,
        zero_gpu=environment.zero_gpu(env),
        accelerator=None if accelerator in ("", "none", "cpu") else accelerator,
        space_host=(env.get(environment.SPACE_HOST) or "").strip() or None,
    )


@cache
def this_machine() -> Machine:
    """The machine this process runs on, read from its environment once (a process's environment is set before
    it starts: a Space's variables, a host's exports)."""
    return detect()


def has_token(env: Mapping[str, str] | None = None) -> bool:
    return environment.has_token(env)


@dataclass(frozen=True)
class Defaults:
    """What app.py uses where no flag or NTP_* variable says otherwise."""

    bind: str  # the address to serve on (--host)
    model: str  # the model to start with (a catalog key)
    gpu: bool  # a GPU serves the room (the allowlist offers the larger models)
    token: bool  # a Hub token is set (the allowlist offers the gated models)


def defaults(where: Machine, *, cuda: bool = False, env: Mapping[str, str] | None = None) -> Defaults:
    """cuda: whether torch sees a GPU (asked by the caller, off a Space only)."""
    from model_service.models.catalog import SPACE_GPU_MODEL

    gpu = where.gpu if where.on_space else cuda
    return Defaults(
        bind=ROOM_ADDRESS if where.on_space else LOCAL_ADDRESS,
        model=SPACE_GPU_MODEL if where.on_space and gpu else limits.DEFAULT_MODEL,
        gpu=gpu,
        token=has_token(env),
    )


WHY = {  # the page says these in its language (assets/i18n: page.picker.why.<reason>)
    "one_model": "The host offers one model.",
    "zero_gpu": "On ZeroGPU the model is fixed at startup (the Space's NTP_MODEL variable).",
    "key": "The host's key switches the model for everyone in the room.",
    "local": "This app is reachable from this machine only: switching needs no key.",
    "no_key": "Switching is off in a shared room unless the host sets NTP_HOST_KEY.",
}


@dataclass(frozen=True)
class SwitchPolicy:
    """Who may switch the room's model: "open" (anyone: the app is reachable from this machine only),
    "key" (whoever types the host key), or "off"; `reason` keys why (WHY)."""

    mode: str
    reason: str

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @property
    def why(self) -> str:
        return WHY[self.reason]


def switch_policy(where: Machine, *, models: tuple[str, ...], bind: str, share: bool, host_key: str | None) -> SwitchPolicy:
    """A switch reloads the one model that serves everyone, so it is the host's act, never a visitor's."""
    if len(models) < 2:
        return SwitchPolicy("off", "one_model")
    if where.zero_gpu:
        # ZeroGPU packs the weights moved to CUDA at startup and forks GPU workers from that state; a model
        # loaded later would not reach workers already forked. Restart the Space with NTP_MODEL instead.
        return SwitchPolicy("off", "zero_gpu")
    if host_key:
        return SwitchPolicy("key", "key")
    if not where.on_space and not share and bind in _LOOPBACK:
        return SwitchPolicy("open", "local")
    return SwitchPolicy("off", "no_key")


__all__ = ["WHY", "Defaults", "Machine", "SwitchPolicy", "defaults", "detect", "has_token", "switch_policy", "this_machine"]
