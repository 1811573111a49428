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

import sys

from playground import hosting
from playground.config import API_KEY, Config, ConfigError, configure


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def parse_args(argv=None, machine: hosting.Machine | None = None) -> Config:
    """The start's configuration (playground/config.py), read once; a bad flag or variable stops the start, named."""
    machine = machine or hosting.detect()
    try:
        return configure(argv, machine, cuda=False if machine.on_space else _cuda(),
                         description=__doc__.splitlines()[0])
    except ConfigError as e:
        sys.exit(f"error: {e}")


def build(config: Config):
    """The service (loading) and the page, ready to launch: (demo, service, replays, kept): the lab scenes' runs and
    the Engine and Compare scenes' batches it computes once the model is ready (playground/lab/replays.py,
    playground/common/kept_batches.py)."""
    from model_service.models.catalog import load_target
    from model_service.models.switching import LoadingService
    from playground.common.kept_batches import KeptBatches
    from playground.forward.kept_interventions import KeptInterventions
    from playground.lab.replays import Replays
    from playground.page import build_demo, queue_options
    from playground.workshop.scenes import SceneError, load, scene_paths

    try:
        scenes = load(scene_paths(config.scenes))
    except SceneError as e:  # a host's file with a mistake: say which scene and field before the room arrives
        sys.exit(f"error: {e}")
    room = {"max_rows": config.max_rows, "queue_size": config.queue_size, "batch_invariant": config.batch_invariant,
            "precision": config.precision}
    policy = config.policy
    try:
        if config.service:  # the model runs in another process (model_service/deploy/ray_serve.py)
            from model_service.deploy.remote import RemoteService

            service = RemoteService(config.service)
            policy = None  # the page cannot switch a remote model: default_policy says so
        elif config.machine.zero_gpu:  # loaded now, onto CUDA, before launch: ZeroGPU packs those weights
            from model_service.deploy import zero_gpu

            service = LoadingService(service=zero_gpu.load(load_target(config.model), config.device, **room),
                                     model=config.model, models=config.models)
        else:
            service = LoadingService(config.model, config.device, models=config.models, scheduler=config.scheduler,
                                     **room)
    except RuntimeError as e:  # ModelLoadError, e.g. a bad NTP_THREADS
        sys.exit(f"error: {e}")
    replays, kept, interventions = Replays(), KeptBatches(), KeptInterventions()
    demo = build_demo(service, default_language=config.lang, policy=policy, host_key=config.host_key, scenes=scenes,
                      warm_scenes=config.scene_runs, replays=replays, kept=kept, interventions=interventions)
    demo.queue(**queue_options())
    return demo, service, replays, (kept, interventions)


def main(argv=None) -> None:
    machine = hosting.detect()  # read at the start; the page reads the same once (hosting.this_machine)
    if machine.zero_gpu:
        # `spaces` must be imported before anything touches CUDA
        from model_service.deploy import zero_gpu

        if zero_gpu.spaces is None:
            sys.exit("error: SPACES_ZERO_GPU is set but the `spaces` package is missing: add `spaces` to "
                     "pre-requirements.txt")
    config = parse_args(argv, machine)
    from model_service import heap
    from playground.common.i18n import LANGUAGES
    from playground.lab.stage_panels import warm_layouts
    from playground.openai_api import access_for, launch_kwargs
    from playground.page import launch_options

    demo, service, replays, (kept, interventions) = build(config)
    api = access_for(machine, bind=config.bind, share=config.share, key=config.api_key)
    demo.launch(server_name=config.bind, server_port=config.port, share=config.share, ssr_mode=False,
                prevent_thread_lock=True, **launch_options(), **launch_kwargs(service, api))
    announce(demo, config, service, api)
    warm_layouts(LANGUAGES)  # a knob's first moves meet built stage layouts (playground/lab/stage_panels.py)
    if replays.warming is not None:  # the lab scenes' runs, then the Engine and Compare scenes' batches, in the room
        replays.warming.join()
        for later in (kept, interventions):
            if later.warming is not None:
                later.warming.join()
        print(f"  scenes ready: {replays.count} lab scene runs, {kept.count} Engine and Compare batches and "
              f"{interventions.count} interventions kept, each shows at once", flush=True)
    heap.settle()  # the page, the scenes and (once loaded) the model live as long as the app (model_service/heap.py)
    demo.block_thread()


def announce(demo, config: Config, service, api) -> None:
    """Say in the terminal where the page is, then what the model's first load is doing (the first start
    dequantises the embedded GGUF, which takes a while), until it serves or fails."""
    from model_service.client import wait_until_ready
    from model_service.models.switching import LoadingService

    local = f"http://127.0.0.1:{config.port}/" if config.serves_a_room else demo.local_url
    print(f"Next-Token Playground: serving on {local}", flush=True)
    if config.serves_a_room:
        print(f"  the room reaches it at this machine's address, port {config.port}", flush=True)
    if demo.share_url:
        print(f"  public link: {demo.share_url}", flush=True)
    if api is not None:
        rule = {"open": "open on this machine", "key": f"scripts send the key in {API_KEY}",
                "unset": f"off until the host sets {API_KEY}"}[api.mode]
        print(f"  OpenAI-compatible API: {local}v1 ({rule})", flush=True)
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
