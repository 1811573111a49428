"""A shared link is opened by strangers: no markup from a URL or a typed value may ever render.

Each payload below, if it rendered, would create an element we can find (an <svg> with a javascript:
link, an <img> that fetches a tracking pixel, a <form> with a password field) or make a request to a
host that does not exist. Toasts and Markdown render HTML, so the page must show them as text.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlparse

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser

EVIL = "evil.invalid"
PAYLOADS = [
    '<svg><a href="javascript:alert(1)"><rect width="300" height="100" fill="red"/><text>Click to continue</text></a></svg>',
    f'<img src="http://{EVIL}/px.png" onerror="window.__pwned=1">',
    '<form action="/x"><input name="pw" type="password"></form>',
    f"<iframe src=\"http://{EVIL}/\"></iframe>",
]
PARAMS = ["prompt", "chat", "temperature", "top_k", "top_p", "min_p", "seed", "max_new_tokens", "stop", "order",
          "logit_bias", "repetition_penalty", "typical_p", "xtc_probability"]


def rendered_payloads(page) -> int:
    return page.evaluate(
        """() => document.querySelectorAll(
            'a[href^="javascript:"], img[src*="evil.invalid"], input[name="pw"], iframe[src*="evil.invalid"]'
        ).length + (window.__pwned ? 1 : 0)"""
    )


def watch_requests(page) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url) if urlparse(r.url).hostname == EVIL else None)
    return seen


def test_payloads_in_every_link_parameter_render_as_inert_text(browser, app_url):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    seen = watch_requests(page)
    # every known parameter gets a payload (prompt and stop accept text: they must land as text),
    # and a payload as an unknown parameter's *name* too
    query = {name: PAYLOADS[i % len(PAYLOADS)] for i, name in enumerate(PARAMS)}
    query[PAYLOADS[1]] = "1"
    page.goto(f"{app_url}?{urlencode(query)}", wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
    # the warnings appear, quoting the values as text
    expect(page.get_by_text("Link: temperature must be a number", exact=False)).to_be_visible(timeout=30_000)
    # the payload is quoted as text in the toast: its tags are visible characters, not elements
    expect(page.get_by_text("top_p must be a number between 0.01 and 1, got '<svg>", exact=False).first).to_be_visible()
    expect(page.locator("#prompt textarea")).to_have_value(PAYLOADS[0])  # the prompt is text: kept, as text
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / "xss_link.png"), full_page=False)
    assert rendered_payloads(page) == 0
    assert seen == []
    context.close()


def test_payloads_typed_into_every_text_input_render_as_inert_text(page):
    seen = watch_requests(page)
    page.locator("#prompt textarea").fill(PAYLOADS[1] + " The capital of France is")
    page.locator("#stop-strings textarea, #stop-strings input").first.fill(PAYLOADS[2])
    page.locator("#seed textarea, #seed input").first.fill(PAYLOADS[0])
    page.locator("#generate").click()
    expect(page.get_by_text("seed must be a whole number", exact=False)).to_be_visible(timeout=30_000)
    # a valid seed: the run streams; the prompt and stop strings are used as text, never as markup
    page.locator("#seed textarea, #seed input").first.fill("1")
    page.locator("#max-new input[type=number]").fill("4")
    page.locator("#max-new input[type=number]").press("Enter")
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    page.wait_for_timeout(1000)
    assert rendered_payloads(page) == 0
    assert seen == []
