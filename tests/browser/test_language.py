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
    page.locator("#language").get_by_text("Tiếng Việt").click()
    expect(page.locator("html")).to_have_attribute("lang", "vi")
    expect(page.locator("#model-status")).to_contain_text("Mô hình:")
    expect(page.locator("#title")).to_contain_text("Văn bản trở thành token tiếp theo")
    assert tab_labels(page) == TABS["vi"]
    page.locator("#language").get_by_text("English").click()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("#model-status")).to_contain_text("Model:")
    assert tab_labels(page) == TABS["en"]
