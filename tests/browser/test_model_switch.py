"""A host switches the room's model: an open page re-reads its numbers without a reload."""

from __future__ import annotations

import pytest
from gradio_client import Client
from playwright.sync_api import expect

from ..conftest import HOST_KEY
from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def test_an_open_page_follows_the_hosts_switch(browser, picker_app):
    url, keys = picker_app
    client = Client(url, verbose=False)
    info = client.predict(api_name="/model_info")
    layers = info["model"]["num_layers"]
    other = keys[1] if info["models"]["current"] == keys[0] else keys[0]
    other_layers = 5 - layers  # the two tiny models have 2 and 3 blocks

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text(f"{layers} layers", timeout=60_000)
    page.get_by_role("tab", name="Forward pass").click()
    expect(page.locator("#fw-status")).to_contain_text(f"through {layers} blocks", timeout=60_000)
    expect(page.locator("#fw-lesson-numbers")).to_contain_text(f"({layers} blocks + 1)")
    expect(page.locator("#fw-lesson-numbers")).to_contain_text("(32 blocks + 1)")  # the lessons' Llama
    assert page.locator("#fw-block input[type=range]").get_attribute("max") == str(layers)

    client.predict(other, HOST_KEY, api_name="/switch_model")
    expect(page.locator("#model-status")).to_contain_text(f"{other_layers} layers", timeout=30_000)
    expect(page.locator("#fw-status")).to_contain_text("The room's model is now", timeout=30_000)
    expect(page.locator("#fw-lesson-numbers")).to_contain_text(f"({other_layers} blocks + 1)")
    expect(page.locator("#fw-block input[type=range]")).to_have_attribute("max", str(other_layers))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "model_switch_forward.png"), full_page=False)

    page.get_by_role("tab", name="Sampling lab").click()
    expect(page.locator("#run-status")).to_contain_text("The room's model is now")
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=60_000)
    context.close()
