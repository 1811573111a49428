"""Start the Next-Token Playground.

    python app.py                         # the embedded SmolLM2-135M-Instruct on this machine
    python app.py --model gemma3-270m     # the second offline model
    python app.py --model Qwen/Qwen2.5-0.5B --host 0.0.0.0 --share
    python app.py --lang vi               # a Vietnamese room: the page in Vietnamese, on multilingual Gemma 3

Every flag has an environment variable (NTP_MODEL, NTP_DEVICE, NTP_HOST, NTP_PORT, NTP_SHARE,
NTP_MAX_ROWS, NTP_QUEUE_SIZE, NTP_LANG) for hosts such as Hugging Face Spaces. The page is up at once; the
model loads in the background.
"""

from __future__ import annotations

import argparse
import os
import sys

from model_service import limits, validation

LANGUAGE_MODELS = {"en": None, "vi": "gemma3-270m"}  # --lang -> the model it runs when none is named


def _env_bool(name: str) -> bool:
    """NTP_SHARE=true/1/yes/on or false/0/no/off (unset = off); anything else stops the start."""
    value = os.environ.get(name, "")
    if not value.strip():
        return False
    try:
        return validation.boolean(name, value)
    except ValueError as e:
        sys.exit(f"error: {e}")


def _env_int(name: str, default, low: int, high: int):
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        return validation.number(name, value, integer=True, low=low, high=high)
    except ValueError as e:
        sys.exit(f"error: {e}")


def parse_args(argv=None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=env("NTP_MODEL"), help="smollm2 (default), gemma3-270m, a directory or a Hugging Face id")
    p.add_argument("--device", default=env("NTP_DEVICE"), help="cpu or cuda (default: CUDA if present)")
    p.add_argument("--host", default=env("NTP_HOST", "127.0.0.1"), help="0.0.0.0 to serve a room")
    p.add_argument("--port", type=int, default=_env_int("NTP_PORT", 7860, 1, 65535))
    p.add_argument("--share", action="store_true", default=_env_bool("NTP_SHARE"), help="a public gradio.live link")
    p.add_argument("--max-rows", type=int, default=_env_int("NTP_MAX_ROWS", None, 1, 1024),
                   help=f"rows in one forward pass (default: {limits.MAX_ROWS_CPU} on CPU, {limits.MAX_ROWS_GPU} on GPU)")
    p.add_argument("--queue-size", type=int, default=_env_int("NTP_QUEUE_SIZE", limits.QUEUE_SIZE, 1, 100_000),
                   help=f"requests that may wait for a row (default {limits.QUEUE_SIZE})")
    p.add_argument("--lang", default=env("NTP_LANG"), choices=sorted(LANGUAGE_MODELS),
                   help="the page's language for every visitor (default: each browser's own; a link's ?lang= still "
                        "wins); with no --model, vi runs the multilingual gemma3-270m")
    args = p.parse_args(argv)
    if args.lang is not None and args.lang not in LANGUAGE_MODELS:  # argparse checks typed values, not env ones
        sys.exit(f"error: NTP_LANG must be one of {', '.join(sorted(LANGUAGE_MODELS))}, got {args.lang!r}")
    if args.model is None and args.lang:
        args.model = LANGUAGE_MODELS[args.lang]  # SmolLM2 writes gibberish in Vietnamese; Gemma 3 does not
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    from model_service.background import LoadingService
    from playground.page import build_demo, launch_options, queue_options

    try:
        service = LoadingService(args.model, args.device, max_rows=args.max_rows, queue_size=args.queue_size)
    except RuntimeError as e:  # ModelLoadError, e.g. a bad NTP_THREADS
        sys.exit(f"error: {e}")
    demo = build_demo(service, default_language=args.lang)
    demo.queue(**queue_options())
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, ssr_mode=False, **launch_options())


if __name__ == "__main__":
    sys.exit(main())
