"""Start the Next-Token Playground.

    python app.py                         # the embedded SmolLM2-135M-Instruct on this machine
    python app.py --model gemma3-270m     # the second offline model
    python app.py --model Qwen/Qwen2.5-0.5B --host 0.0.0.0 --share

Every flag has an environment variable (NTP_MODEL, NTP_DEVICE, NTP_HOST, NTP_PORT, NTP_SHARE) for
hosts such as Hugging Face Spaces. The page is up at once; the model loads in the background.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv=None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=env("NTP_MODEL"), help="smollm2 (default), gemma3-270m, a directory or a Hugging Face id")
    p.add_argument("--device", default=env("NTP_DEVICE"), help="cpu or cuda (default: CUDA if present)")
    p.add_argument("--host", default=env("NTP_HOST", "127.0.0.1"), help="0.0.0.0 to serve a room")
    p.add_argument("--port", type=int, default=int(env("NTP_PORT", "7860")))
    p.add_argument("--share", action="store_true", default=env("NTP_SHARE", "") not in ("", "0", "false"), help="a public gradio.live link")
    p.add_argument("--concurrency", type=int, default=int(env("NTP_CONCURRENCY", "1")), help="model calls run at once (CPU: 1)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from model_service.background import LoadingService
    from playground.page import build_demo, launch_options

    try:
        service = LoadingService(args.model, args.device)
    except RuntimeError as e:  # ModelLoadError, e.g. a bad NTP_THREADS
        sys.exit(f"error: {e}")
    demo = build_demo(service)
    demo.queue(default_concurrency_limit=args.concurrency)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, ssr_mode=False, **launch_options())


if __name__ == "__main__":
    sys.exit(main())
