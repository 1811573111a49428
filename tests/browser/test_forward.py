"""The Forward pass tab in a real browser: trace the lesson prompt, see every panel, pick a block and
a head, hand the prompt to the Sampling lab; in Vietnamese, and back to English without a new trace."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS, mounted

pytestmark = pytest.mark.browser


def test_trace_the_lesson_prompt_and_sample_from_here(page):
    page.get_by_role("tab", name="Forward pass").click()  # may trace the default prompt on its own
    mounted(page, "#fw-prompt textarea")
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
    page.get_by_role("option", name="head 3", exact=True).click()  # each pick a server redraw: 30 s on a loaded machine
    expect(page.locator("#fw-attention")).not_to_contain_text("head 4", timeout=30_000)
    expect(page.locator("#fw-attention")).to_contain_text("head 3")
    page.locator("#fw-head input").click()
    page.get_by_role("option", name="all heads").click()
    expect(page.locator("#fw-attention")).to_contain_text("head 9", timeout=30_000)
    page.wait_for_timeout(500)  # let plotly settle before the picture
    page.screenshot(path=str(ARTIFACTS / "forward_pass.png"), full_page=True)

    page.locator("#fw-prompt textarea").fill("Once upon a time")
    page.locator("#fw-sample").click()
    expect(page.locator("#prompt textarea")).to_have_value("Once upon a time", timeout=60_000)
    expect(page.locator("#generate")).to_be_visible()  # the lab's tab is the one showing


@pytest.fixture()
def vi_page(browser, app_url):
    """A Vietnamese browser: the page picks Vietnamese from the browser's language."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, locale="vi-VN")
    page = context.new_page()
    page.goto(app_url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text("Mô hình:", timeout=60_000)
    ARTIFACTS.mkdir(exist_ok=True)
    yield page
    context.close()


# what the tab says in English, which a Vietnamese page must not show (its own text, not the prompt's)
ENGLISH = ["Traced", "Press", "Input: tokenizer", "after each block", "what block k added", "all heads", "weight",
           "uses only this row", "actually next", "this prompt", "memory for the logits", "the final answer",
           "layer by layer", "Sample from here", "The final answer"]


def test_a_vietnamese_browser_gets_the_tab_in_vietnamese_and_english_redraws_without_a_new_trace(vi_page, embedded, monkeypatch):
    page = vi_page
    traces = []
    real_trace = embedded._trace  # every client's trace() ends here (model_service/client.py)
    monkeypatch.setattr(embedded, "_trace", lambda *a: traces.append(a) or real_trace(*a))
    assert page.evaluate("document.documentElement.lang") == "vi"

    page.get_by_role("tab", name="Forward pass").click()  # traces the lesson prompt on its own
    # the lesson prompt in Vietnamese (every tab redraws on the switch: a loaded machine takes a while)
    expect(page.locator("#fw-prompt textarea")).to_have_value("Thủ đô của Pháp là", timeout=30_000)
    expect(page.locator("#fw-status")).to_contain_text(re.compile(r"Đã lần theo \d+ token qua 30 block"), timeout=60_000)
    expect(page.locator("#fw-trace")).to_have_text("Lần theo forward pass")
    expect(page.locator("#fw-input")).to_contain_text("Đầu vào: tokenizer, rồi embedding.")
    expect(page.locator("#fw-shapes")).to_contain_text("đầu ra embedding")
    expect(page.locator("#fw-residual")).to_contain_text("‖stream‖ sau mỗi block")  # chart titles
    expect(page.locator("#fw-attention")).to_contain_text("trọng số")
    expect(page.locator("#fw-predictions")).to_contain_text("chỉ dùng hàng này")
    expect(page.locator("#fw-teacher")).to_contain_text("p(kế tiếp thật)")
    expect(page.locator("#fw-cost")).to_contain_text("bộ nhớ cho logits")
    expect(page.locator("#fw-lens")).to_contain_text("đáp án cuối cùng")
    expect(page.locator("#fw-block")).to_contain_text("Chọn block")
    expect(page.locator("#fw-head input")).to_have_value("mọi head")
    box = page.locator("#fw-block input[type=number]")  # another block: its text in Vietnamese too
    box.fill("1")
    box.press("Tab")
    expect(page.locator("#fw-attention-text")).to_contain_text("Block 1 trong số 30", timeout=60_000)
    panel = page.locator("#fw-status").locator("xpath=ancestor::div[@role='tabpanel']")
    shown = panel.evaluate("e => e.textContent")
    assert not [w for w in ENGLISH if w in shown], [w for w in ENGLISH if w in shown]
    page.wait_for_timeout(500)  # let plotly settle before the picture
    page.screenshot(path=str(ARTIFACTS / "forward_pass_vi.png"), full_page=True)
    done = len(traces)
    assert done >= 1
    status_vi = page.locator("#fw-status").inner_text()

    page.locator("#language").get_by_text("English").click()  # the header's picker
    expect(page.locator("#fw-status")).to_contain_text(re.compile(r"Traced \d+ tokens through 30 blocks"), timeout=30_000)
    expect(page.locator("#fw-input")).to_contain_text("Input: tokenizer, then embedding.")
    expect(page.locator("#fw-residual")).to_contain_text("what block k added")
    # which block: the tab's own choice (the middle one once the room's model is known), not this test's
    expect(page.locator("#fw-attention-text")).to_contain_text(re.compile(r"Block \d+ of 30"))
    expect(page.locator("#fw-predictions")).to_contain_text("uses only this row")
    expect(page.locator("#fw-lens")).to_contain_text("the final answer")
    expect(page.locator("#fw-trace")).to_have_text("Trace the forward pass")
    assert page.evaluate("document.documentElement.lang") == "en"
    expect(page.locator("#fw-prompt textarea")).to_have_value("The capital of France is", timeout=30_000)
    # the frontend's own switch of language must not undo the redraw afterwards (a T() value would come back)
    page.wait_for_timeout(1500)
    assert re.search(r"Block \d+ of 30", page.locator("#fw-attention-text").inner_text())
    assert "Traced" in page.locator("#fw-status").inner_text()
    status_en = page.locator("#fw-status").inner_text()
    numbers = re.compile(r"\d+ (?:ms|token)")
    assert numbers.findall(status_en) == numbers.findall(status_vi)  # the same trace, redrawn
    assert len(traces) == done  # no new trace

    page.locator("#language").get_by_text("Tiếng Việt").click()
    expect(page.locator("#fw-status")).to_contain_text("Đã lần theo", timeout=30_000)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(800)
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    page.screenshot(path=str(ARTIFACTS / "forward_pass_vi_390.png"), full_page=True)
    assert len(traces) == done
