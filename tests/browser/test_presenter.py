"""The presenter view on a projector (1280×720, and 853×480: the same at 150 %) and a phone (390 px): one step on
one screen, driven by keys; the dark theme's charts, and a run saved on one page and replayed on a page whose
model never loaded."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from ..conftest import launched
from .conftest import ARTIFACTS, mounted, open_accordion, settled_text

pytestmark = pytest.mark.browser

# a short greedy run with two filters on (min-p off: its panel folds into a note)
RUN = "temperature=0&top_k=8&top_p=0.9&max_new_tokens=6&seed=1"
# a longer sampled run (this seed runs to its end): more chips than their box shows
LONG_RUN = "prompt=Once+upon+a+time&temperature=1&top_k=0&top_p=0.95&max_new_tokens=80&seed=7"
# every text of the three lab charts: its box, size and fill (hidden and empty ones left out)
CHART_TEXT = """() => [...document.querySelectorAll('#stage-plot svg text, #draw-plot svg text, #run-plot svg text')]
  .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
  .map(t => { const r = t.getBoundingClientRect(), s = getComputedStyle(t);
    return {text: t.textContent, size: parseFloat(s.fontSize), fill: s.fill, left: r.left, right: r.right, top: r.top,
            bottom: r.bottom, title: !!t.closest('#stage-plot .annotation'), id: t.closest('[id$=plot]').id}; })"""


# the step's own texts: the slim bar's buttons, the chips and their scale, the status line
STEP_TEXT = """() => [...document.querySelectorAll(['#lab-buttons button', '#chips .ntp-legend span', '#chips .ntp-chip',
    '#chips .ntp-part', '#run-status p', '#run-status p *'].join(','))]
  .filter(e => e.textContent.trim() && e.getClientRects().length)
  .map(e => ({text: e.textContent.slice(0, 40), size: parseFloat(getComputedStyle(e).fontSize)}))"""
# where the lab's parts are on the page (top and bottom from the page's top, left and right in the window)
GEOMETRY = """() => Object.fromEntries(Object.entries({tabs: '#tabs [role=tablist]', buttons: '#lab-buttons',
    generate: '#generate', step: '#step', stop: '#stop', hint: '#ntp-keys-hint', chips: '#chips', stage: '#stage-plot',
    draw: '#draw-plot', scrub: '#scrub', run: '#run-plot', svg: '#stage-plot .main-svg'}).map(([k, s]) => {
  const r = document.querySelector(s).getBoundingClientRect();
  return [k, {top: r.top + scrollY, bottom: r.bottom + scrollY, left: r.left, right: r.right}]; }))"""
# the chips' box and, in the window, the newest chip and the one of the step shown
CHIPS_BOX = """() => { const box = document.querySelector('#chips .ntp-chips'), r = box.getBoundingClientRect();
  const at = (e) => e ? {top: e.getBoundingClientRect().top, bottom: e.getBoundingClientRect().bottom} : null;
  const chips = box.querySelectorAll('.ntp-chip');
  return {top: r.top, bottom: r.bottom, height: box.clientHeight, scroll: box.scrollHeight,
          last: at(chips[chips.length - 1]), selected: at(box.querySelector('.ntp-selected'))}; }"""


def open_page(browser, url: str, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text(re.compile("model", re.I), timeout=60_000)
    return page


def generate(page, max_new: int = 6):
    expect(page.locator("#max-new input[type=number]")).to_have_value(str(max_new))  # the link has set the controls
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=180_000)
    expect(page.locator("#scrub")).to_be_visible()
    page.wait_for_timeout(800)  # the last charts settle


def cut_off(page, texts: list[dict]) -> list[str]:
    """The stage chart's texts that run past its figure's edges, and lines of its note (which wraps, starting at
    the figure's left edge) that run past the window: on a phone the figure scrolls sideways, its note must not."""
    svg = page.evaluate(GEOMETRY)["svg"]
    window = page.evaluate("document.documentElement.clientWidth")
    return [t["text"] for t in texts if t["id"] == "stage-plot" and (
        t["right"] > svg["right"] + 1 or t["left"] < svg["left"] - 1
        or ("same as the stage before" in t["text"] or "nothing removed" in t["text"]) and t["right"] > window)]


def small_text(page) -> list[tuple[str, float]]:
    """Every text of the step (charts, buttons, chips, status line) under 14 px."""
    return [(t["text"], t["size"]) for t in page.evaluate(CHART_TEXT) + page.evaluate(STEP_TEXT) if t["size"] < 14]


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
    assert "min-p: same as the stage" in words  # (on a phone the note wraps after "stage")
    assert not overlapping(titles), overlapping(titles)
    assert not cut_off(page, texts)
    page.screenshot(path=str(ARTIFACTS / f"presenter_{width}.png"), full_page=True)
    page.context.close()


def test_the_dark_theme_darkens_the_charts_and_the_log_zoom_shows_the_tail(browser, app_url):
    page = open_page(browser, f"{app_url}?__theme=dark&{RUN}", 1440, 1000)
    generate(page)
    stage = page.locator("#stage-plot .main-svg").first
    assert stage.evaluate("e => getComputedStyle(e).backgroundColor") == "rgba(0, 0, 0, 0)"  # no white box
    # the log zoom redraws the run without the model; ticked once the page has settled (a check in the first
    # frames after the page shows can be lost on a busy machine, as a typed value can: conftest.mounted)
    mounted(page, "#log-zoom input")
    page.locator("#log-zoom input").check()
    expect(page.locator("#log-zoom input")).to_be_checked()
    page.wait_for_function(f"() => ({CHART_TEXT})().some(t => t.id === 'stage-plot' && ['0.1%', '10%'].includes(t.text))",
                           timeout=60_000)
    ticks = [t for t in page.evaluate(CHART_TEXT) if t["id"] == "stage-plot" and t["text"] in ("0.1%", "10%")]
    assert ticks and all(t["fill"] == "rgb(229, 231, 235)" for t in ticks)  # light ink, log ticks
    page.locator("#stage-plot").hover()  # a chart's PNG: Plotly's own toolbar has it
    expect(page.locator('#stage-plot .modebar-btn[data-title="Download plot as a PNG"]')).to_be_attached()
    page.locator("#log-zoom input").uncheck()  # back to linear: the same run, redrawn without the model
    expect(page.locator("#stage-plot")).to_contain_text("50%")
    page.context.close()


@pytest.mark.parametrize("run, steps", [(RUN, 6), (LONG_RUN, 80)], ids=["6 tokens", "80 tokens"])
def test_one_step_fits_one_projector_screen(browser, app_url, run, steps):
    """At 1280x720 the slim bar, the chips, the status, the stage panels and the draw bar end within 720 px of the
    tab bar's top; the scrubber and the run chart follow. A long run's chips scroll in their box, newest in view."""
    page = open_page(browser, f"{app_url}?present=1&{run}", 1280, 720)
    generate(page, steps)
    at = page.evaluate(GEOMETRY)
    assert at["draw"]["bottom"] - at["tabs"]["top"] <= 720, at
    assert at["draw"]["bottom"] <= 720, at  # under the header: the whole step on the first screen, no scrolling
    assert at["buttons"]["top"] < at["tabs"]["bottom"], at  # the slim bar rides in the tab bar's row
    tops = [at[k]["top"] for k in ("buttons", "chips", "stage", "draw", "scrub", "run")]
    assert tops == sorted(tops) and at["buttons"]["bottom"] <= at["chips"]["top"]
    assert at["generate"]["top"] == at["step"]["top"] == at["stop"]["top"]  # side by side, "? keys" beside them
    assert at["generate"]["right"] < at["step"]["left"] < at["stop"]["left"] < at["hint"]["left"]
    assert at["buttons"]["top"] <= at["hint"]["top"] < at["hint"]["bottom"] <= at["buttons"]["bottom"]
    assert at["buttons"]["bottom"] - at["buttons"]["top"] <= 48  # a slim bar
    assert not small_text(page), small_text(page)
    texts = page.evaluate(CHART_TEXT)
    assert not cut_off(page, texts)
    chips = page.evaluate(CHIPS_BOX)
    if steps == 80:
        assert chips["scroll"] > chips["height"] + 10  # more lines than the box: it scrolls...
        assert chips["top"] - 1 <= chips["last"]["top"] and chips["last"]["bottom"] <= chips["bottom"] + 1  # newest
        page.screenshot(path=str(ARTIFACTS / "presenter_1280x720_long.png"))
        page.locator("#scrub input[type=range]").press("Home")  # back to the first step: its chip comes into view
        expect(page.locator("#run-status")).to_contain_text("Step 1 of 80")
        page.wait_for_timeout(500)
        chips = page.evaluate(CHIPS_BOX)
        assert chips["top"] - 1 <= chips["selected"]["top"] and chips["selected"]["bottom"] <= chips["bottom"] + 1
    else:
        page.screenshot(path=str(ARTIFACTS / "presenter_1280x720.png"))
    page.context.close()


def test_at_150_percent_the_chips_and_the_stage_charts_share_the_first_screen(browser, app_url):
    """853x480: a 1280x720 projector at 150 %. The chips and the stage panels' titles and first rows are on the
    first screen; with the tab bar at the top of the window, the panels' first seven rows are."""
    page = open_page(browser, f"{app_url}?present=1&{RUN}", 853, 480)
    generate(page)
    at = page.evaluate(GEOMETRY)
    assert at["chips"]["top"] < 480 and at["stage"]["top"] < 480, at
    assert at["stage"]["top"] - at["tabs"]["top"] <= 480 - 62 - 7 * 20, at  # titles, then 20 px a row
    assert not small_text(page), small_text(page)
    texts = page.evaluate(CHART_TEXT)
    assert not cut_off(page, texts)
    assert not overlapping([t for t in texts if t["title"]])
    page.screenshot(path=str(ARTIFACTS / "presenter_853x480.png"))
    page.context.close()


def test_keys_drive_the_lab_in_the_presenter_view(browser, app_url):
    """Space = Step, G = Generate, ← / → = scrub, ? = the keys' help (Esc, ? or a click closes it); never while
    typing in a box."""
    page = open_page(browser, f"{app_url}?present=1&{RUN}", 1280, 720)
    expect(page.locator("#max-new input[type=number]")).to_have_value("6")
    help_box = page.locator("#ntp-keys-help")
    expect(page.locator("#ntp-keys-hint")).to_have_text("? keys")
    page.keyboard.press("?")
    expect(help_box).to_be_visible()
    expect(help_box).to_contain_text("Space")
    expect(help_box).to_contain_text("Generate a whole run")
    page.screenshot(path=str(ARTIFACTS / "presenter_keys.png"))
    page.keyboard.press("?")
    expect(help_box).to_be_hidden()
    page.locator("#ntp-keys-hint").click()  # the slim bar's "? keys"
    expect(help_box).to_be_visible()
    page.keyboard.press("Escape")
    expect(help_box).to_be_hidden()
    page.keyboard.press("?")
    page.mouse.click(640, 700)
    expect(help_box).to_be_hidden()

    page.locator("#scene-picker input").focus()  # typing in a box: the keys are letters
    page.keyboard.press("g")
    page.keyboard.press("Escape")
    page.evaluate("document.activeElement.blur()")
    page.wait_for_timeout(500)
    expect(page.locator("#run-status")).to_contain_text("Press Generate")  # no run began

    expect(page.locator("#step")).to_be_enabled()
    page.keyboard.press(" ")
    expect(page.locator("#run-status")).to_contain_text("Step 1 of 1")
    page.keyboard.press(" ")
    expect(page.locator("#run-status")).to_contain_text("Step 2 of 2")
    page.keyboard.press("g")
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    expect(page.locator("#run-status")).to_contain_text("Step 6 of 6")
    page.wait_for_timeout(500)
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#run-status")).to_contain_text("Step 5 of 6")
    expect(page.locator("#scrub input[type=number]")).to_have_value("5")
    page.keyboard.press("ArrowRight")
    expect(page.locator("#run-status")).to_contain_text("Step 6 of 6")
    page.context.close()


def test_s_stops_a_run_and_the_keys_help_speaks_the_pages_language(browser, app_url):
    page = open_page(browser, f"{app_url}?present=1&lang=vi&{LONG_RUN}", 1280, 720)
    expect(page.locator("#max-new input[type=number]")).to_have_value("80")
    expect(page.locator("#ntp-keys-hint")).to_have_text("? phím tắt")
    page.keyboard.press("?")
    expect(page.locator("#ntp-keys-help")).to_contain_text("Phím cách")
    page.keyboard.press("Escape")
    expect(page.locator("#generate")).to_be_enabled()  # the keys press what the page shows: awake once the link is in
    page.keyboard.press("g")
    # any step of the stream (the status line may skip steps when the page is busy), long before step 80
    expect(page.locator("#run-status")).to_contain_text(re.compile(r"Bước ([3-9]|[1-5][0-9]) / "), timeout=60_000)
    page.keyboard.press("s")
    # stopped by you (the status can say "before the first token" when the stop lands as the stream starts over:
    # a known race of the status line, noted for the next session)
    expect(page.locator("#run-status")).to_contain_text(re.compile("bạn đã dừng (ở bước|trước token đầu tiên)"),
                                                       timeout=30_000)
    page.context.close()


def test_the_keys_sleep_outside_the_presenter_view(browser, app_url):
    page = open_page(browser, f"{app_url}?{RUN}", 1280, 720)
    expect(page.locator("#max-new input[type=number]")).to_have_value("6")
    page.keyboard.press("?")
    page.keyboard.press(" ")
    page.wait_for_timeout(800)
    expect(page.locator("#ntp-keys-help")).to_have_count(0)
    expect(page.locator("#ntp-keys-hint")).to_be_hidden()
    expect(page.locator("#run-status")).to_contain_text("Press Generate")  # no run began
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
    open_accordion(live, live.locator("#run-files > button").first, "#export-run")
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
    open_accordion(page, page.locator("#run-files > button").first, "#import-run")
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
