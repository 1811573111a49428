"""A link's settings reach the run even when the learner clicks at once: the buttons that run the model start
disabled and wake only when the page has applied its link. On a loaded machine a click used to land first and run
the page's defaults, while the controls then showed the link's values (a flake hunt found it in the samplers'
tests). Here the link is made slow on purpose, so the race is there every time."""

from __future__ import annotations

import functools
import time

import pytest
from playwright.sync_api import expect

from ..conftest import launched

pytestmark = pytest.mark.browser
LINK = "?prompt=Once+upon+a+time&temperature=0&max_new_tokens=4&order=llama.cpp&top_n_sigma=2"
APPLYING_S = 4.0  # how long the link takes to apply here


@pytest.fixture(scope="module")
def slow_link_url(embedded):
    from model_service.models.switching import LoadingService
    from playground import page as page_module
    from playground.page import build_demo

    applied = page_module.apply_link

    @functools.wraps(applied)  # Gradio reads the signature: the page's request is still given
    def slowly(*args, **kwargs):
        time.sleep(APPLYING_S)
        return applied(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(page_module, "apply_link", slowly)
        demo = build_demo(LoadingService(service=embedded))
    with launched(demo) as url:
        yield url


def test_a_click_before_the_link_is_applied_waits_for_it(browser, slow_link_url, embedded):
    from model_service import SamplingSettings

    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        page.goto(slow_link_url + LINK, wait_until="domcontentloaded")
        expect(page.locator("#model-status")).to_contain_text("Model:")
        for button in ("#generate", "#step"):  # (the other tabs' run buttons are not drawn until their tab is shown)
            expect(page.locator(button)).to_be_disabled()  # the link is still being applied
        page.locator("#generate").click(force=True)  # a click now does nothing...
        page.locator("#generate").click()  # ...and a normal one waits until the button wakes
        expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
        expect(page.locator("#prompt textarea")).to_have_value("Once upon a time")
        expect(page.locator("#stage-plot")).to_contain_text("after top-n-σ")  # the link's order ran
        *_, last = embedded.generate("Once upon a time", SamplingSettings(temperature=0), max_new_tokens=4)
        greedy = last.text  # the whole text so far
        chips = page.locator("#chips").inner_text().replace("␣", " ").replace("\n", "")
        assert greedy.replace(" ", "") in chips.replace(" ", ""), (greedy, chips)
        expect(page.locator("#step")).to_be_enabled()
        for tab, button in (("Compare", "#compare-run"), ("Engine", "#engine-run"), ("Forward pass", "#fw-trace")):
            page.get_by_role("tab", name=tab).click()
            expect(page.locator(button)).to_be_enabled()
    finally:
        context.close()
