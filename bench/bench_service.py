"""Benchmark of the model service on the embedded model (CPU unless a GPU is present).

Prints ratios measured in one run, with runs interleaved so machine noise hits both sides alike:
  (a) our generate() with full capture vs transformers' model.generate(), same settings, same tokens
  (b) capture on vs off in our loop
  (c) bytes per step record (JSON)
  (d) cold vs warm load (each in a fresh process; cold = empty cache directory)

    .venv/bin/python bench/bench_service.py [--tokens 64] [--rounds 5] [--skip-load]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from model_service import ModelService, SamplingSettings  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea,"
SETTINGS = {
    "sampled T=0.8 top-p=0.95": SamplingSettings(temperature=0.8, top_p=0.95, seed=0),
    "greedy": SamplingSettings(temperature=0),
}


def ours(service, settings, tokens, capture=True):
    started = time.perf_counter()
    records = list(service.generate(PROMPT, settings, max_new_tokens=tokens, capture=capture, ignore_eos=True))
    elapsed = time.perf_counter() - started
    assert len(records) == tokens
    return tokens / elapsed, records


def theirs(service, settings, tokens):
    ids = torch.tensor([service.encode(PROMPT)])
    kwargs = dict(do_sample=False)
    if not settings.greedy:
        # top_k=0: HF's generate() otherwise silently applies top_k=50.
        kwargs = dict(do_sample=True, temperature=settings.temperature, top_p=settings.top_p, top_k=0)
    started = time.perf_counter()
    with torch.inference_mode():
        out = service.model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens, min_new_tokens=tokens,
            pad_token_id=service.tokenizer.eos_token_id, **kwargs,
        )
    elapsed = time.perf_counter() - started
    assert out.shape[1] - ids.shape[1] == tokens
    return tokens / elapsed


def load_time(cache_dir: str) -> float:
    code = (
        "import time,sys; sys.path.insert(0, %r); t=time.perf_counter();"
        "from model_service import ModelService; ModelService.load();"
        "print(time.perf_counter()-t)" % str(ROOT)
    )
    env = {**os.environ, "NTP_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: what the app serves with)")
    args = ap.parse_args()

    from model_service.models.loading import serve_beside_web_server

    # The app's setting (all cores but one; the GIL back to the scheduler thread quickly): on 2 cores, two
    # torch threads spin-wait on each other whenever anything else runs, which turns a 1% difference into noise.
    serve_beside_web_server(args.threads)

    service = ModelService.load()
    print(f"model: {service.description}; torch threads: {torch.get_num_threads()}")
    print(f"prompt: {PROMPT!r}; {args.tokens} new tokens; {args.rounds} interleaved rounds; median tokens/s\n")

    for label, settings in SETTINGS.items():
        ours(service, settings, 8), theirs(service, settings, 8)  # warm-up
        rates = {"ours (capture on)": [], "ours (capture off)": [], "model.generate()": []}
        for _ in range(args.rounds):
            rates["ours (capture on)"].append(ours(service, settings, args.tokens)[0])
            rates["model.generate()"].append(theirs(service, settings, args.tokens))
            rates["ours (capture off)"].append(ours(service, settings, args.tokens, capture=False)[0])
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"[{label}]")
        for k, v in med.items():
            print(f"  {k:20s} {v:7.2f} tok/s")
        print(f"  (a) ours with capture / generate():  {med['ours (capture on)'] / med['model.generate()']:.3f}x  (goal >= 1.0)")
        overhead = med["ours (capture off)"] / med["ours (capture on)"] - 1
        print(f"  (b) capture overhead (on vs off):    {overhead * 100:+.2f}%  (goal <= 3%)\n")

    _, records = ours(service, SETTINGS["sampled T=0.8 top-p=0.95"], args.tokens)
    sizes = [len(json.dumps(r.to_dict()).encode()) for r in records]
    print(f"(c) step record bytes (JSON, top_n=20): mean {statistics.mean(sizes):.0f}, max {max(sizes)} (limit 8192)")

    if not args.skip_load:
        with tempfile.TemporaryDirectory() as cache:
            cold = load_time(cache)
            warm = load_time(cache)
        print(f"(d) load: cold {cold:.1f} s (dequantise GGUF + write cache), warm {warm:.1f} s  ->  {cold / warm:.1f}x faster warm")


if __name__ == "__main__":
    main()
