"""Headless Debian Chromium driven by Playwright; screenshots are kept in artifacts/ for a human eye."""

from __future__ import annotations

import shutil

import pytest

from ..conftest import ROOT

ARTIFACTS = ROOT / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Playwright's default 5 s wait is for a quiet machine; CI's 2 cores also run the model and the server, and a
# language switch or a scheduler step can take longer there. A real failure still fails, just later.
EXPECT_TIMEOUT_MS = 20_000
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)

    if not shutil.which("chromium"):
        pytest.fail("Debian chromium is not installed: run ./scripts/setup.sh --dev")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()


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
    deadline = time.monotonic() + 30
    last = None
    while time.monotonic() < deadline:
        text = box.inner_text()
        busy = page.locator(f"{selector} .progress-text").count() > 0 or timer.match(text)
        if not busy and text == last:
            return text
        last = None if busy else text
        page.wait_for_timeout(300)
    raise AssertionError(f"{selector} never settled; last read {box.inner_text()!r}")
