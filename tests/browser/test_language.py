"""The page's language in a real browser: chosen from the link, then the browser; switched by the picker."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

TABS = {"en": ["Sampling lab", "Softmax & LM head", "Engine", "Compare", "Forward pass"],
        "vi": ["Lab lấy mẫu", "Softmax & LM head", "Engine", "So sánh", "Forward pass"]}


@pytest.fixture()
def open_page(browser, app_url):
    contexts = []

    def open_page(locale: str, query: str = ""):
        context = browser.new_context(locale=locale, viewport={"width": 1440, "height": 1000})
        contexts.append(context)
        page = context.new_page()
        page.goto(app_url + query, wait_until="domcontentloaded")
        expect(page.locator("#model-status")).to_contain_text(re.compile("Mô hình:|Model:"), timeout=60_000)
        return page

    yield open_page
    for context in contexts:
        context.close()


def tab_labels(page):
    return [t.inner_text().strip() for t in page.get_by_role("tab").all()]


@pytest.mark.parametrize("locale, query, lang", [
    ("vi-VN", "", "vi"), ("en-US", "", "en"), ("en-US", "?lang=vi", "vi"), ("vi-VN", "?lang=en", "en"),
    ("fr-FR", "", "en"), ("vi-VN", "?lang=<b>x</b>", "vi"),
])
def test_the_page_speaks_the_links_language_else_the_browsers(open_page, locale, query, lang):
    page = open_page(locale, query)
    expect(page.locator("html")).to_have_attribute("lang", lang)
    expect(page.locator("#model-status")).to_contain_text("Mô hình:" if lang == "vi" else "Model:")
    # a tab not yet shown gets its label from the server's redraw (Gradio translates it only once shown)
    expect(page.get_by_role("tab")).to_have_text(TABS[lang])
    assert tab_labels(page) == TABS[lang]
    subtitle = "Văn bản trở thành token tiếp theo" if lang == "vi" else "How text becomes the next token"
    expect(page.locator("#title")).to_contain_text(subtitle)


def test_the_picker_switches_the_whole_page_without_a_reload(open_page):
    page = open_page("en-US")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    # the page has settled (its load events ran: the link applied wakes Generate); a pick before that is the next
    # test's, and once the load's own choice came after a pick here and undid it (a CI run on a loaded machine)
    expect(page.locator("#generate")).to_be_enabled(timeout=60_000)
    page.locator("#language").get_by_text("Tiếng Việt").click()
    expect(page.locator("html")).to_have_attribute("lang", "vi")
    expect(page.locator("#model-status")).to_contain_text("Mô hình:")
    expect(page.locator("#title")).to_contain_text("Văn bản trở thành token tiếp theo")
    assert tab_labels(page) == TABS["vi"]
    page.locator("#language").get_by_text("English").click()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("#model-status")).to_contain_text("Model:")
    assert tab_labels(page) == TABS["en"]


def test_a_language_picked_before_the_page_has_settled_holds(browser, app_url):
    """A learner on a slow laptop picks Tiếng Việt at first sight, before the page's load event has chosen the
    browser's language: the pick holds (the load's choice, which came later, once undid it)."""
    context = browser.new_context(locale="en-US", viewport={"width": 1440, "height": 1000})
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": 6})  # a slow machine: the load event runs late
        page.goto(app_url, wait_until="domcontentloaded")
        # as soon as it is there (a 90 s deadline fails a hang only: 6x throttled beside a busy suite, Playwright's
        # 30 s for the click's own checks ran out once)
        page.locator("#language").get_by_text("Tiếng Việt").click(timeout=90_000)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
        expect(page.locator("#generate")).to_be_enabled(timeout=60_000)  # the page's link is applied: load has run
        page.wait_for_timeout(500)
        expect(page.locator("html")).to_have_attribute("lang", "vi")
        expect(page.locator("#language input[value=vi]")).to_be_checked()
        expect(page.locator("#model-status")).to_contain_text("Mô hình:")
    finally:
        context.close()
