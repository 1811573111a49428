"""Benchmark of the batch-invariant mode (model_service/engine/invariant.py) on the embedded model.

For each arithmetic (default, batch-invariant) and each scheduler (thread, process), in one run:
  - K seeded requests (T 1, top-p 0.95) alone, one after another: each one's tokens and raw logits;
  - the same K joining a room at staggered moments (request i starts i x STAGGER after the first), so each joins
    a batch of another size and make-up, mid-flight;
  - how many runs draw exactly their solo tokens, the steps where a token flips, and the largest |delta logit|
    between a step alone and the same step in the room (over the candidates both carry, before any flip);
then the room's throughput: N requests at once, tokens/s, default vs batch-invariant (interleaved rounds,
medians), and one request alone, each arithmetic's tokens/s.

    .venv/bin/python bench/bench_invariance.py [--k 16] [--tokens 24] [--n 16] [--rounds 3] [--schedulers thread process]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_room import PROMPTS  # noqa: E402

TEMPERATURE, TOP_P = 1.0, 0.95
STAGGER_S = 0.15


def load(scheduler: str, invariant: bool):
    from model_service import ModelService
    from model_service.models.loading import serve_beside_web_server

    serve_beside_web_server()
    return ModelService.load(scheduler=scheduler, batch_invariant=invariant)


def run(service, i: int, tokens: int):
    """(token ids, per-step {candidate id: raw logit}) of request i."""
    from model_service import SamplingSettings

    settings = SamplingSettings(temperature=TEMPERATURE, top_p=TOP_P, seed=2000 + i)
    ids, logits = [], []
    for record in service.generate(PROMPTS[i % len(PROMPTS)], settings, tokens, ignore_eos=True):
        ids.append(record.token_id)
        logits.append({c.id: v for c, v in zip(record.candidates, record.logits or ())})
    return ids, logits


def staggered(service, k: int, tokens: int) -> dict:
    out: dict = {}

    def one(i):
        time.sleep(i * STAGGER_S)
        out[i] = run(service, i, tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def compare(alone: dict, room: dict) -> tuple[int, list[tuple[int, int]], float]:
    """(runs equal to solo, (request, step) of each first flip, max |delta logit| before any flip)."""
    equal, flips, worst = 0, [], 0.0
    for i, (ids, logits) in alone.items():
        other_ids, other_logits = room[i]
        if ids == other_ids:
            equal += 1
        for step, (a, b) in enumerate(zip(ids, other_ids)):
            common = set(logits[step]) & set(other_logits[step])
            worst = max([worst, *(abs(logits[step][c] - other_logits[step][c]) for c in common)])
            if a != b:
                flips.append((i, step))
                break
    return equal, flips, worst


def throughput(service, n: int, tokens: int) -> float:
    started = time.perf_counter()
    results: dict = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, run(service, i, tokens))) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(len(ids) for ids, _ in results.values()) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=16, help="seeded requests in the staggered room")
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--n", type=int, default=16, help="requests at once for the throughput")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--schedulers", nargs="+", default=["thread", "process"], choices=["thread", "process"])
    args = parser.parse_args()
    rates: dict = {}
    for scheduler in args.schedulers:
        services = {name: load(scheduler, name == "batch-invariant") for name in ("default", "batch-invariant")}
        print(f"{scheduler} scheduler: {services['default'].description}", flush=True)
        for name, service in services.items():
            assert service.batch_invariant == (name == "batch-invariant")
            alone = {i: run(service, i, args.tokens) for i in range(args.k)}
            equal, flips, worst = compare(alone, staggered(service, args.k, args.tokens))
            shown = ", ".join(f"request {i} step {s}" for i, s in flips[:4]) or "none"
            print(f"  {name:15s} staggered room of {args.k}: {equal}/{args.k} runs draw their solo tokens | flips: "
                  f"{shown} | max |delta logit| {worst:.2e}", flush=True)
        for r in range(args.rounds):  # interleaved: the machine's noise falls on both
            for name in (("default", "batch-invariant") if r % 2 == 0 else ("batch-invariant", "default")):
                rates.setdefault((scheduler, name, "room"), []).append(throughput(services[name], args.n, args.tokens))
                rates.setdefault((scheduler, name, "alone"), []).append(throughput(services[name], 1, args.tokens))
        for kind, label in (("room", f"{args.n} at once"), ("alone", "one alone")):
            a, b = (statistics.median(rates[(scheduler, n, kind)]) for n in ("default", "batch-invariant"))
            print(f"  throughput, {label:10s}: default {a:6.1f} tok/s | batch-invariant {b:6.1f} tok/s | "
                  f"invariant costs {1 - b / a:+.1%} (medians of {args.rounds} rounds)", flush=True)
        for service in services.values():
            service.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
