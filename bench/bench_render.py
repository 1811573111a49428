"""Benchmark of the Sampling lab as a learner sees it: tokens RENDERED in headless Chromium.

Runs the real app (build_demo) in-process, drives it with Playwright + Debian chromium, and prints,
from ONE run (service runs interleaved before/after each browser run, same prompt/seed/settings):
  (1) rendered tokens/s (chips appearing in #chips, timestamped in the page by a MutationObserver)
      vs the service's own rate (service.generate in this process, tokens / wall time); goal >= 80%
      (1b) and vs the server's rate in the same run (its model beside the browser on the same cores: what the
      status line reports); goal >= 90%
  (2) steadiness over the run: rendered rate of the last 50 tokens / first 50; goal >= 90%
  (3) bytes sent to the browser per step (CDP Network.dataReceived on the run's SSE stream), with a
      rough breakdown (chips HTML vs Plotly figures) and where the server's time goes per step
  (4) the page's long tasks while the run streams (PerformanceObserver): how many, the longest (goal <= 200 ms:
      a click waits that long) and the most chips one update added (goal <= 2: a stream, not bursts)
Saves artifacts/bench_render.png (full page at the end).

    .venv/bin/python bench/bench_render.py [--tokens 300] [--rounds 2] [--seed 0]   # ~8 min on 2 cores

Rates on a shared 2-core box are noisy (the load average is printed): trust ratios within a round.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import socket
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402
from gradio import blocks as gr_blocks  # noqa: E402
from gradio import utils as gr_utils
from playwright.sync_api import sync_playwright  # noqa: E402

import playground.lab.charts as lab_charts  # noqa: E402
import playground.lab.handlers as lab  # noqa: E402  (the streaming handler calls the views from here)
from model_service import ModelService, SamplingSettings  # noqa: E402
from model_service.models.switching import LoadingService  # noqa: E402
from playground.page import build_demo, launch_options  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea,"
TEMPERATURE, TOP_P, WINDOW = 0.8, 0.95, 50
BETWEEN, INSIDE = "between steps: chips, status, figures, gradio, SSE", "inside service.generate (model + sampling)"
CHIPS, FIGS = "chips HTML: token_chips_html", "figures: stage_figure + draw_figure"
PROF: dict = defaultdict(lambda: [0, 0.0, 0])  # name -> [calls, seconds, bytes on the wire (approx.)]
STAMPS: list[float] = []  # when each token of the app's run came out of the model (perf_counter seconds)

OBSERVER_JS = """() => {
  const el = document.querySelector('#chips');
  window.__last = el.querySelectorAll('.ntp-chip').length; window.__chips = [];  // a change starts the run
  const count = () => { const n = el.querySelectorAll('.ntp-chip').length;
    if (n !== window.__last) { window.__last = n; window.__chips.push([performance.now(), n]); } };
  new MutationObserver(count).observe(el, {childList: true, subtree: true, characterData: true});
  const st = document.querySelector('#run-status'); window.__running = false; window.__done = 0;
  new MutationObserver(() => { const stopped = st.innerText.includes('stopped');  // this run's end, not the last one's
    if (!stopped) window.__running = true; else if (window.__running && !window.__done) window.__done = performance.now();
  }).observe(st, {childList: true, subtree: true, characterData: true});
  window.__long = [];  // the main thread's long tasks (> 50 ms) from the click on: a click waits that long
  if (!window.__longObserver) {
    window.__longObserver = new PerformanceObserver((list) => list.getEntries().forEach(
      (e) => window.__long.push([e.startTime, e.duration])));
    window.__longObserver.observe({type: 'longtask'});
  }
  window.__t0 = performance.now(); document.querySelector('#generate').click();
}"""


def _wire(value) -> int:
    """Rough JSON size of a postprocessed value: strings escape their quotes, PlotData carries .plot."""
    s = getattr(value, "plot", value)
    return len(s) + s.count('"') if isinstance(s, str) else 0


def instrument(owner, name: str, key: str) -> None:
    """Wrap owner.name (sync or async) to add calls/seconds/approx. wire bytes to PROF[key]."""
    fn = getattr(owner, name)

    def add(t, out):
        p = PROF[key]
        p[0], p[1], p[2] = p[0] + 1, p[1] + time.perf_counter() - t, p[2] + _wire(out)
        return out

    async def awrapper(*a, **k):
        t = time.perf_counter()
        return add(t, await fn(*a, **k))

    def wrapper(*a, **k):
        t = time.perf_counter()
        return add(t, fn(*a, **k))
    setattr(owner, name, functools.wraps(fn)(awrapper if inspect.iscoroutinefunction(fn) else wrapper))


def timed_stream(model: ModelService):
    """service.generate for the app, splitting each step into time inside the model vs outside it."""

    def generate(*a, **k):
        it, last = iter(model.generate(*a, **k)), None
        while True:
            t = time.perf_counter()
            if last is not None:
                PROF[BETWEEN][1] += t - last
            try:
                record = next(it)
            except StopIteration:
                return
            last = time.perf_counter()
            STAMPS.append(last)
            PROF[INSIDE][0] += 1
            PROF[INSIDE][1] += last - t
            yield record

    return generate


def rates(stamps: list[float], t0: float = 0.0) -> dict:
    """stamps[i] = seconds when token i+1 was available; end-to-end, from-first-token, first/last window."""
    n, w = len(stamps), min(WINDOW, len(stamps) - 1)
    return {
        "n": n, "e2e": n / (stamps[-1] - t0), "steady": (n - 1) / (stamps[-1] - stamps[0]),
        "first": w / (stamps[w] - stamps[0]), "last": w / (stamps[-1] - stamps[-1 - w]),
    }


def service_run(model, settings, tokens):
    t0, stamps = time.perf_counter(), []
    for r in model.generate(PROMPT, settings, max_new_tokens=tokens):
        stamps.append(time.perf_counter() - t0)
    return rates(stamps), r.stop_reason


def set_number(page, label: str, value) -> None:
    box = page.get_by_label(f"number input for {label}")
    box.fill(str(value))
    box.press("Tab")


def browser_run(page, cdp, net, tokens) -> dict:
    set_number(page, "Max new tokens", tokens)
    net["urls"].clear(), net["bytes"].clear(), PROF.clear(), STAMPS.clear()
    perf0 = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    page.evaluate(OBSERVER_JS)
    page.wait_for_function("() => window.__done", timeout=1_800_000, polling=250)
    prof = {k: list(v) for k, v in PROF.items()}  # before the .then(finish) event adds the run chart
    perf1 = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    page.wait_for_timeout(1500)  # the .then(finish) event: scrub slider + run chart
    t0, points, done, long = page.evaluate("() => [window.__t0, window.__chips, window.__done, window.__long]")
    streaming = [d for start, d in long if t0 <= start <= done]  # from the click to the run's last status
    first_seen, k = [], 1  # first time the page showed >= k chips (robust to skipped counts)
    for t, n in points:
        while k <= n:
            first_seen.append((t - t0) / 1000)
            k += 1
    streams = [rid for rid, url in net["urls"].items() if "/queue/data" in url]
    return {
        "rates": rates(first_seen) if len(first_seen) > 1 else None, "status": page.inner_text("#run-status"),
        "stream_bytes": [net["bytes"][rid] for rid in streams],
        "browser_cpu": {m: perf1.get(m, 0) - perf0.get(m, 0) for m in ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")},
        "server": rates([t - STAMPS[0] for t in STAMPS]) if len(STAMPS) > 1 else None,
        "prof": prof, "long_tasks": streaming, "stream_s": (done - t0) / 1000,
        "most_chips": max((b - a for (_, a), (_, b) in zip([(0, 0), *points], points)), default=0),
        "bursts": [(round((t - t0) / 1000, 2), a, b - a) for (_, a), (t, b) in zip([(0, 0), *points], points) if b - a > 2],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2, help="browser runs, each between two service runs")
    ap.add_argument("--seed", type=int, default=0, help="first seed tried; the next ones if the model stops early")
    args = ap.parse_args()
    N = args.tokens
    print(f"load average at start: {os.getloadavg()}  (2-core machine; other jobs add noise)")
    model = ModelService.load()
    seed = args.seed
    while True:  # a seed whose run really reaches N tokens (no EOS)
        settings = SamplingSettings(temperature=TEMPERATURE, top_p=TOP_P, seed=seed)
        first_service, reason = service_run(model, settings, N)
        if reason == "max_tokens" or seed >= args.seed + 5:
            break
        seed += 1
    print(f"prompt {PROMPT!r}  T={TEMPERATURE} top-p={TOP_P} seed={seed}  tokens={N}  (service stop: {reason})")

    svc = LoadingService(service=model)
    svc.generate = timed_stream(model)  # instance attribute wins over LoadingService.__getattr__
    instrument(lab, "token_chips_html", CHIPS)
    instrument(lab_charts, "stage_figure", FIGS)
    instrument(lab_charts, "draw_figure", FIGS)
    instrument(lab, "status_markdown", "status_markdown")
    instrument(gr.HTML, "postprocess", "HTML.postprocess (chips to the wire)")
    instrument(gr.Plot, "postprocess", "Plot.postprocess (fig.to_json to the wire)")
    instrument(gr_utils, "diff", "gradio utils.diff of stream chunks")
    instrument(gr_blocks.Blocks, "postprocess_data", "Blocks.postprocess_data (all outputs)")
    demo = build_demo(svc)
    demo.queue(default_concurrency_limit=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True,
                            ssr_mode=False, **launch_options())
    service_rates, browser = [first_service], []
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                  args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = b.new_page(viewport={"width": 1400, "height": 1100})
            page.route("https://**/*", lambda route: route.abort())  # offline: theme web fonts fail fast
            cdp = page.context.new_cdp_session(page)
            cdp.send("Network.enable")
            cdp.send("Performance.enable")
            net = {"urls": {}, "bytes": defaultdict(int)}
            cdp.on("Network.requestWillBeSent", lambda e: net["urls"].__setitem__(e["requestId"], e["request"]["url"]))
            cdp.on("Network.dataReceived", lambda e: net["bytes"].__setitem__(e["requestId"], net["bytes"][e["requestId"]] + e["dataLength"]))
            page.goto(url, wait_until="domcontentloaded")
            page.locator("#model-status").filter(has_text="Model:").wait_for(timeout=120_000)
            page.locator("#prompt textarea").fill(PROMPT)
            set_number(page, "Temperature", TEMPERATURE)
            set_number(page, "Top-p", TOP_P)
            page.locator("#seed textarea").fill(str(seed))
            browser_run(page, cdp, net, 4)  # warm-up: plotly.js (4.6 MB) loads lazily on the first chart
            for _ in range(args.rounds):
                browser.append(browser_run(page, cdp, net, N))
                service_rates.append(service_run(model, settings, N)[0])
            os.makedirs(ROOT / "artifacts", exist_ok=True)
            shot = ROOT / "artifacts" / "bench_render.png"
            page.screenshot(path=str(shot), full_page=True, timeout=120_000)
            print(f"screenshot: {shot.relative_to(ROOT)}")
            b.close()
    finally:
        demo.close(verbose=False)
    report(N, service_rates, browser)


def report(N, service_rates, browser) -> None:
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    print(f"\nload average at end: {os.getloadavg()}")
    print("\nservice alone, tok/s: " + "  ".join(f"e2e {r['e2e']:.2f} (first{WINDOW} {r['first']:.2f}, last{WINDOW} {r['last']:.2f})" for r in service_rates))
    for i, run in enumerate(browser, 1):
        r, pair, prof = run["rates"], service_rates[i - 1:i + 1], run["prof"]
        n, wall = r["n"], r["n"] / r["e2e"]
        svc_e2e, svc_steady = mean([x["e2e"] for x in pair]), mean([x["steady"] for x in pair])
        print(f"\n=== browser run {i} (between service runs {i} and {i + 1}): {n} chips rendered in {wall:.0f} s;"
              f" status ends {run['status'].splitlines()[-1][-40:]!r}")
        print(f"(1) rendered {r['e2e']:.2f} tok/s (click -> last chip) vs service {svc_e2e:.2f} tok/s (call -> last token)"
              f"  ratio {r['e2e'] / svc_e2e:.0%}  [goal >= 80%]")
        print(f"    from the first token on: rendered {r['steady']:.2f} vs service {svc_steady:.2f}  ratio {r['steady'] / svc_steady:.0%}")
        if run["server"]:  # the same run's tokens as the app's model made them, beside the browser on the same cores
            print(f"(1b) rendered {r['steady']:.2f} tok/s vs the server's {run['server']['steady']:.2f} tok/s in this run"
                  f" (first token to last, each side's clock)  ratio {r['steady'] / run['server']['steady']:.0%}  [goal >= 90%]")
        svc_steadiness = mean([x["last"] / x["first"] for x in pair])
        print(f"(2) rendered first {WINDOW}: {r['first']:.2f} tok/s, last {WINDOW}: {r['last']:.2f} tok/s"
              f"  steadiness {r['last'] / r['first']:.0%}  [goal >= 90%]  (service alone: {svc_steadiness:.0%})")
        gen = run["stream_bytes"][0] if run["stream_bytes"] else 0
        print(f"(3) SSE bytes of the generate stream: {gen:,} B = {gen / n:,.0f} B/step"
              f"  (then the finish event's stream: {run['stream_bytes'][1:]} B)")
        for key in ("HTML.postprocess (chips to the wire)", "Plot.postprocess (fig.to_json to the wire)"):
            calls, _, wire = prof.get(key, [0, 0.0, 0])
            print(f"    {key:44s} {calls:4d} values ~{wire:>11,} B = {wire / n:>7,.0f} B/step ({wire / max(gen, 1):.0%})")
        cpu = run["browser_cpu"]
        print(f"    browser main thread: busy {cpu['TaskDuration']:.1f} s of {wall:.0f} s ({cpu['TaskDuration'] / wall:.0%});"
              f" {cpu['TaskDuration'] / n * 1000:.0f} ms/step: " + ", ".join(f"{k[:-8]} {v:.1f} s" for k, v in cpu.items() if k != "TaskDuration"))
        long, secs = run["long_tasks"], run["stream_s"]
        blocked = sum(d - 50 for d in long) / max(secs, 1e-9)  # ms past 50 in each task: how long a click waits
        print(f"(4) main-thread long tasks while streaming: {len(long)}, longest {max(long, default=0):.0f} ms"
              f" [goal <= 200 ms]; blocked {blocked:.0f} ms per second; most chips added in one update:"
              f" {run['most_chips']} [goal <= 2]")
        print(f"    updates that added more than 2 chips (s from the click, chips before, added): {run['bursts']}")
        print("    server, per step:")
        for key, (calls, secs, _) in sorted(prof.items(), key=lambda kv: -kv[1][1]):
            print(f"      {key:55s} {calls:5d} calls {secs:7.2f} s {secs / n * 1000:7.1f} ms/step")
        sec = lambda k: prof.get(k, [0, 0.0])[1] * 1000 / n  # noqa: E731
        between, model = sec(BETWEEN), sec(INSIDE)
        rest = between - sum(sec(k) for k in (FIGS, CHIPS, "status_markdown"))
        print(f"    => model {model:.0f} ms/step in the app vs {1000 / svc_steady:.0f} ms alone; outside the model {between:.0f} ms"
              f" = figures {sec(FIGS):.0f} + chips {sec(CHIPS):.0f} + gradio/event loop/SSE {rest:.0f}")


if __name__ == "__main__":
    main()
