"""The Engine tab in a real browser: run the example batch, watch every row finish; edit the table."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser


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
    page.locator("#engine-add").click()
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
