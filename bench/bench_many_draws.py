"""Benchmark of "sample a step many times" (model_service/sampling/many_draws.py): n draws from one final
distribution, their counts and the chi-square test, as ModelService.sample_many runs them after the
step's one forward pass. No model: random logits of the embedded model's vocabulary (49,152) and of
Gemma 3's (262,144), under a top-p of 0.9, on the CPU (and the GPU when there is one).

Prints the median over rounds of the whole sample_step (draws + counts + test + record), and the
draws alone, per n.

    .venv/bin/python bench/bench_many_draws.py [--rounds 20] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from model_service.records.step import Token  # noqa: E402
from model_service.sampling.many_draws import draw_many, sample_step  # noqa: E402
from model_service.sampling.pipeline import SamplingSettings, make_generator, run_stages  # noqa: E402


def median_ms(fn, rounds: int, device) -> float:
    times = []
    for _ in range(rounds + 1):  # the first is a warm-up
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; median of {args.rounds} rounds\n")
    for device in devices:
        for vocab in (49_152, 262_144):
            logits = torch.randn(1, vocab, generator=make_generator(0)).to(device) * 3
            stages = run_stages(logits, [SamplingSettings(top_p=0.9)], capture=False)
            final, window = stages.probs["final"][0], stages.bar[0]
            for n in (100, 1_000, 10_000):
                u = torch.rand(n, generator=make_generator(1, device), device=device, dtype=torch.float64)
                draws = median_ms(lambda: draw_many(final, window, u), args.rounds, device)
                whole = median_ms(lambda: sample_step(stages, n, 1, 20, lambda i: Token(i, ""), 0, 0, 0.0),
                                  args.rounds, device)
                print(f"{device.type:4s} V={vocab:>7,} N={n:>6,}: draws {draws:7.2f} ms · "
                      f"draws + counts + chi-square + record {whole:7.2f} ms")


if __name__ == "__main__":
    main()
