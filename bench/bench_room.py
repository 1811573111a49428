"""Benchmark of the room: N learners press Generate at once, on the embedded model.

For each N and each length, in one run: N concurrent streams (distinct seeds) joining the scheduler's
running batch vs the same N requests one after another. Prints
  - aggregate tokens/s of each, and the ratio (goal >= 4x at N = 16 on a 2-core CPU)
  - time to first record, p50 / p95 over the N streams (goal p95 <= 2 s at N = 16, 16 tokens)
  - p95 gap between consecutive records of one stream
  - seeded streams equal to solo: how many concurrent streams got exactly their one-after-another tokens
and, in direct mode, the host overhead at 1, 4 and 16 rows ((step wall - forward) / forward, the step as a
caller's stream sees it), and the cost of the scheduler for one request alone: generate() vs the same decode
step run in the caller's thread with no scheduler (interleaved rounds).

    .venv/bin/python bench/bench_room.py [--n 16 32] [--tokens 16 64] [--skip-solo] [--rounds 3] [--rounds-overhead 3]
    .venv/bin/python bench/bench_room.py --app http://127.0.0.1:7860/    # gradio_client against /stream_records
"""

from __future__ import annotations

import argparse
import ssl
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPTS = [
    "Once upon a time, in a small village by the sea,",
    "The history of the Roman Empire",
    "Here are some tips for learning to cook:",
    "My favourite book is",
    "The weather today is",
    "In the beginning",
    "def fibonacci(n):",
    "A letter to my future self:",
]
TEMPERATURE, TOP_P = 0.8, 0.95


def request(i: int) -> tuple[str, int]:
    return PROMPTS[i % len(PROMPTS)], 1000 + i  # prompt, seed


def p(values, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


class Direct:
    """Streams straight from an in-process ModelService (each caller in its own thread)."""

    def __init__(self):
        import torch

        from model_service import ModelService
        from model_service.models.loading import serve_beside_web_server

        serve_beside_web_server()  # the app's setting: all cores but one, the GIL back to the scheduler quickly
        self.service = ModelService.load()
        self.label = f"direct: {self.service.description}; torch threads {torch.get_num_threads()}; rows per step {self.service.max_rows}"

    def stream(self, prompt, seed, tokens, i=0):
        from model_service import SamplingSettings

        settings = SamplingSettings(temperature=TEMPERATURE, top_p=TOP_P, seed=seed)
        for record in self.service.generate(prompt, settings, max_new_tokens=tokens):
            yield record.token_id


class App:
    """Streams from a running app's /stream_records endpoint through gradio_client."""

    def __init__(self, url: str):
        self.url = url
        self.label = f"app: {url} /stream_records via gradio_client (one connected client per learner)"
        self.clients: dict[int, object] = {}
        self.tls = ssl.create_default_context()

    def connect(self, n: int) -> None:
        """One client per learner, connected before the clock starts: a learner's page is already
        loaded when they press Generate. Loading a page fetches the app config (building a Client
        does) and runs the page's load events, which open the learner's session on the server: here
        one /model_info call per client. All clients share one TLS context, as a browser's tabs do:
        gradio_client otherwise builds a fresh one (certifi's bundle, ~30 ms of CPU) for every call
        it makes, and on this shared 2-core machine that lands on the server's cores — 16 learners
        pressing Generate at once cost the server ~0.7 s before the first request reached it."""
        from gradio_client import Client

        for i in range(len(self.clients), n):
            self.clients[i] = Client(self.url, verbose=False, ssl_verify=self.tls)
            self.clients[i].predict(api_name="/model_info")

    def stream(self, prompt, seed, tokens, i=0):
        self.connect(i + 1)
        client = self.clients[i]
        # prompt, temperature, top_k, top_p, min_p, seed, order, max_new_tokens
        job = client.submit(prompt, TEMPERATURE, 0, TOP_P, 0.0, seed, "hf", tokens, api_name="/stream_records")
        for record in job:
            yield record["token_id"]
        job.result()  # raises the app's error, if any


def run_one(source, i, tokens, start, out):
    prompt, seed = request(i)
    times, ids = [], []
    try:
        for token_id in source.stream(prompt, seed, tokens, i):
            times.append(time.perf_counter())
            ids.append(token_id)
    except Exception as e:  # reported, not raised: the other streams' numbers still count
        out[i] = ("error", repr(e))
        return
    out[i] = (ids, [t - start for t in times])


def concurrent(source, n, tokens):
    getattr(source, "connect", lambda n: None)(n)
    out: dict = {}
    start = time.perf_counter()
    threads = [threading.Thread(target=run_one, args=(source, i, tokens, start, out)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, out


def sequential(source, n, tokens):
    out: dict = {}
    start = time.perf_counter()
    for i in range(n):
        run_one(source, i, tokens, time.perf_counter(), out)
    return time.perf_counter() - start, out


def compare(source, n, tokens) -> float | None:
    """One round: N streams at once, then the same N one after another. Returns the throughput ratio."""
    together_s, together = concurrent(source, n, tokens)
    alone_s, alone = sequential(source, n, tokens)
    errors = [v[1] for v in list(together.values()) + list(alone.values()) if v[0] == "error"]
    if errors:
        print(f"  N={n:3d} tokens={tokens:3d}: {len(errors)} errors, e.g. {errors[0]}")
        return None
    produced = sum(len(ids) for ids, _ in together.values())
    first = [times[0] for _, times in together.values() if times]
    gaps = [b - a for _, times in together.values() for a, b in zip(times, times[1:])]
    equal = sum(together[i][0] == alone[i][0] for i in range(n))
    rate_together, rate_alone = produced / together_s, sum(len(ids) for ids, _ in alone.values()) / alone_s
    print(f"  N={n:3d} tokens={tokens:3d}: concurrent {together_s:6.1f} s {rate_together:6.1f} tok/s | one after another "
          f"{alone_s:6.1f} s {rate_alone:6.1f} tok/s | ratio {rate_together / rate_alone:5.2f}x")
    print(f"      time to first record p50 {p(first, 0.5):5.2f} s  p95 {p(first, 0.95):5.2f} s | gap between records "
          f"p50 {p(gaps, 0.5) * 1000:5.0f} ms  p95 {p(gaps, 0.95) * 1000:5.0f} ms | "
          f"seeded streams equal to solo: {equal}/{n}")
    return rate_together / rate_alone


def host_overhead(service, sizes=(1, 4, 16), tokens=24, rounds=3):
    """The room's host overhead: N streams decoding together (seeded, sampled, every stage captured, end-of-text
    ignored so the batch stays full), the gap between a stream's consecutive records (the step as its caller sees
    it) against the forward pass the records report: (step wall - forward) / forward, medians over the steady
    steps of `rounds` rounds (each stream's first two records and last one left out: prefill and leaving)."""
    from model_service import SamplingSettings

    def one(i, n, out):
        prompt, seed = request(i)
        settings = SamplingSettings(temperature=TEMPERATURE, top_p=TOP_P, seed=seed)
        times, forward = [], []
        for record in service.generate(prompt, settings, max_new_tokens=tokens, ignore_eos=True):
            record.to_dict()  # what a caller's stream does with it
            times.append(time.perf_counter())
            if record.batch_size == n:
                forward.append(record.forward_ms)
        out[i] = ([b - a for a, b in zip(times[2:-1], times[3:-1])], forward[2:-1])

    print(f"  host overhead, {tokens} tokens per stream, {rounds} rounds (medians of steady steps):")
    for n in sizes:
        gaps, forwards = [], []
        for _ in range(rounds):
            out: dict = {}
            threads = [threading.Thread(target=one, args=(i, n, out)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            gaps += [gap * 1000 for stream_gaps, _ in out.values() for gap in stream_gaps]
            forwards += [ms for _, stream_forwards in out.values() for ms in stream_forwards]
        step, forward = statistics.median(gaps), statistics.median(forwards)
        print(f"    {n:3d} rows: step {step:6.1f} ms, forward {forward:6.1f} ms -> host overhead "
              f"{(step - forward) / forward * 100:+5.1f}%  (goal <= 15% at 16 rows)")


def solo_overhead(service, tokens=64, rounds=5):
    """One request alone: through the scheduler (generate) vs the same decode step in this thread."""
    import torch

    from model_service import SamplingSettings
    from model_service.engine.runner import Decoder
    from model_service.engine.step import RowState, sample_rows

    prompt, settings = PROMPTS[0], SamplingSettings(temperature=TEMPERATURE, top_p=TOP_P, seed=1)

    def scheduled():
        started = time.perf_counter()
        ids = [r.token_id for r in service.generate(prompt, settings, tokens, ignore_eos=True)]
        return time.perf_counter() - started, ids

    def in_thread():
        started = time.perf_counter()
        row = RowState(service.loaded, settings, tokens, ignore_eos=True)
        decoder = Decoder(service.model)
        with torch.inference_mode():
            logits = decoder.prefill([service.encode(prompt)])
            ids = []
            for step in range(tokens):
                (token,), (draw_info,), (summary,), ms = sample_rows(logits, [row], 20)
                row.record(step, token, draw_info, summary, decoder.forward_ms, ms)
                ids.append(token)
                if step < tokens - 1:
                    logits = decoder.step([token])
        return time.perf_counter() - started, ids

    scheduled(), in_thread()  # warm-up
    a, b = [], []
    for r in range(rounds):
        for f, acc in ((scheduled, a), (in_thread, b)) if r % 2 == 0 else ((in_thread, b), (scheduled, a)):
            seconds, ids = f()
            acc.append((seconds, ids))
    same = all(x[1] == y[1] for x, y in zip(a, b))
    ratio = statistics.median(t for t, _ in b) / statistics.median(t for t, _ in a)
    print(f"  one request alone, {tokens} tokens, {rounds} interleaved rounds (medians): through the scheduler "
          f"{tokens / statistics.median(t for t, _ in a):5.2f} tok/s, in the caller's thread "
          f"{tokens / statistics.median(t for t, _ in b):5.2f} tok/s -> {ratio:.3f}x (goal >= ~1.0); same tokens: {same}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--tokens", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--app", default=None, help="URL of a running app: stream through gradio_client")
    ap.add_argument("--skip-solo", action="store_true")
    ap.add_argument("--overhead-only", action="store_true", help="only the step and host overhead at 1, 4, 16 rows")
    ap.add_argument("--rounds-overhead", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds per N and length, each concurrent then one after another; with more than one, "
                         "the median ratio is printed too (a shared machine's speed drifts by 10-20%% in minutes)")
    args = ap.parse_args()

    source = App(args.app) if args.app else Direct()
    print(source.label)
    print(f"sampled T={TEMPERATURE} top-p={TOP_P}, seed = 1000 + stream index, {len(PROMPTS)} prompts cycled\n")
    if isinstance(source, Direct):
        from model_service.models import huge_pages

        list(source.stream(PROMPTS[0], 0, 4))  # warm-up
        huge_pages.settled(source.service.model)  # the weights moved into huge pages after the room's first step
        host_overhead(source.service, rounds=args.rounds_overhead)
        if not args.skip_solo and not args.overhead_only:
            solo_overhead(source.service)
    for n in [] if args.overhead_only else args.n:
        for tokens in args.tokens:
            ratios = [r for r in (compare(source, n, tokens) for _ in range(args.rounds)) if r is not None]
            if len(ratios) > 1:
                print(f"  N={n:3d} tokens={tokens:3d}: median ratio over {len(ratios)} rounds {statistics.median(ratios):5.2f}x "
                      f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
