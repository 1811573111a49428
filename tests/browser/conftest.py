"""Headless Debian Chromium driven by Playwright; screenshots are kept in artifacts/ for a human eye.

Every browser context a test opens records a Playwright trace; when the test fails, each page still open leaves
its screenshot and its trace (open it with `playwright show-trace`) in artifacts/failures/<test>/, beside the
error and the app's log tail (tests/reporting.py), and the run prints where. A passing test's trace is dropped."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from ..conftest import ROOT
from ..reporting import discard, failure_folder

ARTIFACTS = ROOT / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Playwright's default 5 s wait is for a quiet machine; CI's 2 cores also run the model, the server and Chromium,
# and a flake hunt keeps one of them busy (docs/testing.md). A wait's deadline only fails a hang: a real failure
# still fails, just later.
EXPECT_TIMEOUT_MS = 60_000
# What each context's trace records. "actions" (the default): every action and wait, with its timing and its log;
# no DOM snapshots. "full" adds a DOM snapshot per action, to replay a flake step by step: on this page's DOM that
# costs ~18 % of a browser test's time (the scenes test: 165 s -> 135 s without them), so only on request.
# "0" records none. A failure leaves each open page's screenshot whichever is chosen.
TRACE = os.environ.get("NTP_TEST_TRACE", "actions")
if TRACE not in ("actions", "full", "0"):
    raise ValueError(f"NTP_TEST_TRACE must be actions, full or 0, not {TRACE!r}")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import BrowserContext, expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)

    if not shutil.which("chromium"):
        pytest.fail("Debian chromium is not installed: run ./scripts/setup.sh --dev")
    close = BrowserContext.close
    BrowserContext.close = _closing_keeps_a_failure(close)
    try:
        with sync_playwright() as p:
            traced = TracedBrowser(lambda: p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS))
            yield traced
            traced.close()
    finally:
        BrowserContext.close = close


class TracedBrowser:
    """The browser, whose new contexts record a trace (NTP_TEST_TRACE: actions and their logs by default).
    If Chromium dies, the test it died under fails saying so, and the next test's context starts a new one
    (rather than every later test failing on a dead browser). Everything else is the browser's own."""

    open_contexts: list = []  # the contexts not yet closed, which a failing test's report reads
    died = False  # Chromium went away during the current test

    def __init__(self, launch):
        self._launch = launch
        self._browser = launch()
        self._browser.on("disconnected", lambda _: setattr(TracedBrowser, "died", True))

    def __getattr__(self, name):
        return getattr(self._browser, name)

    def close(self):
        if self._browser.is_connected():
            self._browser.close()

    def new_context(self, **options):
        if not self._browser.is_connected():
            TracedBrowser.open_contexts.clear()
            self._browser = self._launch()
            self._browser.on("disconnected", lambda _: setattr(TracedBrowser, "died", True))
        context = self._browser.new_context(**options)
        if TRACE != "0":
            context.tracing.start(snapshots=TRACE == "full", screenshots=False, sources=False)
        TracedBrowser.open_contexts.append(context)
        return context


_kept: dict[str, list] = {}  # test -> the artifacts kept for it while it ran (the report says whether it failed)


def _keep(context, nodeid: str) -> None:
    """A context's pages as screenshots and its trace, into the test's failure folder."""
    if context not in TracedBrowser.open_contexts:
        return
    TracedBrowser.open_contexts.remove(context)
    folder, kept = failure_folder(nodeid), _kept.setdefault(nodeid, [])
    n = sum(1 for k in kept if str(k).endswith("trace.zip"))
    for j, page in enumerate(context.pages):
        shot = folder / f"context{n}-page{j}.png"
        try:
            page.screenshot(path=str(shot), full_page=False, timeout=15_000)
            kept.append(shot)
        except Exception as e:  # a crashed page still leaves its trace
            kept.append(f"(no screenshot of context {n} page {j}: {type(e).__name__}: {e})")
    if TRACE == "0":
        return
    try:
        context.tracing.stop(path=str(folder / f"context{n}-trace.zip"))
        kept.append(folder / f"context{n}-trace.zip")
    except Exception as e:
        kept.append(f"(no trace of context {n}: {type(e).__name__}: {e})")


def _closing_keeps_a_failure(close):
    """BrowserContext.close, which first keeps the context's pages and trace when it runs while an exception is on
    its way out of a test (a `finally: context.close()` in the test): after the close they would be gone."""

    def closing(self, *args, **kwargs):
        nodeid = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        if nodeid and sys.exc_info()[0] is not None:
            _keep(self, nodeid)
        if self in TracedBrowser.open_contexts:
            TracedBrowser.open_contexts.remove(self)
        return close(self, *args, **kwargs)

    return closing


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test (in its setup or its body) leaves each open page's screenshot and each context's
    trace, with those its own `finally` closed while failing; a test that passed after all keeps none."""
    outcome = yield
    report = outcome.get_result()
    if report.when not in ("setup", "call"):
        return
    if TracedBrowser.died and report.failed:
        report.sections.append(("Chromium", "Chromium died during this test (a crash, or killed for memory); the "
                                            "next test starts a new one"))
    TracedBrowser.died = False
    if report.failed:
        for context in list(TracedBrowser.open_contexts):
            _keep(context, item.nodeid)
    kept = _kept.pop(item.nodeid, [])
    if report.failed and kept:
        report.sections.append(("browser artifacts", "\n".join(str(k) for k in kept)))
    elif kept:  # an exception was caught inside the test, which then passed
        discard(item.nodeid)


@pytest.fixture()
def page(browser, app_url):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.goto(app_url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
    ARTIFACTS.mkdir(exist_ok=True)
    yield page
    context.close()


def settled_text(page, selector: str) -> str:
    """A component's text once no event is pending on it: while one is, Gradio's status tracker writes its
    timer ("0.4s") into the same box, and a scrub or a language switch can still be under way after a run.
    An event can also start just after one check passes (a loaded CI machine caught "0.1s\n\nStep 5 of 6"
    that way), so the text must read the same, timer-free, twice 300 ms apart."""
    import re
    import time

    timer = re.compile(r"^\s*\d+(\.\d+)?s\s")
    box = page.locator(selector)
    deadline = time.monotonic() + 180  # only a hang reaches it
    last = None
    while time.monotonic() < deadline:
        text = box.inner_text()
        busy = page.locator(f"{selector} .progress-text").count() > 0 or timer.match(text)
        if not busy and text == last:
            return text
        last = None if busy else text
        page.wait_for_timeout(300)
    raise AssertionError(f"{selector} never settled; last read {box.inner_text()!r}")


# Three animation frames, then the next task: the page's own work queued before this call has run by then.
FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done)))))"


def mounted(page, selector: str) -> None:
    """Wait until the control at `selector`, just shown, is ready for input. Gradio mounts a component hidden until
    now (a closed accordion's children, a box an event makes visible) when it first shows, and a few frames later sets
    the state it holds for it (render_previously_invisible_children): a value typed or written in between never
    reaches the next event (a CI run sent the no-repeat n-gram size as 0 that way, and the chain board's first move
    was undone, each about one try in a hundred under load). No person acts within three frames; a test must wait."""
    from playwright.sync_api import expect

    expect(page.locator(selector).first).to_be_visible()
    page.evaluate(FRAMES)


def open_accordion(page, header, content: str) -> None:
    """Open a closed accordion by a click on its header (a locator); wait until `content` (a selector of a control
    inside it) is ready for input."""
    header.click()
    mounted(page, content)
