"""The samplers beyond the lesson in a real browser: a repetition penalty set in its accordion breaks greedy's loop
and its panel appears; a llama.cpp link with XTC, top-n-sigma, typical-p and a dynamic temperature draws their
panels (in Vietnamese too); an order that lacks a knob says so, naming it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser

LOOP = "The cat sat on the mat. The cat sat on the"
LLAMA = ("?prompt=Once+upon+a+time&order=llama.cpp&temperature=0.9&top_n_sigma=2&typical_p=0.9&xtc_probability=0.8"
         "&xtc_threshold=0.05&dynatemp_range=0.5&seed=3&max_new_tokens=8")


def opened(browser, url, width=1280, height=720):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text(re.compile("Model:|Mô hình:"), timeout=60_000)
    return context, page


def set_number(page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(value)
    box.press("Enter")


def generate(page, done="stopped") -> None:
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text(done, timeout=120_000)


def test_a_repetition_penalty_from_its_accordion_breaks_greedys_loop(browser, app_url):
    context, page = opened(browser, app_url)
    try:
        page.locator("#prompt textarea").fill(LOOP)
        set_number(page, "temperature", "0")
        set_number(page, "max-new", "8")
        generate(page)
        assert "mat" in page.locator("#chips").inner_text()
        expect(page.locator("#stage-plot")).not_to_contain_text("after penalties")
        page.locator("#penalties").get_by_text("Penalties and logit bias").click()
        set_number(page, "repetition-penalty", "1.3")
        generate(page)
        expect(page.locator("#stage-plot")).to_contain_text("after penalties")
        assert "The cat sat" not in page.locator("#chips").inner_text()
        page.locator("#stage-plot").screenshot(path=str(ARTIFACTS / "samplers_penalty.png"))

        # the Hugging Face order has no frequency penalty: the page says so, naming it, and keeps serving
        set_number(page, "frequency-penalty", "0.5")
        page.locator("#generate").click()
        expect(page.get_by_text("frequency penalty is not part of the hf order", exact=False).first).to_be_visible(
            timeout=30_000)
    finally:
        context.close()


@pytest.mark.parametrize("lang, titles", [
    ("en", ("after top-n-σ", "after typical-p", "after XTC", "chance", "dynamic: T")),
    ("vi", ("sau top-n-σ", "sau typical-p", "sau XTC", "cơ hội", "động: T")),
])
def test_a_llamacpp_link_draws_the_panels_of_its_samplers(browser, app_url, lang, titles):
    context, page = opened(browser, f"{app_url}{LLAMA}&lang={lang}")
    try:
        generate(page, "stopped" if lang == "en" else "đã dừng")
        for title in titles:
            expect(page.locator("#stage-plot")).to_contain_text(title)
        page.locator("#stage-plot").screenshot(path=str(ARTIFACTS / f"samplers_llamacpp_{lang}.png"))
        page.locator("#samplers").get_by_text("XTC", exact=False).first.click()  # the accordion shows the link's knobs
        expect(page.locator("#xtc-probability input[type=number]")).to_have_value("0.8")
        expect(page.locator("#dynatemp-range input[type=number]")).to_have_value("0.5")
    finally:
        context.close()
