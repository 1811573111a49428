"""The Sampling lab in Vietnamese: a vi-VN browser gets it in Vietnamese (with the Vietnamese lesson prompt),
and the header's picker turns everything the server drew back into English without a new run."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from playground import limits

from .conftest import ARTIFACTS, settled_text
from .test_samplers import set_number

pytestmark = pytest.mark.browser

# every filter off: the stages that change nothing fold into one note
STAGE_TITLES_VI = ("softmax gốc", "cuối (lấy mẫu từ đây)", "top-k, top-p, min-p: giống hệt bước trước")
ENGLISH_ON_THE_LAB = ("Step", "stopped", "rank", "raw softmax", "after ", "kept", "Generate", "Temperature",
                      "Scrub", "the model's probability", "other tokens", "entropy, raw")


@pytest.fixture()
def open_page(browser, app_url):
    contexts = []

    def open_(query: str = "", locale: str = "vi-VN", width: int = 1440):
        context = browser.new_context(viewport={"width": width, "height": 1000}, locale=locale)
        contexts.append(context)
        page = context.new_page()
        page.goto(app_url + query, wait_until="domcontentloaded")
        expect(page.locator("#model-status")).to_contain_text(re.compile("Model:|Mô hình:"), timeout=60_000)
        return page

    yield open_
    for context in contexts:
        context.close()


def lab_text(page) -> str:
    """What the lab says in its own words: the status line without the token's piece, the charts' titles,
    axis titles, legends and notes, and the controls' labels (the model's tokens are left out: any text)."""
    status = settled_text(page, "#run-status")
    for piece in page.locator("#run-status code").all_inner_texts():
        status = status.replace(piece, "")
    charts = page.locator(
        "#stage-plot .annotation-text, #draw-plot .annotation-text, #run-plot .annotation-text, "
        "#stage-plot .g-xtitle, #run-plot .g-xtitle, #run-plot .g-ytitle, #run-plot .g-y2title, #run-plot .legendtext"
    ).all_text_contents()  # SVG text: no innerText
    controls = [page.locator(sel).inner_text() for sel in ("#generate", "#temperature", "#scrub", "#order")]
    return " | ".join([status, *charts, *controls, page.locator("#chips .ntp-legend").inner_text()])


def test_a_vietnamese_browser_runs_the_lab_in_vietnamese_then_switches_to_english_without_a_new_run(open_page):
    page = open_page()
    expect(page.locator("#run-status")).to_contain_text("Bấm Sinh văn bản", timeout=60_000)
    assert page.evaluate("document.documentElement.lang") == "vi"
    expect(page.locator("#prompt textarea")).to_have_value(limits.LESSON_PROMPT_VI)
    expect(page.locator("#generate")).to_have_text("Sinh văn bản")
    expect(page.locator("#stage-plot")).to_contain_text("Phân phối ở từng bước sẽ hiện ở đây.")
    page.locator("#max-new input[type=number]").fill("6")
    page.locator("#max-new input[type=number]").press("Enter")  # seed blank: each run draws its own
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("đã dừng: đạt số token mới tối đa", timeout=120_000)
    expect(page.locator("#scrub")).to_be_visible()
    for title in STAGE_TITLES_VI:
        expect(page.locator("#stage-plot")).to_contain_text(title)
    expect(page.locator("#stage-plot")).to_contain_text("bị giai đoạn này cắt bỏ")
    expect(page.locator("#run-plot")).to_contain_text("p được chọn")
    expect(page.locator("#chips")).to_contain_text("xác suất model gán cho token được chọn")
    assert "hạng" in page.locator("#chips .ntp-chip").first.get_attribute("title")
    text = lab_text(page)
    assert not [w for w in ENGLISH_ON_THE_LAB if w in text], text
    page.screenshot(path=str(ARTIFACTS / "sampling_lab_vi.png"), full_page=True)

    vietnamese = settled_text(page, "#run-status")
    page.locator("#language").get_by_text("English").click()
    expect(page.locator("#run-status")).to_contain_text("stopped: reached max new tokens", timeout=60_000)
    page.wait_for_function("document.documentElement.lang === 'en'", timeout=30_000)
    english = settled_text(page, "#run-status")
    # the same run, re-drawn: its random seed, timings and token ids are all the same numbers
    assert re.findall(r"\d+(?:\.\d+)?", english) == re.findall(r"\d+(?:\.\d+)?", vietnamese)
    for title in ("raw softmax", "final (sampled from)", "top-k, top-p, min-p: same as the stage before"):
        expect(page.locator("#stage-plot")).to_contain_text(title)
    expect(page.locator("#run-plot")).to_contain_text("p chosen")
    expect(page.locator("#chips")).to_contain_text("the model's probability of the chosen token")
    assert "rank" in page.locator("#chips .ntp-chip").first.get_attribute("title")
    expect(page.locator("#generate")).to_have_text("Generate")
    expect(page.locator("#prompt textarea")).to_have_value(limits.LESSON_PROMPT)  # the untouched default follows
    # a knob moved now still redraws the run on screen: the box's prompt is that run's lesson prompt, swapped
    set_number(page, "temperature", "0.5")
    expect(page.locator("#run-status")).to_contain_text("What if T 0.5", timeout=30_000)


def test_a_typed_prompt_and_a_links_prompt_are_never_swapped(open_page):
    page = open_page(locale="en-US")
    expect(page.locator("#prompt textarea")).to_have_value(limits.LESSON_PROMPT)
    page.wait_for_function("document.documentElement.lang === 'en'", timeout=30_000)
    page.locator("#prompt textarea").fill("Hà Nội là")
    page.locator("#language").get_by_text("Tiếng Việt").click()
    # the status line comes back from the same server update that would swap a default prompt
    expect(page.locator("#run-status")).to_contain_text("Bấm Sinh văn bản", timeout=60_000)
    expect(page.locator("#prompt textarea")).to_have_value("Hà Nội là")

    # a link in Vietnamese that names the English lesson prompt: the host chose it, it stays
    page = open_page("?lang=vi&prompt=The+capital+of+France+is&temperature=0.3", locale="en-US")
    expect(page.locator("#run-status")).to_contain_text("Bấm Sinh văn bản", timeout=60_000)
    expect(page.locator("#temperature input[type=number]")).to_have_value("0.3", timeout=60_000)  # link applied
    expect(page.locator("#prompt textarea")).to_have_value(limits.LESSON_PROMPT)
    page.locator("#share-button").click()  # the header's Share menu
    page.locator("#make-link").click()
    expect(page.locator("#link textarea, #link input").first).to_have_value(
        re.compile(r"\?prompt=The\+capital\+of\+France\+is&temperature=0\.3&lang=vi$"))


def test_the_lab_at_phone_width_in_vietnamese_fits(open_page):
    page = open_page("?lang=vi", locale="en-US", width=390)
    expect(page.locator("#prompt textarea")).to_have_value(limits.LESSON_PROMPT_VI, timeout=60_000)
    page.locator("#max-new input[type=number]").fill("3")
    page.locator("#max-new input[type=number]").press("Enter")
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("đã dừng", timeout=120_000)
    # nothing of the lab's column is wider than the phone (the stage panels scroll inside their own box)
    too_wide = page.evaluate("""() => [...document.querySelectorAll(
        '#run-status, #chips, #generate, #step, #stop, #order, #seed, #stop-strings, #scrub, #header > *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.id)""")
    assert too_wide == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(ARTIFACTS / "sampling_lab_vi_390.png"), full_page=True)
