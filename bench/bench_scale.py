"""Benchmark of the scale-out: the room bench against 1 and 2 local Ray Serve replicas, then a projection.

1. Capacity per replica, measured: N learners press Generate at once (16 tokens, distinct seeds, T 0.8,
   top-p 0.95) against a local Ray Serve application of R replicas, through RemoteService (what the page
   uses). For each R: tokens/s, p95 time to first record, and the largest N served with p95 <= 2 s.
   This machine has 2 cores: two replicas share them (one intra-op thread each), so R = 2 can show that
   requests spread over replicas and that the scheduler batches within each, not twice the throughput.
2. The step cost vs batch size of the model on this CPU (decode step + sampler, in process).
3. A projection for a 1,000-learner event: replicas needed on this CPU and on one GPU type per row of
   the table, from the measured step costs (CPU) and the memory-bandwidth bound (GPUs), with every
   assumption printed next to it (docs/scaling.md explains them).

    .venv/bin/python bench/bench_scale.py [--replicas 1 2] [--n 4 8 16 24 32] [--skip-serve]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_room import PROMPTS, TEMPERATURE, TOP_P, p  # noqa: E402

FIRST_RECORD_GOAL_S = 2.0
TOKENS = 16

# ---- the projection's assumptions (docs/scaling.md) ----------------------------------------------------------
EVENT_LEARNERS = 1000
PRESS_EVERY_S = 30.0  # each learner starts a run every 30 s on average during the exercises
TOKENS_PER_RUN = 64
UTILISATION = 0.7  # headroom: a replica is planned at 70 % of its measured tokens/s
# GPUs: memory bandwidth (bytes/s), bf16 dense peak (FLOP/s), and the fraction of the bandwidth a decode step reaches
GPUS = {"L4 (24 GB)": (300e9, 121e12), "A10G (24 GB)": (600e9, 125e12), "L40S (48 GB)": (864e9, 362e12),
        "A100 80GB": (2.0e12, 312e12), "H100 SXM (80 GB)": (3.35e12, 989e12), "H200 (141 GB)": (4.8e12, 989e12)}
BANDWIDTH_EFFICIENCY = 0.6
# A decode step's floor: transformers' eager forward launches ~20 kernels per layer from Python; measured on an H200,
# Llama-3.1-8B at 1 row (32 layers): 17 ms, 5x its bandwidth bound. The small models have ~30 layers too.
STEP_FLOOR_S = 0.017
# Python per row and step (its summaries read back, its record built and sent), measured on an H200 with
# Llama-3.1-8B (bench/bench_gpu.py (d), N = 64: 85 ms a step = 36 ms forward + 10 ms sampler + 39 ms records)
HOST_S_PER_ROW = 0.0006
MODELS = {"SmolLM2-135M (bf16)": 134.5e6, "Gemma 3 270M (bf16)": 268e6, "Llama-3.1-8B (bf16)": 8.03e9}
GPU_ROWS = 64  # limits.MAX_ROWS_GPU


def remote_round(service, n: int) -> dict:
    from model_service import SamplingSettings

    first, counts = {}, {}
    start = time.perf_counter()

    def one(i):
        settings = SamplingSettings(temperature=TEMPERATURE, top_p=TOP_P, seed=1000 + i)
        counts[i] = 0
        for _ in service.generate(PROMPTS[i % len(PROMPTS)], settings, TOKENS):
            first.setdefault(i, time.perf_counter() - start)
            counts[i] += 1

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    return {"n": n, "seconds": seconds, "tok_s": sum(counts.values()) / seconds,
            "first_p50": p(list(first.values()), 0.5), "first_p95": p(list(first.values()), 0.95)}


def measure_replicas(replicas: int, ns: list[int], port: int) -> None:
    import ray
    from ray import serve

    from model_service.deploy.ray_serve import application
    from model_service.deploy.remote import RemoteService

    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}})
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        cpus = (os.cpu_count() or 2) / replicas / 2  # leave room for Serve's proxy and this client
        serve.run(application(replicas=replicas, threads=1, num_cpus=cpus), name="playground", route_prefix="/")
        service = RemoteService(f"http://127.0.0.1:{port}")
        assert service.wait(300).ready, service.status
        remote_round(service, 2)  # warm-up: every replica's first step
        capacity = 0
        print(f"replicas={replicas} (one intra-op thread each), {TOKENS} tokens per learner, via RemoteService")
        for n in ns:
            r = remote_round(service, n)
            ok = r["first_p95"] <= FIRST_RECORD_GOAL_S
            capacity = n if ok else capacity
            print(f"  N={n:3d}: {r['tok_s']:6.1f} tok/s | first record p50 {r['first_p50']:5.2f} s p95 "
                  f"{r['first_p95']:5.2f} s {'<= 2 s' if ok else '>  2 s'}")
        print(f"  -> learners served at once with p95 first record <= 2 s: {capacity} (of those tried)\n")
    finally:
        serve.shutdown()
        ray.shutdown()


def step_costs(batches=(1, 4, 16)) -> dict[int, float]:
    """Seconds per decode step (forward + sampler with summaries) at each batch size, in process."""
    import torch

    from model_service import ModelService, SamplingSettings
    from model_service.engine.runner import Decoder
    from model_service.engine.step import RowState, sample_rows

    torch.set_num_threads(1)
    service = ModelService.load()
    out = {}
    for b in batches:
        decoder = Decoder(service.model)
        rows = [RowState(service.loaded, SamplingSettings(temperature=TEMPERATURE, top_p=TOP_P, seed=i), 64) for i in range(b)]
        with torch.inference_mode():
            logits = decoder.prefill([service.encode(PROMPTS[i % len(PROMPTS)]) for i in range(b)])
            times = []
            for step in range(8):
                started = time.perf_counter()
                tokens, *_ = sample_rows(logits, rows, 20)
                logits = decoder.step(tokens)
                times.append(time.perf_counter() - started)
        out[b] = sorted(times[2:])[len(times[2:]) // 2]
        print(f"  batch {b:3d}: {out[b] * 1000:6.0f} ms per step -> {b / out[b]:6.1f} tok/s")
    return out


def projection(cpu_costs: dict[int, float]) -> None:
    demand = EVENT_LEARNERS / PRESS_EVERY_S * TOKENS_PER_RUN
    print(f"demand: {EVENT_LEARNERS} learners, a run of {TOKENS_PER_RUN} tokens every {PRESS_EVERY_S:.0f} s each "
          f"-> {demand:,.0f} tok/s; replicas planned at {UTILISATION:.0%} of their tokens/s\n")
    print(f"| where | model | rows per step | step time | tok/s per replica | replicas for {EVENT_LEARNERS} |")
    print("|---|---|---|---|---|---|")
    h200 = 64 / 0.0849  # measured: bench/bench_gpu.py on an H200, Llama-3.1-8B bf16, 64 rows: 754 tok/s
    print(f"| H200 (measured, bench_gpu.py) | Llama-3.1-8B (bf16, random weights) | 64 | 84.9 ms | {h200:,.0f} | "
          f"{math.ceil(demand / (h200 * UTILISATION))} |")
    b = max(cpu_costs)
    cpu_rate = b / cpu_costs[b]
    print(f"| this CPU (2 cores, measured) | SmolLM2-135M (fp32) | {b} | {cpu_costs[b] * 1000:.0f} ms | {cpu_rate:.0f} | "
          f"{math.ceil(demand / (cpu_rate * UTILISATION))} |")
    for gpu, (bandwidth, flops) in GPUS.items():
        for model, params in MODELS.items():
            weights = params * 2  # bf16
            device = max(STEP_FLOOR_S, weights / (bandwidth * BANDWIDTH_EFFICIENCY), 2 * params * GPU_ROWS / (flops * 0.5))
            step = device + HOST_S_PER_ROW * GPU_ROWS
            rate = GPU_ROWS / step
            print(f"| {gpu} (projected) | {model} | {GPU_ROWS} | {step * 1000:.1f} ms | {rate:,.0f} | "
                  f"{math.ceil(demand / (rate * UTILISATION))} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--n", type=int, nargs="+", default=[4, 8, 16, 24, 32])
    ap.add_argument("--skip-serve", action="store_true", help="only the step costs and the projection")
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} (2-core machine; other work skews every figure)\n")
    if not args.skip_serve:
        for r in args.replicas:
            measure_replicas(r, args.n, args.port)
    print("step cost vs batch size (SmolLM2-135M, fp32, one thread, T 0.8 top-p 0.95, summaries on):")
    costs = step_costs()
    print()
    projection(costs)


if __name__ == "__main__":
    main()
