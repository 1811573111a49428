"""The busy-room lesson in a real browser: its scene runs the lab and opens the panel, which measures the last
step; the panel follows the scrubber; Vietnamese; a phone; screenshots in artifacts/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def opened(browser, link: str, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(link, wait_until="domcontentloaded")
    ARTIFACTS.mkdir(exist_ok=True)
    return context, page


def test_the_scene_measures_the_last_step_alone_and_in_a_busy_room_and_follows_the_scrubber(browser, app_url):
    context, page = opened(browser, f"{app_url}?scene=l13-busy-room", 1440, 1000)
    try:
        text = page.locator("#batch-effect-text")
        expect(text).to_contain_text("Step 6", timeout=180_000)
        expect(text).to_contain_text("bit-identical")
        expect(text).to_contain_text("0 / 49,152")
        plot = page.locator("#batch-effect-plot")
        for words in ("cumulative bar", "in the room − alone", "default arithmetic", "batch-invariant mode", "u = "):
            expect(plot).to_contain_text(words)
        page.wait_for_timeout(500)
        page.locator("#batch-effect").screenshot(path=str(ARTIFACTS / "batch_effect_1440.png"))
        box = page.locator("#scrub input[type=number]")
        box.fill("2")
        box.press("Enter")
        expect(text).to_contain_text("Step 2", timeout=120_000)
    finally:
        context.close()


def test_vietnamese_on_a_phone_fits_the_screen(browser, app_url):
    context, page = opened(browser, f"{app_url}?scene=l13-busy-room&lang=vi", 390, 844)
    try:
        text = page.locator("#batch-effect-text")
        expect(text).to_contain_text("Bước 6", timeout=180_000)
        expect(text).to_contain_text("giống hệt từng bit")
        expect(page.locator("#batch-effect-plot")).to_contain_text("thanh tích luỹ, một mình")
        page.wait_for_timeout(500)
        wide = page.evaluate("() => document.documentElement.scrollWidth")
        assert wide <= 390, f"the page is {wide} px wide on a 390 px phone"
        page.locator("#batch-effect").screenshot(path=str(ARTIFACTS / "batch_effect_390_vi.png"))
    finally:
        context.close()
