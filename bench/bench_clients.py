"""Benchmark of scripts in a full room: N clients of each kind at once against a running app, on the embedded model.

Kinds (each client streams TOKENS tokens at T 1, top-p 0.95, its own seed):
  gradio    one gradio_client.Client per learner on /stream_records, as docs/api.md recommends it: a longer
            HTTP timeout than httpx's 5 s default, the iteration that ends when the job fails, and report_waiting
            (a "waiting: N ahead" notice while the room's rows are taken)
  gradio-defaults
            the same with gradio_client's defaults (`for record in client.submit(...)`): a join that takes
            over 5 s raises inside the job, and gradio_client's iterator then waits forever (reported with a
            reproduction in docs/api.md). A server that answers every join well inside 5 s keeps them all
            finishing: the exit status counts them like the others
  openai    one openai.OpenAI client per learner, a streamed /v1/completions
  browser   Gradio's queue protocol by hand, as the page's JavaScript speaks it: one session, one POST to
            /gradio_api/queue/join and one event stream (/gradio_api/queue/data) per learner

For each kind it prints how many finished, how many failed with an error (and the first), how many never got a
record before the deadline, the time to the first record (p50 / p95), the wall time, and the time the server took
to answer each queue join (p50 / p99 / max; httpx's transport is timed, so the clients keep their settings). Then, with --ratio, K
openai clients at once vs the same K requests one after another: tokens/s of each and the ratio (the API's
requests share the room's batches like learners).

The clients run in this process, at a lower CPU priority (--nice, default 10): in a room each learner's script
runs on their own laptop; here they share the server's cores, and a client process at full priority takes the
cores the server needs to answer them.

    .venv/bin/python app.py --port 7861 &      # then, once "model ready":
    .venv/bin/python bench/bench_clients.py --app http://127.0.0.1:7861/ [--n 64] [--kinds gradio openai browser]
        [--ratio 16] [--rounds 3] [--tokens 16] [--deadline 180]
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_room import PROMPTS, p  # noqa: E402

TEMPERATURE, TOP_P = 1.0, 0.95
KINDS = ("gradio", "gradio-defaults", "openai", "browser")


def job_records(job, poll: float = 0.01):
    """A gradio_client Job's streamed outputs, ending when the job ends, raising its error if it failed.
    (`for x in job` waits forever when the job failed before its first status: gradio_client 2.7.)"""
    seen = 0
    while True:
        done = job.done()
        outputs = job.outputs()
        yield from outputs[seen:]
        seen = len(outputs)
        if done:
            job.result()  # raises the job's error, if any
            return
        time.sleep(poll)


class Learner:
    """One client's outcome: the times of its records (from the common start), or its error."""

    def __init__(self):
        self.times: list[float] = []
        self.notices = 0  # "waiting: N ahead" before the first record (the kinds that can see them)
        self.error: str | None = None
        self.finished = False


class Joins:
    """Times each POST to /queue/join from the request written to the response's headers read (the server's
    answer, not the client's own setup), for every httpx client in this process: httpx's transport is wrapped
    while the kind runs, so a gradio_client keeps its default settings."""

    def __init__(self):
        import httpx

        self.times: list[float] = []
        self.lock = threading.Lock()
        self.transport, self.real = httpx.HTTPTransport, httpx.HTTPTransport.handle_request

    def __enter__(self):
        joins, real = self, self.real

        def handle_request(transport, request):
            if not request.url.path.endswith("/queue/join"):
                return real(transport, request)
            sent = time.perf_counter()
            response = real(transport, request)
            with joins.lock:
                joins.times.append(time.perf_counter() - sent)
            return response

        self.transport.handle_request = handle_request
        return self

    def __exit__(self, *exc):
        self.transport.handle_request = self.real


def run_all(n: int, stream_one, deadline: float) -> tuple[list[Learner], float]:
    """N threads, each streaming once; waits at most `deadline` seconds (a stuck one is counted, not joined)."""
    learners = [Learner() for _ in range(n)]
    start = time.perf_counter()

    def run(i):
        learner = learners[i]
        try:
            for item in stream_one(i):
                if isinstance(item, dict) and "waiting" in item:
                    learner.notices += 1
                else:
                    learner.times.append(time.perf_counter() - start)
            learner.finished = True
        except Exception as e:  # noqa: BLE001 (counted and shown: the other learners' numbers still count)
            learner.error = f"{type(e).__name__}: {e}"[:160]

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    end = start + deadline
    for t in threads:
        t.join(max(0.0, end - time.perf_counter()))
    return learners, time.perf_counter() - start


def report(kind: str, learners: list[Learner], wall: float, deadline: float, joins: list[float] = ()) -> bool:
    n = len(learners)
    finished = [x for x in learners if x.finished]
    errors = [x for x in learners if x.error]
    silent = [x for x in learners if not x.finished and not x.error and not x.times and not x.notices]
    stuck = [x for x in learners if not x.finished and not x.error and x.times]
    first = [x.times[0] for x in learners if x.times]
    line = (f"  {kind:16s} finished {len(finished):3d}/{n} | errors {len(errors):3d} | nothing after {deadline:.0f} s: "
            f"{len(silent):3d} | stuck mid-stream {len(stuck):3d} | first record p50 {p(first, 0.5) if first else 0:5.2f} s "
            f"p95 {p(first, 0.95) if first else 0:5.2f} s | told they wait {sum(x.notices > 0 for x in learners):3d} | "
            f"wall {wall:6.1f} s")
    print(line, flush=True)
    if joins:
        print(f"      queue joins answered: {len(joins)}/{n} | p50 {p(joins, 0.5):5.2f} s | p99 {p(joins, 0.99):5.2f} s | "
              f"max {max(joins):5.2f} s (goal: p99 <= 2 s, under gradio_client's 5 s default)", flush=True)
    if errors:
        print(f"      first error: {errors[0].error}")
    return len(finished) == n


# ---- the kinds ----------------------------------------------------------------------------------------------
def gradio_streams(url: str, n: int, tokens: int, recommended: bool):
    """Clients built (and their sessions opened) before the clock starts: a learner's script is already
    connected when the host says go."""
    from gradio_client import Client

    # Recommended: one TLS context for all (as a browser's tabs share one; gradio_client otherwise builds one,
    # ~30 ms of CPU, for every request, and here that CPU is the server's) and a longer timeout. Defaults: as is.
    kwargs = {"httpx_kwargs": {"timeout": 60.0}, "ssl_verify": ssl.create_default_context()} if recommended else {}
    clients = [Client(url, verbose=False, **kwargs) for _ in range(n)]

    def stream_one(i):
        prompt, seed = PROMPTS[i % len(PROMPTS)], 1000 + i
        if recommended:  # report_waiting: "waiting: N ahead" while the room's rows are taken
            job = clients[i].submit(prompt, TEMPERATURE, 0, TOP_P, 0.0, seed, "hf", tokens, None, False, 20, True,
                                    api_name="/stream_records")
        else:
            job = clients[i].submit(prompt, TEMPERATURE, 0, TOP_P, 0.0, seed, "hf", tokens, api_name="/stream_records")
        yield from (job_records(job) if recommended else job)
        if not recommended:
            job.result()

    return stream_one


def openai_streams(url: str, n: int, tokens: int):
    from openai import OpenAI

    base = url.rstrip("/") + "/v1"
    key = os.environ.get("NTP_API_KEY", "not-needed-on-this-machine")
    clients = [OpenAI(base_url=base, api_key=key, max_retries=0, timeout=300) for _ in range(n)]
    model = clients[0].models.list().data[0].id

    def stream_one(i):
        prompt, seed = PROMPTS[i % len(PROMPTS)], 1000 + i
        stream = clients[i].completions.create(model=model, prompt=prompt, max_tokens=tokens, temperature=TEMPERATURE,
                                               top_p=TOP_P, seed=seed, stream=True)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].text:
                yield chunk.choices[0].text

    return stream_one, model


def apply_diff(value, diff):
    """A streamed output's next value from Gradio's diff ([action, path, value] ops), as the page applies it."""
    for action, path, new in diff:
        if not path:
            value = new if action == "replace" else value + new
            continue
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        if action == "replace":
            parent[key] = new
        elif action == "append":
            parent[key] += new
        elif action == "add":
            parent.insert(key, new) if isinstance(parent, list) else parent.__setitem__(key, new)
        elif action == "delete":
            del parent[key]
    return value


def browser_streams(url: str, n: int, tokens: int):
    """Gradio's sse_v3 protocol as the page speaks it (gradio's JS client): POST queue/join, then the
    session's event stream, reading process_generating messages until process_completed."""
    import httpx

    root = url.rstrip("/")
    config = httpx.get(root + "/config", timeout=60).json()
    prefix = config.get("api_prefix", "/gradio_api")
    fn_index = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "stream_records")
    # every parameter, as the page's JS client sends them: the defaults /info gives, then the ones set below
    info = httpx.get(f"{root}{prefix}/info", timeout=60).json()["named_endpoints"]["/stream_records"]["parameters"]
    defaults = [p.get("parameter_default") for p in info]
    http = httpx.Client(timeout=httpx.Timeout(60.0, read=300.0), limits=httpx.Limits(max_connections=4 * n))

    def stream_one(i):
        prompt, seed = PROMPTS[i % len(PROMPTS)], 1000 + i
        session = uuid.uuid4().hex[:11]
        given = [prompt, TEMPERATURE, 0, TOP_P, 0.0, seed, "hf", tokens, None, False, 20, True]  # report_waiting
        data = given + defaults[len(given):]
        joined = http.post(f"{root}{prefix}/queue/join", json={"data": data, "fn_index": fn_index, "session_hash": session,
                                                                "event_data": None, "trigger_id": None})
        joined.raise_for_status()
        value = None
        with http.stream("GET", f"{root}{prefix}/queue/data", params={"session_hash": session}) as events:
            for line in events.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                kind = message.get("msg")
                if kind == "process_generating":
                    data = message["output"]["data"][0]
                    first = value is None or not (isinstance(data, list) and data and isinstance(data[0], list))
                    value = data if first else apply_diff(value, data)
                    yield dict(value)
                elif kind == "process_completed":
                    if not message.get("success", True):
                        raise RuntimeError(f"the app said: {message.get('output', {}).get('error')}")
                    return
                elif kind == "close_stream":
                    raise RuntimeError("the stream closed before the event completed")
        raise RuntimeError("the event stream ended before the event completed")

    return stream_one


def ratio(url: str, k: int, tokens: int) -> float | None:
    """K openai clients at once vs one after another: the API's requests share the room's batches."""
    stream_one, model = openai_streams(url, k, tokens)
    together, together_s = run_all(k, stream_one, 600)
    started = time.perf_counter()
    alone = []
    for i in range(k):
        learners, _ = run_all(1, lambda _j, i=i: stream_one(i), 600)
        alone += learners
    alone_s = time.perf_counter() - started
    produced = (sum(len(x.times) for x in together), sum(len(x.times) for x in alone))
    if not all(x.finished for x in together + alone):
        print(f"  ratio: some requests failed: {[x.error for x in together + alone if x.error][:2]}")
        return None
    rate_together, rate_alone = produced[0] / together_s, produced[1] / alone_s
    print(f"  {k} openai clients ({model}), {tokens} tokens each: at once {together_s:6.1f} s {rate_together:6.1f} tok/s | "
          f"one after another {alone_s:6.1f} s {rate_alone:6.1f} tok/s | ratio {rate_together / rate_alone:5.2f}x")
    return rate_together / rate_alone


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--app", default="http://127.0.0.1:7860/", help="the running app's URL")
    parser.add_argument("--n", type=int, default=64, help="clients of each kind at once")
    parser.add_argument("--kinds", nargs="+", default=["gradio", "openai", "browser"], choices=KINDS)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--deadline", type=float, default=180.0, help="seconds a kind's clients may take")
    parser.add_argument("--ratio", type=int, default=16, help="openai clients for the at-once vs one-by-one ratio (0: skip)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the ratio (the median is the figure)")
    parser.add_argument("--nice", type=int, default=10, help="this process's CPU niceness (the clients')")
    args = parser.parse_args()
    os.nice(args.nice)
    print(f"{args.n} clients of each kind at once against {args.app}, {args.tokens} tokens each, T {TEMPERATURE}, "
          f"top-p {TOP_P}; clients at nice {args.nice}")
    every = True
    for kind in args.kinds:
        if kind.startswith("gradio"):
            stream_one = gradio_streams(args.app, args.n, args.tokens, kind == "gradio")
        elif kind == "openai":
            stream_one, _ = openai_streams(args.app, args.n, args.tokens)
        else:
            stream_one = browser_streams(args.app, args.n, args.tokens)
        with Joins() as joins:
            learners, wall = run_all(args.n, stream_one, args.deadline)
        every &= report(kind, learners, wall, args.deadline, joins.times)
    if args.ratio:
        ratios = [r for r in (ratio(args.app, args.ratio, args.tokens) for _ in range(args.rounds)) if r is not None]
        if ratios:
            print(f"  median ratio over {len(ratios)} rounds: {statistics.median(ratios):.2f}x")
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
