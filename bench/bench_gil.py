"""Why a forward pass runs slower inside the app than alone: the GIL, not the other core.

One 16-row decode step of the embedded model (the room's step on this CPU), timed
  alone,
  beside a Python thread in the same process that works like the web server's event loop (bursts of
  pure Python, short sleeps: it holds the GIL about 60% of the time), and
  beside the same work in another process (it takes the other core, not the GIL),
interleaved round by round so the machine's drift hits every side alike. Prints the medians and the
ratios to "alone", with the step's own thread CPU time. A forward pass gives the GIL back and takes it
again around each of its ~2,000 torch ops; every time the other thread holds it, the pass waits.

    .venv/bin/python bench/bench_gil.py [--rounds 5] [--rows 16] [--switch-ms 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from model_service import ModelService
from model_service.models import loading

# A burst of Python, then a short sleep: ~3 ms held, ~2 ms free, like Gradio streaming records.
LOOP_LIKE = """
import time
def loop_like(stop):
    while not stop():
        start = time.perf_counter()
        while time.perf_counter() - start < 0.003:
            sum(range(100))
        time.sleep(0.002)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4, help="decode steps timed per side per round")
    parser.add_argument("--switch-ms", type=float, help="Python's switch interval (default: the app's)")
    args = parser.parse_args()
    loading.serve_beside_web_server()
    if args.switch_ms:
        sys.setswitchinterval(args.switch_ms / 1000)
    service = ModelService.load()
    model = service.model
    ids = torch.randint(0, service.info.vocab_size, (args.rows, 40))
    with torch.inference_mode():
        cache = model(ids, use_cache=True).past_key_values
    last = ids[:, -1:]

    def step() -> tuple[float, float]:
        with torch.inference_mode():
            wall, cpu = time.perf_counter(), time.thread_time()
            model(last, past_key_values=cache, use_cache=True)
            timed = (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000
        cache.crop(-1)  # every timed step reads the same 40 positions
        return timed

    namespace: dict = {}
    exec(LOOP_LIKE, namespace)

    def beside_thread() -> list:
        stop = False
        worker = threading.Thread(target=namespace["loop_like"], args=(lambda: stop,), daemon=True)
        worker.start()
        time.sleep(0.2)
        try:
            return [step() for _ in range(args.steps)]
        finally:
            stop = True
            worker.join()

    def beside_process() -> list:
        code = LOOP_LIKE + "\nloop_like(lambda: False)\n"
        other = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(0.5)
        try:
            return [step() for _ in range(args.steps)]
        finally:
            other.kill()
            other.wait()

    for _ in range(2):
        step()
    sides = {"alone": lambda: [step() for _ in range(args.steps)], "beside a thread (same process)": beside_thread,
             "beside a process": beside_process}
    times: dict[str, list] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, run in sides.items():
            times[name] += run()
    print(f"{service.description}; torch threads {torch.get_num_threads()}; "
          f"switch interval {sys.getswitchinterval() * 1000:.1f} ms; {args.rows}-row decode step, "
          f"{args.rounds} rounds x {args.steps} steps\n")
    alone = statistics.median(w for w, _ in times["alone"])
    for name, samples in times.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        print(f"  {name:32s} wall {wall:6.0f} ms  thread CPU {cpu:6.0f} ms  | {wall / alone:.2f}x alone")


if __name__ == "__main__":
    main()
