"""'Look inside this step' in a real browser: each view after a run, following the scrubber, in both
languages and on a phone; screenshots in artifacts/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS, open_accordion

pytestmark = pytest.mark.browser


def run_and_open(page, steps: int = 6):
    page.locator("#seed textarea, #seed input").first.fill("1")
    page.locator("#top-p input[type=number]").fill("0.9")
    page.locator("#top-p input[type=number]").press("Enter")
    page.locator("#max-new input[type=number]").fill(str(steps))
    page.locator("#max-new input[type=number]").press("Enter")
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text(re.compile("stopped|dừng"), timeout=120_000)
    open_accordion(page, page.locator("#inspect > button").first, "#inspect-draw")


def test_sample_many_logits_and_cost_views_follow_the_scrubber(page):
    run_and_open(page)
    n = page.locator("#inspect-n input[type=number]")
    n.fill("10000")
    n.press("Enter")
    expect(n).to_have_value("10000")
    page.locator("#inspect-draw").click()
    text = page.locator("#inspect-many-text")
    expect(text).to_contain_text("10,000 draws", timeout=120_000)
    expect(text).to_contain_text("at step 6")
    expect(text).to_contain_text(re.compile(r"χ² = [0-9.]+ with \d+ degrees of freedom, p = "))
    plot = page.locator("#inspect-many-plot")
    expect(plot).to_contain_text("(all others)")
    expect(plot).to_contain_text("probability, final")
    page.locator("#inspect").screenshot(path=str(ARTIFACTS / "inspect_many.png"))

    page.get_by_role("tab", name="Logits as they are").click()
    expect(page.locator("#inspect-logits-text")).to_contain_text("Step 6:")
    logits = page.locator("#inspect-logits-plot")
    for title in ("raw logits", "log-probabilities", "tail zoom"):
        expect(logits).to_contain_text(title)
    page.locator("#inspect").screenshot(path=str(ARTIFACTS / "inspect_logits.png"))

    # the scrubber moves the views to another step; the draws of step 6 are not shown for it
    box = page.locator("#scrub input[type=number]")
    box.fill("3")
    box.press("Enter")
    expect(page.locator("#inspect-logits-text")).to_contain_text("Step 3:", timeout=60_000)
    page.get_by_role("tab", name="Cost of a step").click()
    cost = page.locator("#inspect-cost-text")
    expect(cost).to_contain_text("Step 3")
    expect(cost).to_contain_text("Run, 6 steps")
    expect(cost).to_contain_text(re.compile(r"LM head: [0-9.]+ [MG]B read per forward pass"))
    expect(page.locator("#inspect-cost-plot")).to_contain_text("record bytes (JSON)")
    page.locator("#inspect").screenshot(path=str(ARTIFACTS / "inspect_cost.png"))
    page.get_by_role("tab", name="Sample it many times").click()
    expect(page.locator("#inspect-many-text")).to_contain_text("Freeze this step")
    page.screenshot(path=str(ARTIFACTS / "inspect_page_1440.png"), full_page=True)

    # open, it follows the next run to its last step: the page draws a run's chart in place at its end (in_place.py)
    page.get_by_role("tab", name="Logits as they are").click()
    page.locator("#max-new input[type=number]").fill("4")
    page.locator("#max-new input[type=number]").press("Enter")
    page.locator("#generate").click()
    expect(page.locator("#inspect-logits-text")).to_contain_text("Step 4:", timeout=120_000)
    expect(page.locator("#run-plot")).to_contain_text("step")


def test_inspect_in_vietnamese_and_on_small_screens(page, app_url):
    page.goto(app_url + "?lang=vi", wait_until="domcontentloaded")
    expect(page.locator("#generate")).to_contain_text("Sinh", timeout=30_000)
    run_and_open(page, steps=3)
    expect(page.locator("#inspect")).to_contain_text("Nhìn vào bên trong bước này")
    page.locator("#inspect-draw").click()
    expect(page.locator("#inspect-many-text")).to_contain_text("lần rút", timeout=60_000)
    # the many-draws plot is a separate output: on a loaded machine it can land seconds after the text
    expect(page.locator("#inspect-many-plot")).to_contain_text("(tất cả token còn lại)", timeout=60_000)
    page.get_by_role("tab", name="Chi phí của một bước").click()
    expect(page.locator("#inspect-cost-text")).to_contain_text("Cả lượt, 3 bước")
    # English again: the server-built views redraw from the kept records, the draws included
    page.locator("#language").get_by_text("English").click()
    expect(page.locator("#inspect-cost-text")).to_contain_text("Run, 3 steps", timeout=60_000)
    page.get_by_role("tab", name="Sample it many times").click()
    expect(page.locator("#inspect-many-text")).to_contain_text("1,000 draws")
    page.set_viewport_size({"width": 1280, "height": 720})
    page.locator("#inspect").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "inspect_1280x720.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#inspect-many-plot").scroll_into_view_if_needed()
    expect(page.locator("#inspect-many-plot")).to_contain_text("(all others)")
    page.screenshot(path=str(ARTIFACTS / "inspect_390.png"), full_page=True)
