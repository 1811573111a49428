"""Compare and Branch in a real browser, with screenshots at 1440 and 390 wide (artifacts/)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from model_service import SamplingSettings
from playground.common.address import absolute
from playground.workshop.links import make_query

from .conftest import ARTIFACTS
from .test_safe_sharing import PAYLOADS, rendered_payloads

pytestmark = pytest.mark.browser
LESSON = "The capital of France is"


def test_compare_runs_the_example_and_marks_where_the_columns_part(page):
    page.get_by_role("tab", name="Compare").click()
    page.locator("#compare-run").click()
    status = page.locator("#compare-status")
    expect(status).to_contain_text("done", timeout=120_000)
    expect(status).to_contain_text(re.compile(r"the columns part at step \d+"))
    texts = page.locator("#compare-texts")
    expect(texts.locator(".ntp-col")).to_have_count(2)
    expect(texts.locator(".ntp-ctok.ntp-div")).to_have_count(2)  # one per column, at the same step
    step = int(re.search(r"step (\d+)", status.inner_text()).group(1))
    expect(page.locator("#compare-step-table")).to_contain_text(f"Step {step}")
    us = page.locator("#compare-step-table td").all_inner_texts()
    assert len([u for u in us if re.fullmatch(r"0\.\d{4}", u)]) == 2 and len(set(u for u in us if u.startswith("0."))) <= 3
    overlay = page.locator("#compare-overlay")
    expect(overlay.locator("[data-testid=plotly]")).to_be_visible()
    expect(overlay).to_contain_text("u =")
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 900})
    expect(texts.locator(".ntp-col").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "compare_390.png"), full_page=True)


def test_force_a_candidate_in_the_lab_then_go_back_to_the_original(browser, app_url):
    context = browser.new_context(viewport={"width": 1440, "height": 1100})
    page = context.new_page()
    page.goto(f"{app_url}?seed=5&temperature=0.8&max_new_tokens=8", wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
    expect(page.locator("#seed textarea, #seed input").first).to_have_value("5")  # the link's settings are in
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    dropdown = page.locator("#branch-candidate")
    dropdown.locator("input").click()
    options = page.get_by_role("option")
    expect(options.first).to_be_visible()
    options.nth(1).click()  # the second most probable token at the last step
    page.locator("#branch-force").click()
    expect(page.locator("#branch-note")).to_contain_text("You forced", timeout=120_000)
    expect(page.locator("#branch-note")).to_contain_text("rank 2,")
    expect(page.locator("#branch-path textarea, #branch-path input").first).to_have_value(re.compile(r"^\d+:\d+$"))
    radios = page.locator("#branch-list label")
    expect(radios).to_have_count(2)
    expect(radios.nth(1)).to_contain_text("Branch 1")
    page.locator("#branch-link-button").click()
    expect(page.locator("#branch-link textarea, #branch-link input").first).to_have_value(re.compile(r"branch=\d+%3A\d+"))
    page.screenshot(path=str(ARTIFACTS / "lab_branch.png"), full_page=True)
    radios.nth(0).click()
    expect(page.locator("#branch-path textarea, #branch-path input").first).to_have_value("")
    context.close()


def test_a_branch_link_replays_the_branch(browser, app_url, embedded):
    run = list(embedded.generate(LESSON, SamplingSettings(temperature=0.8, seed=5), 8))
    token = next(c.id for i, c in enumerate(run[2].candidates) if i >= 2 and c.id not in embedded.eos_token_ids)
    context = browser.new_context(viewport={"width": 390, "height": 900})
    page = context.new_page()
    page.goto(f"{app_url}?seed=5&temperature=0.8&max_new_tokens=8&branch=3:{token}", wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
    expect(page.locator("#branch-note")).to_contain_text("You forced", timeout=120_000)
    expect(page.locator("#branch-note")).to_contain_text("step 3")
    expect(page.locator("#branch-path textarea, #branch-path input").first).to_have_value(f"3:{token}")
    expect(page.locator('#chips [data-step="2"]')).to_have_attribute("title", re.compile(rf"^id {token} "))
    page.screenshot(path=str(ARTIFACTS / "lab_branch_link_390.png"), full_page=True)
    context.close()


def test_a_fresh_page_opened_from_an_absolute_compare_link_shows_the_tab_and_its_inputs(browser, app_url):
    values = {"tab": "compare", "compare_prompt": "Once upon a time", "compare_seed": "42", "compare_max_new": 8,
              "compare_table": [[0.5, 0, 1, 0, "hf"], [1.5, 0, 0.9, 0, "vllm"], [0, 0, 1, 0, "llama.cpp"]]}
    link = absolute(app_url.rstrip("/"), make_query(values))
    assert link.startswith("http://127.0.0.1:") and "compare_b=1.5,0,0.9,0,vllm" in link
    for width, height in ((1440, 1000), (390, 844)):
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        try:
            page.goto(link, wait_until="domcontentloaded")
            expect(page.locator("#tabs [role=tab][aria-selected=true]")).to_have_text("Compare", timeout=60_000)
            expect(page.locator("#compare-prompt textarea")).to_have_value("Once upon a time")
            expect(page.locator("#compare-seed textarea, #compare-seed input").first).to_have_value("42")
            expect(page.locator("#compare-max-new input[type=number]")).to_have_value("8")
            table = page.locator("#compare-table")
            expect(table).to_contain_text("llama.cpp")
            expect(table).to_contain_text("vllm")
            if width == 1440:  # Run reads what the link set: three columns, seed 42
                page.locator("#compare-run").click()
                status = page.locator("#compare-status")
                expect(status).to_contain_text("done", timeout=120_000)
                expect(status).to_contain_text("3 columns · seed 42")
                expect(page.locator("#compare-texts .ntp-col")).to_have_count(3)
            page.screenshot(path=str(ARTIFACTS / f"compare_link_{width}.png"), full_page=True)
        finally:
            context.close()


def test_payloads_in_the_compare_links_fields_render_as_inert_text(browser, app_url):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    query = {"tab": "compare", "compare_seed": PAYLOADS[0], "compare_max_new": PAYLOADS[2],
             "compare_b": f"1,0,1,0,{PAYLOADS[1]}", "compare_prompt": PAYLOADS[3]}
    page.goto(f"{app_url}?{urlencode(query)}", wait_until="domcontentloaded")
    expect(page.get_by_text("Link: compare_b: order must be one of hf, vllm, llama.cpp, custom, got '<img", exact=False)
           ).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Link: compare_seed must be a whole number", exact=False)).to_be_visible()
    expect(page.locator("#compare-prompt textarea")).to_have_value(PAYLOADS[3])  # a prompt is text: kept, as text
    expect(page.locator("#compare-seed textarea, #compare-seed input").first).to_have_value("3")  # the tab's own
    page.wait_for_timeout(1500)
    assert rendered_payloads(page) == 0
    context.close()
