"""Headless Debian Chromium driven by Playwright; screenshots are kept in artifacts/ for a human eye.

Every browser context a test opens records a Playwright trace; when the test fails, each page still open leaves
its screenshot and its trace (open it with `playwright show-trace`) in artifacts/failures/<test>/, beside the
error and the app's log tail (tests/reporting.py), and the run prints where. A passing test's trace is dropped."""

from __future__ import annotations

import shutil

import pytest

from ..conftest import ROOT
from ..reporting import failure_folder

ARTIFACTS = ROOT / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Playwright's default 5 s wait is for a quiet machine; CI's 2 cores also run the model, the server and Chromium,
# and a flake hunt keeps one of them busy (docs/testing.md). A wait's deadline only fails a hang: a real failure
# still fails, just later.
EXPECT_TIMEOUT_MS = 60_000
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)

    if not shutil.which("chromium"):
        pytest.fail("Debian chromium is not installed: run ./scripts/setup.sh --dev")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield TracedBrowser(b)
        b.close()


class TracedBrowser:
    """The browser, whose new contexts record a trace (DOM snapshots, no screencast: cheap enough for every test).
    Everything else is the browser's own."""

    open_contexts: list = []  # the contexts not yet closed, which a failing test's report reads

    def __init__(self, browser):
        self._browser = browser

    def __getattr__(self, name):
        return getattr(self._browser, name)

    def new_context(self, **options):
        context = self._browser.new_context(**options)
        context.tracing.start(snapshots=True, screenshots=False, sources=False)
        TracedBrowser.open_contexts.append(context)
        context.on("close", lambda c: TracedBrowser.open_contexts.remove(c) if c in TracedBrowser.open_contexts else None)
        return context


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test (in its setup or its body, while its pages are still open) leaves each open page's
    screenshot and each context's trace."""
    outcome = yield
    report = outcome.get_result()
    if not (report.failed and report.when in ("setup", "call") and TracedBrowser.open_contexts):
        return
    folder = failure_folder(item.nodeid)
    kept = []
    for i, context in enumerate(list(TracedBrowser.open_contexts)):
        for j, page in enumerate(context.pages):
            shot = folder / f"context{i}-page{j}.png"
            try:
                page.screenshot(path=str(shot), full_page=False, timeout=15_000)
                kept.append(shot)
            except Exception as e:  # a crashed page still leaves its trace
                kept.append(f"(no screenshot of context {i} page {j}: {type(e).__name__}: {e})")
        trace = folder / f"context{i}-trace.zip"
        try:
            context.tracing.stop(path=str(trace))
            kept.append(trace)
        except Exception as e:
            kept.append(f"(no trace of context {i}: {type(e).__name__}: {e})")
    report.sections.append(("browser artifacts", "\n".join(str(k) for k in kept)))


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
