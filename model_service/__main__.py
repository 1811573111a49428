"""Command-line face of the model service.

    python -m model_service generate "The capital of France is" --temperature 0.8 --top-p 0.95 --seed 1
    python -m model_service generate "Hi" --chat --json        # one JSON step record per line
    python -m model_service --precision int4 info
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import limits


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m model_service", description="Next-Token Playground model service")
    p.add_argument("--model", help="short name (smollm2, gemma3-270m), local directory or Hugging Face id")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: CUDA if present)")
    p.add_argument("--precision", choices=limits.PRECISIONS,
                   help="the weights': fp32 (a CPU's default), bf16 (a GPU's), int8 or int4 (CPU only; docs/precision.md)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    g = sub.add_parser("generate", help="stream a generation")
    g.add_argument("prompt")
    g.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default 1)")
    g.add_argument("--top-k", type=int, default=0, help="0 = off (default)")
    g.add_argument("--top-p", type=float, default=1.0, help="1 = off (default)")
    g.add_argument("--min-p", type=float, default=0.0, help="0 = off (default)")
    g.add_argument("--seed", type=int, default=None, help="default: fresh randomness (the seed used is reported)")
    g.add_argument("--order", default="hf", help="hf (default), vllm or llama.cpp")
    g.add_argument("--max-new-tokens", type=int, default=limits.DEFAULT_MAX_NEW_TOKENS, help=f"1 to {limits.MAX_NEW_TOKENS}")
    g.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    g.add_argument("--chat", action="store_true", help="apply the chat template")
    g.add_argument("--top-n", type=int, default=limits.DEFAULT_TOP_N, help="candidates per step in --json records")
    g.add_argument("--json", action="store_true", help="print one JSON step record per line")
    sub.add_parser("info", help="load the model and describe it")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from . import ModelLoadError, ModelService, SamplingSettings

    try:
        settings = None
        if args.command == "generate":
            settings = SamplingSettings(
                temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                min_p=args.min_p, seed=args.seed, order=args.order,
            )  # checked before the model loads: a typo costs no waiting
        service = ModelService.load(args.model, args.device, precision=args.precision)
        if args.command == "info":
            print(json.dumps(service.info.to_dict(), indent=2))
            return 0
        records = service.generate(
            args.prompt, settings, max_new_tokens=args.max_new_tokens, stop=args.stop, chat=args.chat,
            top_n=args.top_n, capture=args.json,
        )
        shown = ""
        for record in records:
            if args.json:
                print(json.dumps(record.to_dict(), ensure_ascii=False), flush=True)
            else:
                sys.stdout.write(record.text[len(shown):])
                sys.stdout.flush()
                shown = record.text
        if not args.json:
            print(f"\n[stop: {record.stop_reason}; seed {record.seed}]", file=sys.stderr)
        return 0
    except (ValueError, ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # piped into `head`: stop quietly
        sys.stdout = open(os.devnull, "w")
        return 0


if __name__ == "__main__":
    sys.exit(main())
