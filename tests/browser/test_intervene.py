"""The Forward pass tab's interventions in a real browser, on a projector (1280x720) and a phone (390x844): the
prompt on screen's attribution appears with its trace; knocking out block 30's MLP takes " Paris" off the top, the
lab's stages drawn on the new logits; Restore brings the model back; Vietnamese labels."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS, mounted, open_accordion

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width, height", [(1280, 720), (390, 844)])
def test_who_pushed_paris_up_and_what_knocking_out_the_last_mlp_does(browser, app_url, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.goto(app_url + "?tab=forward", wait_until="domcontentloaded")
        mounted(page, "#fw-prompt textarea")
        text = page.locator("#iv-attribution-text")
        expect(text).to_contain_text("logit(␣Paris) − logit(␣the)", timeout=90_000)
        expect(text).to_contain_text("The bars add up to it")
        expect(page.locator("#iv-attribution")).to_contain_text("head by head")
        page.locator("#iv-block input[type=number]").fill("30")
        page.locator("#iv-block input[type=number]").press("Tab")
        page.locator("#iv-knock").click()
        knocked = page.locator("#iv-knockout-text")
        expect(knocked).to_contain_text("Knocked out: block 30's MLP", timeout=60_000)
        expect(knocked).to_contain_text("The most probable token is now")  # " Paris" is no longer on top
        expect(page.locator("#iv-knockout")).to_contain_text("after")
        expect(page.locator("#iv-stages")).to_contain_text("final")
        page.locator("#iv-knockout").scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / f"intervene_{width}.png"))
        box = page.locator("#iv-knockout .js-plotly-plot").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1  # no chart off the screen
        page.locator("#iv-restore").click()
        expect(knocked).to_contain_text("Restored: the model as it is")
        expect(page.locator("#iv-knockout")).to_contain_text("Pick a part")
        # the patching grid, blank with the trace: a click on a cell patches that one (position 3, " France", after
        # block 10), outlined on the grid
        click_cell(page, 3, 10)
        patched = page.locator("#iv-patch-text")
        expect(patched).to_contain_text("Position 3 (␣France) after block 10:", timeout=60_000)
        expect(patched).to_contain_text("p(␣Rome) <0.001 → 0.3")
        # " Italy" carries " Rome" until the last position takes it over
        page.locator("#iv-patch").click()
        expect(patched).not_to_contain_text("Position 3 (␣France) after block 10:", timeout=60_000)
        expect(patched).to_contain_text("Copied from “The capital of Italy is”")
        expect(patched).to_contain_text("position 3 (␣France)")
        expect(patched).to_contain_text("position 4 (␣is)")
        expect(page.locator("#iv-patch-grid")).to_contain_text("3 ␣France")
        page.locator("#iv-patch-grid").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"intervene_patch_{width}.png"))
        grid = page.locator("#iv-patch-grid .js-plotly-plot").bounding_box()
        assert grid is not None and grid["x"] >= 0 and grid["x"] + grid["width"] <= width + 1
        page.locator("#iv-steer").click()  # both runs, the lab's settings, one seed
        steered = page.locator("#iv-steer-text")
        expect(steered).to_contain_text("Added after block 10: 1 × (towards − away)", timeout=90_000)
        expect(steered.locator("table")).to_contain_text("steered")
        expect(steered.locator("table")).to_contain_text("without")
        steered.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"intervene_steer_{width}.png"))
    finally:
        context.close()


def test_the_sections_results_save_to_a_file_that_a_fresh_page_draws_with_no_model_work(browser, app_url, tmp_path):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    try:
        page = context.new_page()
        page.goto(app_url + "?tab=forward", wait_until="domcontentloaded")
        expect(page.locator("#iv-attribution-text")).to_contain_text("logit(", timeout=90_000)
        page.locator("#iv-knock").click()
        expect(page.locator("#iv-knockout-text")).to_contain_text("Knocked out: block 30's MLP", timeout=60_000)
        click_cell(page, 3, 10)
        expect(page.locator("#iv-patch-text")).to_contain_text("Position 3 (␣France) after block 10:", timeout=60_000)
        open_accordion(page, page.locator("#iv-files").get_by_text("Intervention files"), "#iv-export")
        page.locator("#iv-export").click()
        link = page.locator("#iv-json a").first
        expect(link).to_be_visible(timeout=30_000)
        with page.expect_download() as download:
            link.click()
        saved = tmp_path / "interventions.json"
        download.value.save_as(saved)
        fresh = context.new_page()  # a new session: nothing traced, nothing knocked out
        fresh.goto(app_url + "?tab=forward", wait_until="domcontentloaded")
        expect(fresh.locator("#iv-attribution-text")).to_contain_text("logit(", timeout=90_000)
        open_accordion(fresh, fresh.locator("#iv-files").get_by_text("Intervention files"), "#iv-import")
        fresh.locator("#iv-import input[type=file]").set_input_files(str(saved))
        expect(fresh.locator("#iv-knockout-text")).to_contain_text("Knocked out: block 30's MLP", timeout=60_000)
        expect(fresh.locator("#iv-knockout-text")).to_contain_text("Loaded from a file made on")
        expect(fresh.locator("#iv-patch-grid")).to_contain_text("3 ␣France")
    finally:
        context.close()


def click_cell(page, position: int, block: int, positions: int = 5, blocks: int = 30) -> None:
    """A click in the middle of a cell of the patching grid (rows: positions from the top; columns: blocks from 1)."""
    area = page.locator("#iv-patch-grid .nsewdrag").first
    area.scroll_into_view_if_needed()
    box = area.bounding_box()
    x = box["x"] + (block - 0.5) / blocks * box["width"]
    y = box["y"] + (position + 0.5) / positions * box["height"]
    page.mouse.move(x, y)
    page.mouse.click(x, y)


def test_a_head_out_of_range_is_named_and_the_page_switches_language(page):
    page.get_by_role("tab", name="Forward pass").click()
    expect(page.locator("#iv-attribution-text")).to_contain_text("logit(", timeout=90_000)
    page.locator("#iv-kind").get_by_text("one attention head").click()
    page.locator("#iv-head input").fill("12")
    page.locator("#iv-knock").click()
    expect(page.get_by_text("head must be a whole number between 1 and 9", exact=False).first).to_be_visible(
        timeout=60_000)
    page.locator("#language").get_by_text("Tiếng Việt").click()
    expect(page.locator("#iv-attribution-text")).to_contain_text("Các cột cộng lại", timeout=60_000)
    expect(page.locator("#iv-kind")).to_contain_text("một head attention")


def test_the_intervention_scenes_knock_out_and_patch_on_their_own(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    try:
        page = context.new_page()
        page.goto(app_url + "?scene=fp-knock-out", wait_until="domcontentloaded")
        expect(page.locator("#scene-caption")).to_contain_text("Knock out one block's MLP", timeout=60_000)
        expect(page.locator("#iv-knockout-text")).to_contain_text("Knocked out: block 12's MLP", timeout=90_000)
        page.goto(app_url + "?scene=fp-patch", wait_until="domcontentloaded")
        expect(page.locator("#iv-patch-text")).to_contain_text("Copied from “The capital of Italy is”", timeout=90_000)
        page.goto(app_url + "?scene=fp-steer", wait_until="domcontentloaded")
        expect(page.locator("#iv-steer-text")).to_contain_text("Added after block 10: 1.5 × (towards − away)",
                                                               timeout=90_000)
    finally:
        context.close()
