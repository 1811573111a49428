"""Benchmark of the forward-pass tracer (lesson 10) on the embedded model.

Prints, warm (after one untimed run), interleaved so machine noise hits both sides alike:
  trace time of the lesson prompt and of a 1024-token prompt (median), beside a plain forward pass
  with logits_to_keep=1 on the same ids (what generation's prefill costs), and the JSON size of each
  trace record; then the attention of one other block alone (the UI's block picker).

    .venv/bin/python bench/bench_trace.py [--rounds 5] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from model_service import ModelService  # noqa: E402

LESSON = "The capital of France is"
FILLER = "The history of the city goes back many centuries, and its people built walls and towers. "


def long_prompt(service, tokens: int) -> str:
    ids = service.encode(FILLER * (tokens // 10 + 10))[:tokens]
    prompt = service.decode(ids)
    assert len(service.encode(prompt)) == tokens
    return prompt


def plain_forward(service, prompt: str) -> float:
    ids = torch.tensor([service.encode(prompt)], device=service.model.device)
    started = time.perf_counter()
    with torch.inference_mode():
        service.model(input_ids=ids, use_cache=False, logits_to_keep=1)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    service = ModelService.load()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{service.description} · torch threads {torch.get_num_threads()} · load average {load:.1f}")
    for name, prompt, rounds in (("lesson prompt", LESSON, args.rounds), ("1024 tokens", long_prompt(service, 1024), max(2, args.rounds // 2))):
        service.trace(prompt)  # warm-up
        traced, plain = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            record = service.trace(prompt)
            traced.append(time.perf_counter() - started)
            plain.append(plain_forward(service, prompt))
        size = len(json.dumps(record.to_dict()))
        t, p = statistics.median(traced), statistics.median(plain)
        print(f"{name:>14}: T={len(record.tokens):5d}  trace {t:7.3f} s (forward inside {record.forward_ms / 1000:.3f} s)  "
              f"plain forward, logits_to_keep=1 {p:7.3f} s  ratio {t / p:4.1f}×  record {size / 1e3:7.1f} kB JSON")
        started = time.perf_counter()
        service.trace_attention(prompt, block=1)
        print(f"{'':>14}  attention of block 1 alone: {time.perf_counter() - started:.3f} s")


if __name__ == "__main__":
    main()
