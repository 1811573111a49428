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
    timer ("0.4s") into the same box, and a scrub or a language switch can still be under way after a run."""
    import re

    from playwright.sync_api import expect

    expect(page.locator(f"{selector} .progress-text")).to_have_count(0)
    # the timer can sit in another element of the tracker (a loaded CI machine caught "0.4s\n\nStep 5 of 6")
    expect(page.locator(selector)).not_to_have_text(re.compile(r"^\s*\d+(\.\d+)?s\s"), timeout=30_000)
    return page.locator(selector).inner_text()
