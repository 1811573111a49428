"""The host's --precision on the page: an app whose model runs in int4 says so under the Forward pass tab's logits,
beside the same weights in float32 (the table of the top tokens both ways), on a projector and a phone, in English and
Vietnamese (the Vietnamese lesson's prompt); on the float32 app a learner picks int4 to see what it would do."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ..conftest import launched
from .conftest import ARTIFACTS, mounted

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def int4_url():
    from model_service import ModelService
    from model_service.models.switching import LoadingService
    from playground.page import build_demo

    service = ModelService.load(precision="int4", scheduler="thread")
    try:
        with launched(build_demo(LoadingService(service=service))) as url:
            yield url
    finally:
        service.close()


@pytest.mark.parametrize("width, height, lang", [(1280, 720, "en"), (390, 844, "vi")])
def test_an_int4_model_shows_what_int4_does_to_the_next_token(browser, int4_url, width, height, lang):
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.goto(f"{int4_url}?tab=forward&lang={lang}", wait_until="domcontentloaded")
        mounted(page, "#fw-prompt textarea")
        line = page.locator("#fw-precision")
        words = {"en": ("This model runs in int4 weights (groups of 32)", "p fp32", "the greedy token is the same"),
                 "vi": ("Mô hình này chạy ở trọng số int4 (nhóm 32)", "hạng ở fp32", "token greedy vẫn như cũ")}[lang]
        for text in words:
            expect(line).to_contain_text(text, timeout=90_000)
        expect(line.locator("table")).to_contain_text({"en": "␣Paris", "vi": "p int4"}[lang])  # vi: Pháp's prompt
        line.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"precision_{width}.png"))
        box = line.locator("table").bounding_box()
        assert box is not None and box["x"] >= 0  # the table starts on the screen (a phone scrolls it sideways)
    finally:
        context.close()


def test_on_a_float32_model_a_learner_picks_int4_and_sees_what_it_would_do(browser, app_url):
    context = browser.new_context(viewport={"width": 853, "height": 480})
    try:
        page = context.new_page()
        page.goto(app_url + "?tab=forward", wait_until="domcontentloaded")
        mounted(page, "#fw-prompt textarea")
        expect(page.locator("#iv-attribution-text")).to_contain_text("logit(␣Paris)", timeout=90_000)  # traced
        line = page.locator("#fw-precision")
        expect(line).to_be_hidden()  # nothing asked, nothing loaded
        page.locator("#fw-precision-pick").get_by_text("int4").click()
        expect(line).to_contain_text("In int4 weights (groups of 32), bfloat16 activations (this room's model runs in "
                                     "float32)", timeout=90_000)
        expect(line.locator("table")).to_contain_text("␣Paris")
        line.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "precision_pick_853.png"))
    finally:
        context.close()
