"""Benchmark: the interventions beside one forward pass, on the embedded model and this CPU.

For the lesson prompt (and a longer one), in interleaved rounds, times
  - one forward pass: the model's prefill of the prompt, last position's logits (what a trace's pass costs);
  - the attribution: client.attribute's work (one traced pass with hooks, the terms, one block's heads);
  - a knock-out's rerun: the pass with block 30's MLP, then block 24's attention, then one head knocked out;
  - the service's knock_out() as the page calls it, for a prompt it has knocked out before (the model's own logits
    are kept per prompt: one pass, then the before and after drawn through the sampler);
and prints the medians and each one's ratio to the forward pass (goal: at most 1.2x). A prompt's first knock-out
also runs the model as it is: two passes.

    .venv/bin/python bench/bench_interventions.py [--rounds 15] [--threads 1]
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

from model_service import ModelService, SamplingSettings  # noqa: E402
from model_service.forward_pass.attribution import attribute  # noqa: E402
from model_service.forward_pass.knockout import last_logits  # noqa: E402
from model_service.records.intervention import Knockout  # noqa: E402

PROMPTS = {"lesson (5 tokens)": "The capital of France is",
           "longer (~60 tokens)": "Once upon a time, in a small village by the sea, there lived an old fisherman who "
                                  "went out every morning before dawn. One day his net came back heavy, and in it he "
                                  "found a bottle sealed with wax. Inside the bottle was"}
TARGETS = (Knockout("mlp", 30), Knockout("attention", 24), Knockout("head", 24, 5))


def timed(work) -> float:
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads (the app's setting: 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    service = ModelService.load()
    model = service.model
    print(f"{service.info.name} · cpu · float32 · torch threads {args.threads} · medians of {args.rounds} interleaved rounds")
    for label, prompt in PROMPTS.items():
        ids = service.encode(prompt)
        work = {"forward pass": lambda: last_logits(model, ids),
                "attribution": lambda: attribute(model, service.pieces, ids),
                **{f"knock-out rerun ({t.kind} {t.block}{'' if t.head is None else f' h{t.head}'})":
                   (lambda t=t: last_logits(model, ids, t)) for t in TARGETS},
                "knock_out(), the prompt's next (a pass, two draws)": lambda: service.knock_out(
                    prompt, TARGETS[0], SamplingSettings(seed=1))}
        for run in work.values():  # warm up
            run()
        times = {name: [] for name in work}
        for _ in range(args.rounds):
            for name, run in work.items():
                times[name].append(timed(run))
        base = statistics.median(times["forward pass"])
        print(f"\n{label}: {len(ids)} tokens")
        for name, values in times.items():
            median = statistics.median(values)
            goal = "" if name == "forward pass" else ("  ok" if median <= 1.2 * base else "  over 1.2x")
            print(f"  {name:52s} {median:8.1f} ms   {median / base:5.2f}x{goal}")


if __name__ == "__main__":
    main()
