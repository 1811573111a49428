"""Benchmark of following the host: N followers' pages follow one host, against the running app.

Starts the app (embedded model) on a free port, or uses --url with --pid. The host is a gradio_client session
(open_room, one Generate so there is a run to share, then host_publish on the page's timer interval, as the host's
page sends it). Each follower does what a follower's page does: one streaming `follow` event, read over
Gradio's HTTP stream (plain HTTP, `/gradio_api/call/join` then `/gradio_api/call/follow`, in one session). For N in --n, prints
  - server CPU % (of one core; the server's pid from /proc via psutil) while N followers wait, and while the
    host changes things;
  - the delay from the host's change to each follower seeing it, p50 / p95 / max, for a change of settings
    (the lab's controls), of another tab's input (the softmax toy's logits), of step (the host's scrubber: charts of the host's run) and of run (a new run);
and, for comparison, the design not taken: N pages polling with a gr.Timer tick (the header's model watcher,
the same queue-free one-comparison handler a polling follower would call) at --poll seconds, idle CPU %.

    .venv/bin/python bench/bench_room_follow.py [--n 30 100] [--changes 8] [--poll 1.0]
    .venv/bin/python bench/bench_room_follow.py --url http://127.0.0.1:7860/ --pid 12345
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playground import limits  # noqa: E402
from playground.lab.request import DEFAULTS, KNOB_CONTROLS  # noqa: E402

STORY = "Once upon a time, in a small village by the sea,"  # runs its 24 tokens without an early end of text
LAB = [STORY, False, 1.0, 0, 1.0, 0.0, "1", 24, "", "hf", *(DEFAULTS[k] for k in KNOB_CONTROLS)]  # the lab's controls, in order


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))] if values else float("nan")


class CPU:
    """The server's CPU time over a wall interval, as % of one core."""

    def __init__(self, pid: int):
        self.proc = psutil.Process(pid)

    def __enter__(self):
        t = self.proc.cpu_times()
        self.cpu, self.wall = t.user + t.system, time.monotonic()
        return self

    def __exit__(self, *exc):
        t = self.proc.cpu_times()
        self.percent = 100 * (t.user + t.system - self.cpu) / (time.monotonic() - self.wall)


def start_app() -> tuple[str, subprocess.Popen]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "NTP_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(600):
        try:
            if httpx.get(url + "config", timeout=2).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("the app did not start")


class Follower:
    """One follower page: its `follow` stream; records when each awaited marker first arrives."""

    def __init__(self, url: str, code: str):
        self.url, self.code, self.seen, self.updates = url, code, {}, 0
        self.wanted: list[str] = []
        self.error = None  # what the server said if the stream ended in an error

    async def run(self, client: httpx.AsyncClient, ready: asyncio.Event, counter: list):
        session = f"follower-{id(self)}"  # as a page: join (the bar) then follow (the stream), in one session
        r = await client.post(self.url + "gradio_api/call/join", json={"data": [self.code, "en"],
                                                                        "session_hash": session})
        async with client.stream("GET", self.url + f"gradio_api/call/join/{r.json()['event_id']}") as joined:
            async for line in joined.aiter_lines():
                if line.startswith("event: error"):
                    raise RuntimeError(f"join failed: {line}")
        r = await client.post(self.url + "gradio_api/call/follow", json={"data": [], "session_hash": session})
        event_id = r.json()["event_id"]
        async with client.stream("GET", self.url + f"gradio_api/call/follow/{event_id}") as stream:
            async for line in stream.aiter_lines():
                if line.startswith("event: error"):
                    self.error = "error"
                if not line.startswith("data:"):
                    continue
                if self.error == "error":
                    self.error = line[:300]
                now = time.monotonic()
                self.updates += 1
                if self.updates == 1:  # the first update applies the room's state
                    counter[0] += 1
                    if counter[0] == counter[1]:
                        ready.set()
                for marker in self.wanted:
                    if marker not in self.seen and marker in line:
                        self.seen[marker] = now


class Host:
    """The host's page: its session, and its timer sending what the page shows every HOST_PUBLISH_SECONDS: every
    tab's inputs at the page's defaults but the lab's controls (LAB) and the toy's logits, which the host changes."""

    def __init__(self, url: str):
        from gradio_client import Client

        self.client, self.url, self.http, self.round_trips = Client(url, verbose=False), url, None, []
        self.values, self.tab, self.step, self.toy = list(LAB), "lab", 0, None
        config = httpx.get(url + "config").json()
        self.fn, dep = next((d.get("id", i), d) for i, d in enumerate(config["dependencies"])
                            if d.get("api_name") == "host_publish")
        # [seat, key, tab, *every field, scrub, run, lang]: the page's initial values (states travel as null)
        props = {c["id"]: c.get("props", {}) for c in config["components"]}
        self.inputs = [None if props[i].get("value") is None else props[i]["value"] for i in dep["inputs"]]
        self.toy_at = next(k for k, v in enumerate(self.inputs) if isinstance(v, dict) and "logit" in v.get("headers", []))
        bar = self.client.predict(*self.data()[1:-2], self.data()[-1], api_name="/open_room")[0]
        self.code = re.search(r"\*\*(\w{5})\*\*", bar).group(1)

    def data(self) -> list:
        data = [None, "", self.tab, *self.values, *self.inputs[3 + len(LAB):-3], self.step, None, "en"]
        if self.toy is not None:
            data[self.toy_at] = {**data[self.toy_at], "data": self.toy}
        return data

    def generate(self):
        self.client.predict(*self.values, "en", api_name="/generate")

    def publish(self):
        """As the host page's timer sends it: one queue-free POST in the host's session (its seat holds the token).
        gradio_client's predict costs ~0.5-2 s a call here, the page's POST ~50 ms."""
        if self.http is None:
            self.http = httpx.Client(timeout=30)
        t0 = time.monotonic()
        r = self.http.post(self.url + "gradio_api/run/predict", json={
            "data": self.data(), "fn_index": self.fn, "session_hash": self.client.session_hash})
        r.raise_for_status()
        self.round_trips.append(time.monotonic() - t0)

    async def tick_forever(self):
        while True:
            await asyncio.to_thread(self.publish)
            await asyncio.sleep(limits.HOST_PUBLISH_SECONDS)


async def follow_round(url: str, pid: int, n: int, changes: int) -> dict:
    host = await asyncio.to_thread(Host, url)
    await asyncio.to_thread(host.generate)
    await asyncio.to_thread(host.publish)
    followers = [Follower(url, host.code) for _ in range(n)]
    ready, counter = asyncio.Event(), [0, n]
    limits_ = httpx.Limits(max_connections=2 * n + 10, max_keepalive_connections=2 * n + 10)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=None), limits=limits_) as client:
        tasks = [asyncio.create_task(f.run(client, ready, counter)) for f in followers]
        joined = time.monotonic()
        await asyncio.wait_for(ready.wait(), 120)
        out = {"join_s": time.monotonic() - joined}
        ticker = asyncio.create_task(host.tick_forever())
        await asyncio.sleep(2)
        with CPU(pid) as idle:
            await asyncio.sleep(10)
        out["idle_cpu"] = idle.percent
        delays = {"settings": [], "toy": [], "step": [], "run": []}
        with CPU(pid) as busy:
            for k in range(changes):
                for kind in ("settings", "toy", "step") + (("run",) if k < 3 else ()):
                    await asyncio.sleep(random.uniform(0, limits.HOST_PUBLISH_SECONDS))  # a change at any moment
                    if kind == "settings":  # a stop string the host types (a unique text to look for)
                        host.values[8] = marker = f"zz#{k}"
                    elif kind == "toy":  # another tab's input: the softmax toy's first logit
                        rows = [list(r) for r in host.inputs[host.toy_at]["data"]]
                        rows[0][1] = float(marker := f"4.{k + 101}")
                        host.toy = rows
                    elif kind == "step":
                        host.step = 1 + k % 3  # never the step shown before: the host's scrubber moves
                        marker = f"**Step {host.step}** of"  # the scrubber counts from 1, as the status line
                    else:  # a new run on the host's page (a new seed); the change is its end, shared at a tick
                        host.values[6] = str(100 + k)
                        marker = f"seed {100 + k}"
                        await asyncio.to_thread(host.generate)
                    for f in followers:  # a step's marker comes back every third change: forget its last sighting
                        f.seen.pop(marker, None)
                        f.wanted.append(marker)
                    t0 = time.monotonic()
                    await asyncio.sleep(3.0 if kind == "run" else 2.0)
                    delays[kind] += [f.seen[marker] - t0 for f in followers if marker in f.seen]
                    missed = sum(marker not in f.seen for f in followers)
                    if missed:
                        print(f"  ({missed} of {n} followers had not seen the {kind} change #{k} after 2 s)")
        out["busy_cpu"] = busy.percent
        out["publish"] = host.round_trips
        out["delays"] = delays
        ticker.cancel()
        ended = [t for t in tasks if t.done()]
        if ended:
            f = followers[tasks.index(ended[0])]
            print(f"  ({len(ended)} follower streams ended early: {ended[0].exception() or f.error!r})")
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, ticker, return_exceptions=True)
    await asyncio.to_thread(host.client.predict, "en", api_name="/close_room")
    return out


async def timer_round(url: str, pid: int, n: int, poll: float) -> float:
    """The design not taken: N pages, each a gr.Timer ticking every `poll` s (one queue-free event a tick)."""
    config = httpx.get(url + "config").json()
    timers = {c["id"] for c in config["components"] if c.get("type") == "timer"
              and c.get("props", {}).get("value") == limits.MODEL_WATCH_SECONDS}
    fn = next(i for i, d in enumerate(config["dependencies"])
              if any(t[0] in timers and t[1] == "tick" for t in d["targets"]))
    dep = config["dependencies"][fn]
    state_inputs = len(dep["inputs"])

    async def page(client, i):
        await asyncio.sleep(random.uniform(0, poll))
        while True:
            data = [None] * (state_inputs - 1) + ["en"]
            await client.post(url + "gradio_api/run/predict",
                              json={"data": data, "fn_index": dep.get("id", fn), "session_hash": f"bench{i}"})
            await asyncio.sleep(poll)

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=n + 10)) as client:
        tasks = [asyncio.create_task(page(client, i)) for i in range(n)]
        await asyncio.sleep(2)
        with CPU(pid) as cpu:
            await asyncio.sleep(10)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return cpu.percent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[30, 100])
    ap.add_argument("--changes", type=int, default=8, help="settings and step changes per N (and 3 new runs)")
    ap.add_argument("--poll", type=float, default=1.0, help="the timer design's tick, seconds")
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int)
    args = ap.parse_args(argv)
    proc = None
    if args.url:
        url, pid = args.url.rstrip("/") + "/", args.pid
    else:
        url, proc = start_app()
        pid = proc.pid
    try:
        from gradio_client import Client
        from gradio_client.exceptions import AppError

        for _ in range(300):  # the page is up at once; the model loads behind it
            try:
                Client(url, verbose=False).predict(*LAB[:7], 1, *LAB[8:], "en", api_name="/generate")
                break
            except AppError as e:
                if "loading" not in str(e):
                    raise
                time.sleep(1)
        print(f"app {url} (pid {pid}); host publishes every {limits.HOST_PUBLISH_SECONDS} s, followers look every "
              f"{limits.FOLLOW_POLL_SECONDS} s; {os.cpu_count()} CPU cores; delays from the host's change (at a "
              f"random moment of its timer) to a follower's stream carrying it")
        with CPU(pid) as base:
            time.sleep(5)
        print(f"server alone: {base.percent:.1f}% CPU")
        for n in args.n:
            r = asyncio.run(follow_round(url, pid, n, args.changes))
            print(f"[{n} followers] all joined in {r['join_s']:.2f} s; server CPU: {r['idle_cpu']:.1f}% while they "
                  f"wait (host ticking), {r['busy_cpu']:.1f}% while the host changes things")
            print(f"  the host's publish (POST): p50 {pct(r['publish'], .5) * 1000:.0f} ms, "
                  f"p95 {pct(r['publish'], .95) * 1000:.0f} ms")
            for kind, d in r["delays"].items():
                print(f"  {kind:8s} change: {len(d):4d} arrivals  p50 {pct(d, .5):.3f} s  p95 {pct(d, .95):.3f} s  "
                      f"max {max(d, default=float('nan')):.3f} s")
        for n in args.n:
            cpu = asyncio.run(timer_round(url, pid, n, args.poll))
            print(f"[timer design, {n} pages ticking every {args.poll} s] server CPU {cpu:.1f}% with nothing changing")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
