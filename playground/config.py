"""The app's configuration: its flags, the environment and a Space's variables, read once at start into one
frozen Config that app.py passes down (the page, the service it starts, the HTTP API).

A flag wins over its variable; a variable wins over the default for where the app runs (playground/hosting.py:
a laptop serves this machine only, a Space serves a room, on its GPU model where it has a GPU). A bad value
stops the start with the flag or variable named. The variables are read through model_service/env.py, the one
reader of the environment; the page's own are named here (the service's are named there).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from model_service import env
from model_service.records import validation

from . import limits
from .hosting import Machine, SwitchPolicy, defaults, switch_policy

# ---- the page's variables (each has a flag of app.py but the API key; docs/workshop.md lists them) ----------------
HOST = "NTP_HOST"  # the address to serve on (--host)
PORT = "NTP_PORT"
SHARE = "NTP_SHARE"  # a public gradio.live link: true/1/yes/on or false/0/no/off
LANG = "NTP_LANG"  # the page's language for every visitor
HOST_KEY = "NTP_HOST_KEY"  # the key that lets the host (the teacher) switch the model
SERVICE = "NTP_SERVICE"  # a model service elsewhere (Ray Serve): this process runs only the page
SCENES = "NTP_SCENES"  # the host's scene files, comma-separated
SCENE_RUNS = "NTP_SCENE_RUNS"  # run the lab scenes' runs once at start, to show them at once (true/false)
API_KEY = "NTP_API_KEY"  # the key scripts send to the OpenAI-compatible API when the app serves a room (no flag:
# a secret on a command line shows in process lists)

LANGUAGE_MODELS = {"en": None, "vi": "gemma3-270m"}  # --lang -> the model it runs when none is named


class ConfigError(ValueError):
    """A flag or variable the app cannot start with; the message names it."""


@dataclass(frozen=True)
class Config:
    """Everything a start decides, once."""

    model: str  # the model to start with: a catalog key, a directory or a Hugging Face id
    models: tuple[str, ...]  # the model picker's allowlist, the start's model first
    device: str | None  # cpu or cuda; None: CUDA if present
    bind: str  # the address to serve on (--host)
    port: int
    share: bool
    max_rows: int | None  # rows in one forward pass; None: sized for the device
    queue_size: int
    scheduler: str  # auto, process or thread
    batch_invariant: bool | None  # None: the device's default
    precision: str | None  # fp32, bf16, int8 or int4; None: the device's default
    lang: str | None  # the page's language for every visitor; None: each browser's own
    host_key: str | None
    service: str | None  # the URL of a model service elsewhere
    scenes: str  # the host's scene files, comma-separated ("" for none)
    scene_runs: bool  # the lab scenes' runs computed once at start (playground/lab/replays.py)
    api_key: str | None
    machine: Machine  # where the app runs
    policy: SwitchPolicy  # who may switch the model

    @property
    def serves_a_room(self) -> bool:
        """Reachable from other machines: the terminal says so, and says how."""
        return self.bind in ("0.0.0.0", "::")


def _variable(read, *args):
    try:
        return read(*args)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _true_or_false(name: str):
    """An argparse type: true/1/yes/on or false/0/no/off, as the variables read."""

    def parse(value: str) -> bool:
        try:
            return validation.boolean(name, value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _api_key() -> str | None:
    """NTP_API_KEY without surrounding spaces (a secret pasted with its newline), or None when unset or blank."""
    value = env.text(API_KEY)
    return None if value is None else value.strip()


def parser(machine: Machine, cuda: bool, description: str = "") -> argparse.ArgumentParser:
    """app.py's flags, each defaulting to its variable, then to where the app runs."""
    d = defaults(machine, cuda=cuda)
    text = env.text
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", default=text(env.MODEL),
                   help=f"smollm2, gemma3-270m, another catalog key, a directory or a Hugging Face id (default {d.model})")
    p.add_argument("--models", default=text(env.MODELS), help="the model picker's allowlist, comma-separated")
    p.add_argument("--device", default=text(env.DEVICE), help="cpu or cuda (default: CUDA if present)")
    p.add_argument("--host", dest="bind", metavar="ADDRESS", default=text(HOST, d.bind), help=f"0.0.0.0 to serve a room (default {d.bind})")
    p.add_argument("--port", type=int, default=_variable(env.whole, PORT, limits.DEFAULT_PORT, 1, 65535))
    p.add_argument("--share", action="store_true", default=_variable(env.flag, SHARE), help="a public gradio.live link")
    p.add_argument("--max-rows", type=int, default=_variable(env.max_rows),
                   help=f"rows in one forward pass (default: {limits.MAX_ROWS_CPU} on CPU; on a GPU what the card holds, "
                        f"at most {limits.MAX_ROWS_GPU})")
    p.add_argument("--queue-size", type=int, default=_variable(env.queue_size),
                   help=f"requests that may wait for a row (default {limits.QUEUE_SIZE})")
    p.add_argument("--scheduler", default=text(env.SCHEDULER, "auto"), choices=limits.SCHEDULER_MODES,
                   help="where the room's forward passes run: in a process of their own (away from the web server's "
                        "GIL, with a second copy of the model), in a thread of this one, or auto: a process on a CPU, "
                        "a thread on a GPU (default auto)")
    p.add_argument("--batch-invariant", type=_true_or_false("--batch-invariant"), metavar="true|false",
                   default=_variable(env.batch_invariant),
                   help="a row's logits bit-identical in any batch, so a seed replays in any room (default: the "
                        "device's, docs/sampling.md)")
    p.add_argument("--precision", default=_variable(env.precision), choices=limits.PRECISIONS,
                   help="the weights' precision: fp32 (the CPU's default: the lessons' numbers), bf16 (a GPU's), or "
                        "int8 / int4 weights with bf16 activations, CPU only: about 1.5x / 2x faster decoding there, "
                        "at a cost the Forward pass tab shows (docs/precision.md)")
    p.add_argument("--lang", default=text(LANG), choices=sorted(LANGUAGE_MODELS),
                   help="the page's language for every visitor (default: each browser's own; a link's ?lang= still "
                        "wins); with no --model, vi runs the multilingual gemma3-270m where the default is SmolLM2")
    p.add_argument("--host-key", default=text(HOST_KEY), help="the key that lets the host switch the model")
    p.add_argument("--service", default=text(SERVICE),
                   help="URL of a model service started with `python -m model_service.deploy.ray_serve` (Ray Serve): this "
                        "process then runs only the page, and the model options above are the service's business")
    p.add_argument("--scenes", default=text(SCENES),
                   help="the host's scene files (JSON, comma-separated), after the lessons' (assets/scenes)")
    p.add_argument("--scene-runs", type=_true_or_false("--scene-runs"), metavar="true|false",
                   default=_variable(lambda name: env.text(name) is None or env.flag(name), SCENE_RUNS),
                   help="run each lab scene's run once when the model is ready, so it shows at once (default true)")
    return p


def configure(argv, machine: Machine, cuda: bool, description: str = "") -> Config:
    """The start's Config from its flags and the environment. Raises ConfigError naming a bad variable or value;
    argparse exits on a bad flag, naming it."""
    from model_service.models.catalog import parse_allowlist

    d = defaults(machine, cuda=cuda)
    _variable(env.cuda_graphs)  # no flag: the room's scheduler reads it (engine/scheduler.py); a bad value stops here
    args = parser(machine, cuda, description).parse_args(argv)
    if args.service and not args.service.startswith(("http://", "https://")):
        raise ConfigError(f"--service must be an http:// or https:// URL, got {args.service!r}")
    if args.scheduler not in limits.SCHEDULER_MODES:  # argparse checks typed values, not the variables'
        raise ConfigError(f"{env.SCHEDULER} must be one of {', '.join(limits.SCHEDULER_MODES)}, got {args.scheduler!r}")
    if args.lang is not None and args.lang not in LANGUAGE_MODELS:
        raise ConfigError(f"{LANG} must be one of {', '.join(sorted(LANGUAGE_MODELS))}, got {args.lang!r}")
    model = args.model
    if model is None:
        # SmolLM2 writes gibberish in Vietnamese; Gemma 3 does not (a GPU Space's default is multilingual already)
        language_model = LANGUAGE_MODELS.get(args.lang) if args.lang else None
        model = language_model if language_model and d.model == limits.DEFAULT_MODEL else d.model
    models = parse_allowlist(args.models, start=model, gpu=d.gpu, token=d.token)
    policy = switch_policy(machine, models=models, bind=args.bind, share=args.share, host_key=args.host_key)
    return Config(model=model, models=models, device=args.device, bind=args.bind, port=args.port, share=args.share,
                  max_rows=args.max_rows, queue_size=args.queue_size, scheduler=args.scheduler,
                  batch_invariant=args.batch_invariant, precision=args.precision, lang=args.lang, host_key=args.host_key, service=args.service,
                  scenes=args.scenes or "", scene_runs=args.scene_runs, api_key=_api_key(), machine=machine,
                  policy=policy)


__all__ = ["API_KEY", "Config", "ConfigError", "HOST", "HOST_KEY", "LANG", "LANGUAGE_MODELS", "PORT", "SCENE_RUNS", "SCENES",
           "SERVICE", "SHARE", "configure", "parser"]
