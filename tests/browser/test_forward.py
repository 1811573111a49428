"""The Forward pass tab in a real browser: trace the lesson prompt, see every panel, pick a block and
a head, hand the prompt to the Sampling lab."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def test_trace_the_lesson_prompt_and_sample_from_here(page):
    page.get_by_role("tab", name="Forward pass").click()  # may trace the default prompt on its own
    # Trace another prompt first: once its status shows, no earlier trace is still on its way to the
    # page (the events share one queue), so the lesson's status below is from the lesson's trace.
    page.locator("#fw-prompt textarea").fill("Hello world")
    page.locator("#fw-trace").click()
    expect(page.locator("#fw-status")).to_contain_text("Traced 2 tokens", timeout=60_000)
    page.locator("#fw-prompt textarea").fill("The capital of France is")
    page.locator("#fw-trace").click()
    expect(page.locator("#fw-status")).to_contain_text("Traced 5 tokens", timeout=60_000)
    expect(page.locator("#fw-tokens")).to_contain_text("4649")
    expect(page.locator("#fw-shapes")).to_contain_text("(1, 5, 49152)")
    expect(page.locator("#fw-residual")).to_contain_text("what block k added")
    expect(page.locator("#fw-attention")).to_contain_text("head 9")
    expect(page.locator("#fw-predictions")).to_contain_text("uses only this row")
    expect(page.locator("#fw-cost")).to_contain_text("this prompt")
    expect(page.locator("#fw-lens")).to_contain_text("Paris")

    # another block: typed into the slider's box (blur sends it); the service recomputes that block only
    box = page.locator("#fw-block input[type=number]")
    box.fill("1")
    box.press("Tab")
    expect(page.locator("#fw-attention-text")).to_contain_text("Block 1 of 30", timeout=60_000)
    page.locator("#fw-head input").click()
    page.get_by_role("option", name="head 3", exact=True).click()
    expect(page.locator("#fw-attention")).to_contain_text("head 3")
    expect(page.locator("#fw-attention")).not_to_contain_text("head 4")
    page.locator("#fw-head input").click()
    page.get_by_role("option", name="all heads").click()
    expect(page.locator("#fw-attention")).to_contain_text("head 9")
    page.wait_for_timeout(500)  # let plotly settle before the picture
    page.screenshot(path=str(ARTIFACTS / "forward_pass.png"), full_page=True)

    page.locator("#fw-prompt textarea").fill("Once upon a time")
    page.locator("#fw-sample").click()
    expect(page.locator("#prompt textarea")).to_have_value("Once upon a time", timeout=10_000)
    expect(page.locator("#generate")).to_be_visible()  # the lab's tab is the one showing
