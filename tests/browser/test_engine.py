"""The Engine tab in a real browser: run the example batch, watch every row finish; edit the table."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser
REDRAW = 30_000  # ms for a server redraw after a language switch: every tab redraws at once, on a loaded machine


def open_tab(page):
    page.get_by_role("tab", name="Engine").click()
    expect(page.locator("#engine-table")).to_be_visible()


def rows(page):
    """The table's row count, as its grid reports it (header excluded)."""
    return page.locator("#engine-table [role=grid]")


def test_the_example_batch_runs_side_by_side_to_the_end(page):
    open_tab(page)
    page.locator("#engine-run").click()
    status = page.locator("#engine-status")
    # mid-run (for the eye only: on a loaded machine the page may first see it at any step, or finished;
    # that all 6 rows shared steps 1-3 is checked below, from the run's own summary)
    expect(status).to_contain_text(re.compile(r"batch of \d of 6 rows|All rows finished"), timeout=60_000)
    page.locator("#engine-heatmap").screenshot(path=str(ARTIFACTS / "engine_running.png"))
    expect(status).to_contain_text("All rows finished", timeout=120_000)
    expect(status).to_contain_text("Batch size: 6 rows for steps 1–")
    texts = page.locator("#engine-texts")
    expect(texts.locator(".ntp-card")).to_have_count(6)
    expect(texts.locator(".ntp-card.ntp-done")).to_have_count(6)
    expect(texts).to_contain_text("Paris")
    expect(texts).to_contain_text("stop string")
    heat = page.locator("#engine-heatmap")
    expect(heat.locator("[data-testid=plotly]")).to_be_visible()
    for label in ("1 · greedy", "2 · T 0.8 · top-p 0.95", "rest", "finished at step"):
        expect(heat).to_contain_text(label)
    params = page.locator("#engine-params")
    for name in ("temperature", "top_k", "top_p", "min_p", "greedy", "next_tokens"):
        expect(params).to_contain_text(name)
    page.screenshot(path=str(ARTIFACTS / "engine.png"), full_page=True)


def test_rows_can_be_added_and_removed_and_a_ninth_is_refused(page):
    open_tab(page)
    expect(rows(page)).to_have_attribute("aria-rowcount", "7")  # header + 6 example rows
    # a click while the last add is still on its way is dropped (Gradio's trigger_mode "once"): each add lands first
    page.locator("#engine-add").click()
    expect(rows(page)).to_have_attribute("aria-rowcount", "8")
    page.locator("#engine-add").click()
    expect(rows(page)).to_have_attribute("aria-rowcount", "9")
    page.locator("#engine-add").click()
    expect(page.get_by_text("At most 8 rows")).to_be_visible(timeout=30_000)
    expect(rows(page)).to_have_attribute("aria-rowcount", "9")
    page.locator("#engine-remove").click()
    expect(rows(page)).to_have_attribute("aria-rowcount", "8")
    page.locator("#engine-reset").click()
    expect(rows(page)).to_have_attribute("aria-rowcount", "7")


def test_an_edited_bad_cell_is_named_by_row_and_field(page):
    open_tab(page)
    cell = page.locator("#engine-table [data-testid='cell-1-6']")  # row 2, seed
    cell.dblclick()
    editor = cell.locator("textarea, input").first
    editor.fill("lucky")
    editor.press("Enter")
    expect(cell).to_contain_text("lucky")
    page.locator("#engine-run").click()
    expect(page.get_by_text("row 2, seed must be a whole number")).to_be_visible(timeout=30_000)
    page.locator("#engine-reset").click()
    expect(page.locator("#engine-table [data-testid='cell-1-6']")).to_have_text("1")


def test_in_vietnamese_the_tab_runs_and_english_redraws_it_without_a_new_run(browser, app_url, embedded):
    context = browser.new_context(locale="vi-VN", viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.goto(app_url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text("Mô hình:", timeout=60_000)
    assert page.evaluate("document.documentElement.lang") == "vi"
    open_tab(page)
    expect(page.get_by_text("Bên trong một engine.")).to_be_visible()
    expect(page.locator("#engine-run")).to_have_text("Chạy batch")
    table = page.locator("#engine-table")
    for words in ("Các request (tối đa 8)", "thứ tự", "token tối đa", "dừng"):
        expect(table).to_contain_text(words, timeout=REDRAW)
    expect(page.locator("#engine-help")).to_contain_text("Mỗi hàng là một request, tối đa 8 hàng", timeout=REDRAW)
    expect(page.locator("#engine-status")).to_contain_text("Bấm Chạy batch", timeout=REDRAW)
    page.locator("#engine-run").click()
    status = page.locator("#engine-status")
    expect(status).to_contain_text("Mọi hàng đã xong", timeout=120_000)
    expect(status).to_contain_text("Kích thước batch: 6 hàng ở bước 1–")
    texts, heat, params = page.locator("#engine-texts"), page.locator("#engine-heatmap"), page.locator("#engine-params")
    for words in ("Hàng 1", "đã dừng", "gặp stop string", "Paris"):
        expect(texts).to_contain_text(words)
    for words in ("hạng theo logits thô", "còn lại", "p cuối", "xong ở bước", "1 · greedy"):
        expect(heat).to_contain_text(words)
    for words in ("hàng batch", "dạng văn bản", "0 = tắt"):
        expect(params).to_contain_text(words)
    page.screenshot(path=str(ARTIFACTS / "engine_vi.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(ARTIFACTS / "engine_vi_390.png"), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 1000})

    steps = re.search(r"Bước (\d+)", status.inner_text()).group(1)
    forward_passes = embedded.room().step
    page.locator("#language").get_by_text("English").click()
    expect(status).to_contain_text("All rows finished", timeout=REDRAW)
    expect(status).to_contain_text(f"Step {steps} ·")  # the same run, redrawn
    expect(page.locator("#engine-run")).to_have_text("Run the batch")
    for words in ("Requests (up to 8)", "order", "max tokens"):
        expect(table).to_contain_text(words)
    expect(page.locator("#engine-table [data-testid='cell-0-0']")).to_have_text("The capital of France is")
    expect(texts).to_contain_text("Row 1")
    expect(texts).to_contain_text("stop string")
    for words in ("rank under the raw logits", "rest", "p final", "finished at step"):
        expect(heat).to_contain_text(words)
    expect(params).to_contain_text("batch row")
    expect(page.locator("#engine-help")).to_contain_text("One row per request, at most 8")
    assert page.evaluate("document.documentElement.lang") == "en"
    assert embedded.room().step == forward_passes  # no forward pass: nothing ran again
    context.close()
