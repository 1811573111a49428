"""The presenter view on a projector (1280×720) and a phone (390 px), the dark theme's charts, and a run
saved on one page and replayed on a page whose model never loaded."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from ..conftest import launched
from .conftest import ARTIFACTS, settled_text

pytestmark = pytest.mark.browser

# a short greedy run with two filters on (min-p off: its panel folds into a note)
RUN = "temperature=0&top_k=8&top_p=0.9&max_new_tokens=6&seed=1"
# every text of the three lab charts: its box, size and fill (hidden and empty ones left out)
CHART_TEXT = """() => [...document.querySelectorAll('#stage-plot svg text, #draw-plot svg text, #run-plot svg text')]
  .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
  .map(t => { const r = t.getBoundingClientRect(), s = getComputedStyle(t);
    return {text: t.textContent, size: parseFloat(s.fontSize), fill: s.fill, left: r.left, right: r.right, top: r.top,
            bottom: r.bottom, title: !!t.closest('#stage-plot .annotation'), id: t.closest('[id$=plot]').id}; })"""


def open_page(browser, url: str, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text(re.compile("model", re.I), timeout=60_000)
    return page


def generate(page):
    expect(page.locator("#max-new input[type=number]")).to_have_value("6")  # the link has set the controls
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    expect(page.locator("#scrub")).to_be_visible()
    page.wait_for_timeout(800)  # the last charts settle


def overlapping(boxes: list[dict]) -> list[tuple[str, str]]:
    return [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a["left"] < b["right"] - 1 and b["left"] < a["right"] - 1 and a["top"] < b["bottom"] - 1
            and b["top"] < a["bottom"] - 1]


@pytest.mark.parametrize("width, height", [(1280, 720), (390, 844)])
def test_the_presenter_view_reads_from_the_back_of_the_room(browser, app_url, width, height):
    page = open_page(browser, f"{app_url}?present=1&{RUN}", width, height)
    expect(page.locator("#present input")).to_be_checked()
    assert "ntp-present" in page.evaluate("document.body.className")
    expect(page.locator("#prompt")).to_be_hidden()  # the controls fold away; the buttons stay
    expect(page.locator("#generate")).to_be_visible()
    generate(page)
    texts = page.evaluate(CHART_TEXT)
    assert {t["id"] for t in texts} == {"stage-plot", "draw-plot", "run-plot"}
    small = [(t["text"], t["size"]) for t in texts if t["size"] < 14]
    assert not small, small
    titles = [t for t in texts if t["title"]]
    words = " ".join(t["text"] for t in titles)
    assert "after top-k" in words and "after top-p" in words and "after min-p" not in words  # min-p is off
    assert "min-p: same as the stage before" in words
    assert not overlapping(titles), overlapping(titles)
    page.screenshot(path=str(ARTIFACTS / f"presenter_{width}.png"), full_page=True)
    page.context.close()


def test_the_dark_theme_darkens_the_charts_and_the_log_zoom_shows_the_tail(browser, app_url):
    page = open_page(browser, f"{app_url}?__theme=dark&{RUN}", 1440, 1000)
    page.locator("#log-zoom input").check()
    generate(page)
    stage = page.locator("#stage-plot .main-svg").first
    assert stage.evaluate("e => getComputedStyle(e).backgroundColor") == "rgba(0, 0, 0, 0)"  # no white box
    ticks = [t for t in page.evaluate(CHART_TEXT) if t["id"] == "stage-plot" and t["text"] in ("0.1%", "10%")]
    assert ticks and all(t["fill"] == "rgb(229, 231, 235)" for t in ticks)  # light ink, log ticks
    page.locator("#stage-plot").hover()  # a chart's PNG: Plotly's own toolbar has it
    expect(page.locator('#stage-plot .modebar-btn[data-title="Download plot as a PNG"]')).to_be_attached()
    page.locator("#log-zoom input").uncheck()  # back to linear: the same run, redrawn without the model
    expect(page.locator("#stage-plot")).to_contain_text("50%")
    page.context.close()


@pytest.fixture(scope="module")
def no_model_url():
    """The page of an app whose model never loads: what a laptop without the model shows."""
    from model_service.models.switching import LoadingService
    from playground.page import build_demo

    with launched(build_demo(LoadingService("/nonexistent/no-model-here", "cpu"))) as url:
        yield url


def scene(page) -> dict:
    """What a learner sees of a step: the status line, the chips and the three charts' texts."""
    texts = page.evaluate(CHART_TEXT)
    return {"status": settled_text(page, "#run-status"), "chips": page.locator("#chips .ntp-chips").inner_html(),
            **{k: sorted(t["text"] for t in texts if t["id"] == k) for k in ("stage-plot", "draw-plot", "run-plot")}}


def test_an_exported_run_imports_and_scrubs_identically_without_a_model(browser, app_url, no_model_url, tmp_path):
    live = open_page(browser, f"{app_url}?{RUN.replace('temperature=0', 'temperature=0.8')}", 1440, 1000)
    generate(live)
    last = scene(live)
    live.locator("#scrub input[type=range]").press("ArrowLeft")  # the keyboard moves the step
    expect(live.locator("#run-status")).to_contain_text("Step 5 of 6")
    live.wait_for_timeout(800)
    fifth = scene(live)
    live.locator("#run-files").click()
    live.locator("#export-run").click()
    link = live.locator("#run-json a").first
    expect(link).to_be_attached(timeout=30_000)
    with live.expect_download() as download:
        link.click()
    path = tmp_path / "run.json"
    download.value.save_as(path)
    assert json.loads(path.read_text(encoding="utf-8"))["settings"]["top_k"] == 8
    live.context.close()

    page = open_page(browser, no_model_url, 1440, 1000)
    expect(page.locator("#model-status")).to_contain_text("failed")
    page.locator("#run-files").click()
    page.locator("#import-run input[type=file]").set_input_files(str(path))
    expect(page.locator("#run-status")).to_contain_text("replayed from a file", timeout=30_000)
    page.wait_for_timeout(800)
    shown = scene(page)
    assert shown["status"].split(" · forward")[0] == last["status"].split(" · forward")[0]
    assert {k: shown[k] for k in ("chips", "stage-plot", "draw-plot", "run-plot")} == {
        k: last[k] for k in ("chips", "stage-plot", "draw-plot", "run-plot")}
    expect(page.locator("#top-k input[type=number]")).to_have_value("8")  # the settings came with it
    page.locator("#scrub input[type=range]").press("ArrowLeft")
    expect(page.locator("#run-status")).to_contain_text("Step 5 of 6")
    page.wait_for_timeout(800)
    assert scene(page) == fifth
    page.screenshot(path=str(ARTIFACTS / "imported_run.png"), full_page=True)
    page.context.close()
