"""Benchmark of the workshop walk: every scene opened with → (PageDown) from the first, to its fact on screen.

Runs app.py twice on free ports: with the lab scenes' runs computed at start (the default, playground/lab/replays.py)
and with --scene-runs false (each lab scene runs the model when it opens), and drives each with Playwright + Debian
chromium at 1280x720. For every scene it prints the time from the key press to the scene's fact on screen:

  - a lab scene that runs: its run's status line "stopped" under the new caption (its charts drawn);
  - the forward tab: its trace's status ("Traced"); Compare and Engine: their status "done";
  - the softmax tab: the caption and the tab (the toy is drawn in the page).

Goal (issue 36): p95 <= 1.5 s with the kept runs. The ratio kept / live of the lab scenes' median is measured in one
run of this script.

    .venv/bin/python bench/bench_scenes.py   # ~4 min on 2 cores
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from playground.workshop.scenes import load, scene_paths  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
# the fact each tab's scene shows once it is on screen (a selector and the text it holds)
FACT = {"lab": ("#run-status", "stopped"), "forward": ("#fw-status", "Traced"), "compare": ("#compare-status", "done"),
        "engine": ("#engine-status", "All rows finished")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(port: int, scene_runs: bool) -> subprocess.Popen:
    app = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--port", str(port), "--scene-runs",
                            "true" if scene_runs else "false"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 600
    for line in app.stdout:  # the app says when its scene runs are kept; without them, when the model is ready
        if ("scenes ready" in line) if scene_runs else ("model ready" in line):
            break
        if time.monotonic() > deadline:
            app.kill()
            raise SystemExit("the app did not get ready")
    return app


# wait until the caption names `title` and (when given) `selector` holds `text` in a status written after the press
SHOWN = """([title, selector, text, before]) => {
  const caption = document.querySelector('#scene-caption')?.innerText || '';
  if (!caption.includes(title)) return false;
  if (!selector) return true;
  const now = document.querySelector(selector)?.innerText || '';
  return now.includes(text) && (before === null || now !== before) && !/^\\s*\\d+(\\.\\d+)?s\\s/.test(now);
}"""


def walk(browser, url: str, scenes) -> list[tuple[str, str, float]]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_function("() => /Model:/.test(document.querySelector('#model-status')?.textContent || '')",
                           timeout=300_000)
    page.wait_for_selector("#generate:not([disabled])", timeout=120_000)
    out = []
    for scene in scenes:
        runs = scene.run == "generate" if scene.tab == "lab" else bool(scene.run)  # (the greedy loop has its box)
        selector, text = FACT.get(scene.tab, (None, None)) if runs else (None, None)
        # a lab scene's run writes a new status; a forward scene after another on the same prompt keeps its trace
        before = page.locator(selector).first.inner_text() if scene.tab == "lab" and selector else None
        started = time.perf_counter()
        page.locator("body").press("PageDown")
        page.wait_for_function(SHOWN, arg=[scene.text("title", "en"), selector, text, before], timeout=180_000,
                               polling="raf")
        out.append((scene.id, scene.tab, time.perf_counter() - started))
        print(f"  {scene.id}: {out[-1][2]:.2f} s", file=sys.stderr, flush=True)
        page.wait_for_timeout(300)  # the host reads the caption
    context.close()
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    scenes = load(scene_paths()).scenes
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for kept in (True, False):
            app = start_app(port := free_port(), kept)
            try:
                results[kept] = walk(browser, f"http://127.0.0.1:{port}/", scenes)
            finally:
                app.kill()
                app.wait()
        browser.close()
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(f"{'scene':28} {'tab':8} {'kept runs':>10} {'live':>8}")
    for (scene_id, tab, kept_s), (_, _, live_s) in zip(results[True], results[False]):
        print(f"{scene_id:28} {tab:8} {kept_s:9.2f}s {live_s:7.2f}s")
    for kept in (True, False):
        every = [s for _, _, s in results[kept]]
        lab = [s for _, tab, s in results[kept] if tab == "lab"]
        print(f"{'kept runs' if kept else 'live':10} every scene: median {statistics.median(every):.2f} s, "
              f"p95 {p95(every):.2f} s, max {max(every):.2f} s · lab scenes: median {statistics.median(lab):.2f} s")
    lab_kept = statistics.median([s for _, tab, s in results[True] if tab == "lab"])
    lab_live = statistics.median([s for _, tab, s in results[False] if tab == "lab"])
    print(f"lab scenes, median kept / live: {lab_kept / lab_live:.2f}x (goal: every scene p95 <= 1.5 s kept)")


if __name__ == "__main__":
    main()
