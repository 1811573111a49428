"""Start the Next-Token Playground.

    python app.py                         # the embedded SmolLM2-135M-Instruct on this machine
    python app.py --model gemma3-270m     # the second offline model
    python app.py --model Qwen/Qwen2.5-0.5B --host 0.0.0.0 --share
    python app.py --lang vi               # a Vietnamese room: the page in Vietnamese, on multilingual Gemma 3
    NTP_HOST_KEY=... python app.py --host 0.0.0.0 --models smollm2,gemma3-270m   # a room; the host may switch

Every flag has an environment variable (NTP_MODEL, NTP_MODELS, NTP_DEVICE, NTP_HOST, NTP_PORT, NTP_SHARE,
NTP_MAX_ROWS, NTP_QUEUE_SIZE, NTP_LANG, NTP_HOST_KEY, NTP_SCENES) for hosts such as Hugging Face Spaces. The page is up
at once; the model loads in the background.

--models (NTP_MODELS) is the model picker's allowlist: comma-separated keys of model_service/models/catalog.py
(smollm2, gemma3-270m, qwen2.5-1.5b, smollm2-1.7b, llama-3.2-1b, llama-3.1-8b), Hub ids or directories;
default: the two offline models, plus the larger ones on a GPU (gated ones only with HF_TOKEN). Visitors
never type a model name. Switching reloads the one model that serves everyone, so it is the host's: open
when the app listens on this machine only, with the host key (NTP_HOST_KEY: prefer the variable or a
Space secret to the flag, which shows in process lists) when it serves a room, off on ZeroGPU.

An OpenAI-compatible API answers on the same port (/v1/models, /v1/completions, /v1/chat/completions; see
docs/openai.md): open when the app listens on this machine only; when it serves a room, scripts send the key
the host sets in NTP_API_KEY (a variable or a Space secret only: no flag), and without one it answers 403.

On a Hugging Face Space (SPACE_ID is set) the defaults are a room's: host 0.0.0.0 and, where the Space has
a GPU (ACCELERATOR, or SPACES_ZERO_GPU=true), the GPU model of catalog.SPACE_GPU_MODEL. See docs/hosting.md.
"""

from __future__ import annotations

import argparse
import sys

from model_service import env, limits
from playground.workshop import hosting

LANGUAGE_MODELS = {"en": None, "vi": "gemma3-270m"}  # --lang -> the model it runs when none is named


def _from_env(read, *args):
    """A variable read by model_service/env.py; a bad value stops the start with the variable named."""
    try:
        return read(*args)
    except ValueError as e:
        sys.exit(f"error: {e}")


def _true_or_false(name: str):
    """An argparse type: true/1/yes/on or false/0/no/off, as the variables read (model_service/env.py)."""
    from model_service.records import validation

    def parse(value: str) -> bool:
        try:
            return validation.boolean(name, value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def parse_args(argv=None, where: hosting.Host | None = None) -> argparse.Namespace:
    from model_service.models.catalog import parse_allowlist

    where = where or hosting.detect()
    d = hosting.defaults(where, cuda=False if where.on_space else _cuda())
    text = env.text
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=text(env.MODEL),
                   help=f"smollm2, gemma3-270m, another catalog key, a directory or a Hugging Face id (default {d.model})")
    p.add_argument("--models", default=text(env.MODELS), help="the model picker's allowlist, comma-separated")
    p.add_argument("--device", default=text(env.DEVICE), help="cpu or cuda (default: CUDA if present)")
    p.add_argument("--host", default=text(env.HOST, d.host), help=f"0.0.0.0 to serve a room (default {d.host})")
    p.add_argument("--port", type=int, default=_from_env(env.port))
    p.add_argument("--share", action="store_true", default=_from_env(env.flag, env.SHARE), help="a public gradio.live link")
    p.add_argument("--max-rows", type=int, default=_from_env(env.max_rows),
                   help=f"rows in one forward pass (default: {limits.MAX_ROWS_CPU} on CPU; on a GPU what the card holds, "
                        f"at most {limits.MAX_ROWS_GPU})")
    p.add_argument("--queue-size", type=int, default=_from_env(env.queue_size),
                   help=f"requests that may wait for a row (default {limits.QUEUE_SIZE})")
    p.add_argument("--scheduler", default=text(env.SCHEDULER, "auto"), choices=limits.SCHEDULER_MODES,
                   help="where the room's forward passes run: in a process of their own (away from the web server's "
                        "GIL, with a second copy of the model), in a thread of this one, or auto: a process on a CPU, "
                        "a thread on a GPU (default auto)")
    p.add_argument("--batch-invariant", type=_true_or_false("--batch-invariant"), metavar="true|false",
                   default=_from_env(env.batch_invariant),
                   help="a row's logits bit-identical in any batch, so a seed replays in any room (default: the "
                        "device's, docs/sampling.md)")
    _from_env(env.cuda_graphs)  # no flag: the room's scheduler reads it (engine/scheduler.py); a bad value stops here
    p.add_argument("--lang", default=text(env.LANG), choices=sorted(LANGUAGE_MODELS),
                   help="the page's language for every visitor (default: each browser's own; a link's ?lang= still "
                        "wins); with no --model, vi runs the multilingual gemma3-270m where the default is SmolLM2")
    p.add_argument("--host-key", default=text(env.HOST_KEY), help="the key that lets the host switch the model")
    p.add_argument("--service", default=text(env.SERVICE),
                   help="URL of a model service started with `python -m model_service.deploy.ray_serve` (Ray Serve): this process "
                        "then runs only the page, and the model options above are the service's business")
    p.add_argument("--scenes", default=text(env.SCENES),
                   help="the host's scene files (JSON, comma-separated), after the lessons' (assets/scenes)")
    args = p.parse_args(argv)
    if args.service and not args.service.startswith(("http://", "https://")):
        sys.exit(f"error: --service must be an http:// or https:// URL, got {args.service!r}")
    if args.scheduler not in limits.SCHEDULER_MODES:  # argparse checks typed values, not env ones
        sys.exit(f"error: NTP_SCHEDULER must be one of {', '.join(limits.SCHEDULER_MODES)}, got {args.scheduler!r}")
    if args.lang is not None and args.lang not in LANGUAGE_MODELS:  # argparse checks typed values, not env ones
        sys.exit(f"error: NTP_LANG must be one of {', '.join(sorted(LANGUAGE_MODELS))}, got {args.lang!r}")
    if args.model is None:
        # SmolLM2 writes gibberish in Vietnamese; Gemma 3 does not (a GPU Space's default is multilingual already)
        language_model = LANGUAGE_MODELS.get(args.lang) if args.lang else None
        args.model = language_model if language_model and d.model == limits.DEFAULT_MODEL else d.model
    args.models = parse_allowlist(args.models, start=args.model, gpu=d.gpu, token=d.token)
    args.policy = hosting.switch_policy(where, models=args.models, bind=args.host, share=args.share,
                                        host_key=args.host_key)
    args.where = where
    return args


def build(args: argparse.Namespace):
    """The service (loading) and the page, ready to launch."""
    from model_service.models.catalog import load_target
    from model_service.models.switching import LoadingService
    from playground.page import build_demo, queue_options
    from playground.workshop.scenes import SceneError, load, scene_paths

    try:
        scenes = load(scene_paths(args.scenes or ""))
    except SceneError as e:  # a host's file with a mistake: say which scene and field before the room arrives
        sys.exit(f"error: {e}")
    room = {"max_rows": args.max_rows, "queue_size": args.queue_size, "batch_invariant": args.batch_invariant}
    try:
        if getattr(args, "service", None):  # the model runs in another process (model_service/deploy/ray_serve.py)
            from model_service.deploy.remote import RemoteService

            service = RemoteService(args.service)
            args.policy = None  # the page cannot switch a remote model: default_policy says so
        elif args.where.zero_gpu:  # loaded now, onto CUDA, before launch: ZeroGPU packs those weights
            from model_service.deploy import zero_gpu

            service = LoadingService(service=zero_gpu.load(load_target(args.model), args.device, **room),
                                     model=args.model, models=args.models)
        else:
            service = LoadingService(args.model, args.device, models=args.models, scheduler=args.scheduler, **room)
    except RuntimeError as e:  # ModelLoadError, e.g. a bad NTP_THREADS
        sys.exit(f"error: {e}")
    args.served = service  # what announce() follows in the terminal
    demo = build_demo(service, default_language=args.lang, policy=args.policy, host_key=args.host_key, scenes=scenes)
    demo.queue(**queue_options())
    return demo


def main(argv=None) -> None:
    where = hosting.detect()
    if where.zero_gpu:
        # `spaces` must be imported before anything touches CUDA
        from model_service.deploy import zero_gpu

        if zero_gpu.spaces is None:
            sys.exit("error: SPACES_ZERO_GPU is set but the `spaces` package is missing: add `spaces` to "
                     "pre-requirements.txt")
    args = parse_args(argv, where)
    from playground.openai_api import access_for, launch_kwargs
    from playground.page import launch_options

    demo = build(args)
    args.api = access_for(where, bind=args.host, share=args.share, key=env.api_key())
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, ssr_mode=False,
                prevent_thread_lock=True, **launch_options(), **launch_kwargs(args.served, args.api))
    announce(demo, args)
    demo.block_thread()


def announce(demo, args: argparse.Namespace) -> None:
    """Say in the terminal where the page is, then what the model's first load is doing (the first start
    dequantises the embedded GGUF, which takes a while), until it serves or fails."""
    from model_service.client import wait_until_ready
    from model_service.models.switching import LoadingService

    local = f"http://127.0.0.1:{args.port}/" if args.host in ("0.0.0.0", "::") else demo.local_url
    print(f"Next-Token Playground: serving on {local}", flush=True)
    if args.host in ("0.0.0.0", "::"):
        print(f"  the room reaches it at this machine's address, port {args.port}", flush=True)
    if demo.share_url:
        print(f"  public link: {demo.share_url}", flush=True)
    api = getattr(args, "api", None)
    if api is not None:
        rule = {"open": "open on this machine", "key": f"scripts send the key in {env.API_KEY}",
                "unset": f"off until the host sets {env.API_KEY}"}[api.mode]
        print(f"  OpenAI-compatible API: {local}v1 ({rule})", flush=True)
    service = getattr(args, "served", None)
    if not isinstance(service, LoadingService):
        return
    for status in wait_until_ready(service, poll=1.0):
        if status.error:
            print(f"  the model failed to load: {status.error}", flush=True)
        elif status.ready:
            print(f"  model ready: {status.message}", flush=True)
        else:
            print(f"  model: {status.message} ({status.fraction:.0%})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
