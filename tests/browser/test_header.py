"""The page's header in real Chromium: one slim row on a projector, the lesson on a phone's first screen, menus that
take no space closed (playground/menus.py, assets/style.css)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser

# where the tab bar starts, and the header's row(s): each direct child that is shown, by its box
GEOMETRY = """() => {
  const tabs = document.querySelector('#tabs [role=tablist]').getBoundingClientRect();
  const shown = [...document.querySelectorAll('#header > *')].filter(e => e.getBoundingClientRect().height > 0);
  const boxes = shown.map(e => { const r = e.getBoundingClientRect(); return {id: e.id, top: r.top, bottom: r.bottom,
                                                                             right: r.right}; });
  return {tabs: tabs.top + window.scrollY, boxes, width: document.documentElement.scrollWidth};
}"""


def open_page(browser, url: str, width: int, height: int, query: str = ""):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url + query, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text(re.compile("Model:|Mô hình:"), timeout=60_000)
    page.wait_for_timeout(500)  # the load events' last layout
    return page


def rows(boxes: list[dict]) -> int:
    """How many rows the header's items sit in (an item whose middle is below every earlier row's bottom starts one)."""
    bottoms: list[float] = []
    for box in sorted(boxes, key=lambda b: b["top"]):
        if not any((box["top"] + box["bottom"]) / 2 < bottom for bottom in bottoms):
            bottoms.append(box["bottom"])
    return len(bottoms)


@pytest.mark.parametrize("width, height, most_rows, tabs_by", [(1440, 900, 1, 120), (1280, 720, 1, 120),
                                                               (853, 480, 2, 160), (390, 844, 5, 420)])
def test_the_tab_bar_starts_near_the_top(browser, app_url, width, height, most_rows, tabs_by):
    page = open_page(browser, app_url, width, height)
    geometry = page.evaluate(GEOMETRY)
    assert geometry["tabs"] <= tabs_by, geometry
    assert rows(geometry["boxes"]) <= most_rows, geometry["boxes"]
    assert geometry["width"] <= width  # nothing of the header wider than the screen
    assert all(b["right"] <= width + 1 for b in geometry["boxes"]), geometry["boxes"]
    page.screenshot(path=str(ARTIFACTS / f"header_{width}.png"))
    page.context.close()


def test_an_open_scene_captions_under_the_header_and_the_tabs_stay_on_the_first_screen(browser, app_url):
    page = open_page(browser, app_url, 1280, 720, "?scene=l13-compare-temperatures")  # the longest caption
    expect(page.locator("#scene-caption")).to_contain_text("Scene", timeout=60_000)
    geometry = page.evaluate(GEOMETRY)
    assert geometry["tabs"] <= 200, geometry
    page.context.close()


def test_menus_open_over_the_page_and_close(browser, app_url):
    page = open_page(browser, app_url, 1280, 720)
    before = page.evaluate(GEOMETRY)["tabs"]
    expect(page.locator("#share-panel")).to_be_hidden()
    page.locator("#share-button").click()
    expect(page.locator("#share-panel")).to_be_visible()
    assert page.locator("#share-button").get_attribute("aria-expanded") == "true"
    assert page.evaluate(GEOMETRY)["tabs"] == before  # over the page, not in its flow
    page.locator("#page-link").click()  # one box for every link
    expect(page.locator("#link input, #link textarea").first).to_have_value(re.compile(r"^http://127\.0\.0\.1:\d+/"))
    page.locator("#make-link").click()
    expect(page.locator("#link input, #link textarea").first).to_have_value(re.compile(r"\?prompt="))
    page.keyboard.press("Escape")
    expect(page.locator("#share-panel")).to_be_hidden()

    page.locator("#room-button").click()  # one menu at a time
    expect(page.locator("#room-panel")).to_be_visible()
    page.locator("#model-status").click()
    expect(page.locator("#room-panel")).to_be_hidden()
    expect(page.locator("#model-panel")).to_be_visible()
    expect(page.locator("#model-line")).to_contain_text("layers")  # the whole line the header cuts
    cut = "e => [e, ...e.querySelectorAll('*')].some(x => x.scrollWidth > x.clientWidth + 1)"
    assert page.locator("#model-status").evaluate(cut)  # the header shows its first words
    page.screenshot(path=str(ARTIFACTS / "header_model_menu_1280.png"))
    page.mouse.click(640, 700)  # a click outside closes it
    expect(page.locator("#model-panel")).to_be_hidden()
    page.context.close()


def test_the_menus_answer_a_click_before_the_pages_load_events_have_run(browser, app_url):
    # on a busy machine a click on Room right after the page showed was lost: the menus' listener came with the
    # page's load events. It comes with the page's <head> now: installed before the Room button is on the page.
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.add_init_script("""new MutationObserver((_, watcher) => {
      if (!document.getElementById("room-button")) return;
      window.menusBeforeRoom = window.ntpMenus === true;
      watcher.disconnect();
    }).observe(document, {childList: true, subtree: true});""")
    page.goto(app_url, wait_until="domcontentloaded")
    page.wait_for_function("() => window.menusBeforeRoom !== undefined")
    assert page.evaluate("() => window.menusBeforeRoom")
    page.locator("#room-button").click()
    expect(page.locator("#room-panel")).to_be_visible()
    context.close()


def test_an_open_menu_stays_open_when_the_page_clicks_its_own_hidden_button(browser, app_url):
    # the panels under the run chart follow a hidden button the page clicks when the chart changes (lab/tab.py): at
    # load, and as a run ends. That click bubbled to the menus' "click outside" and closed the Room menu a host had
    # just opened (clean run 60: test_follow's Room never opened)
    page = open_page(browser, app_url, 1280, 720)
    page.locator("#room-button").click()
    expect(page.locator("#room-panel")).to_be_visible()
    page.evaluate("() => document.querySelector('.ntp-run-chart-changed').click()")
    page.wait_for_timeout(300)
    expect(page.locator("#room-panel")).to_be_visible()
    page.mouse.click(640, 700)  # a person's click outside still closes it
    expect(page.locator("#room-panel")).to_be_hidden()
    page.context.close()


def test_the_model_line_opens_its_menu_from_the_keyboard(browser, app_url):
    page = open_page(browser, app_url, 1280, 720)
    page.locator("#model-status").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#model-panel")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#model-panel")).to_be_hidden()
    page.context.close()


def test_the_header_stays_one_slim_row_at_the_top_while_a_projector_scrolls(browser, app_url):
    page = open_page(browser, app_url, 1280, 720)
    page.mouse.wheel(0, 900)
    page.wait_for_timeout(300)
    box = page.locator("#header").bounding_box()
    assert abs(box["y"]) <= 1 and box["height"] <= 72, box
    page.context.close()
    small = open_page(browser, app_url, 853, 480)  # 150 % zoom: nothing sticks over the little height there is
    small.mouse.wheel(0, 900)
    small.wait_for_timeout(300)
    assert small.locator("#header").bounding_box()["y"] < -50
    small.context.close()


def test_in_vietnamese_the_header_stays_one_row_at_1280_and_the_picker_says_it_in_vietnamese(browser, app_url):
    page = open_page(browser, app_url, 1280, 720)
    page.locator("#language").get_by_text("Tiếng Việt").click()  # switched on the page: relabelled in place
    expect(page.locator("#room-button")).to_contain_text("Phòng học")
    expect(page.locator("#scene-picker input")).to_have_attribute("placeholder", "Chọn một cảnh")
    page.wait_for_timeout(300)
    assert rows(page.evaluate(GEOMETRY)["boxes"]) == 1, page.evaluate(GEOMETRY)["boxes"]
    page.context.close()
    linked = open_page(browser, app_url, 1280, 720, "?lang=vi")  # a Vietnamese link
    assert rows(linked.evaluate(GEOMETRY)["boxes"]) == 1, linked.evaluate(GEOMETRY)["boxes"]
    linked.screenshot(path=str(ARTIFACTS / "header_1280_vi.png"))
    linked.context.close()


def test_a_vietnamese_page_is_told_the_model_reads_vietnamese_as_bytes_and_an_english_one_is_not(browser, app_url):
    page = open_page(browser, app_url, 1280, 720)
    expect(page.locator("#model-status")).to_contain_text("SmolLM2", timeout=60_000)
    expect(page.locator("#language-fit")).to_have_count(0)  # English: nothing, and no room taken
    page.locator("#language").get_by_text("Tiếng Việt").click()
    note = page.locator("#language-fit")
    expect(note).to_contain_text("đọc tiếng Việt theo byte", timeout=30_000)
    expect(note).to_contain_text("(5 từ) thành 15 token")
    expect(note).to_contain_text("Gemma 3 270M")
    assert note.bounding_box()["height"] < 80  # two lines at most on a projector
    page.screenshot(path=str(ARTIFACTS / "language_fit_vi_1280.png"))
    page.locator("#language").get_by_text("English").click()
    expect(page.locator("#language-fit")).to_be_hidden(timeout=30_000)
    page.context.close()


@pytest.mark.parametrize("lang", ["en", "vi"])
def test_on_a_phone_every_tab_is_a_tap_away(browser, app_url, lang):
    page = open_page(browser, app_url, 390, 844, f"?lang={lang}")
    tabs = page.locator("#tabs [role=tab]")
    expect(tabs).to_have_count(5)
    for i in range(5):
        box = tabs.nth(i).bounding_box()
        assert tabs.nth(i).is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= 390, (i, box)
        assert box["height"] >= 24, box  # a finger's target
    expect(page.locator("#tabs .overflow-menu")).to_have_count(0)  # no "⋯" hiding lessons
    tabs.nth(4).click()  # the last lesson, in one tap
    expect(page.locator("#fw-trace")).to_be_visible(timeout=30_000)
    page.context.close()


@pytest.mark.parametrize("width, height, knobs", [(1440, 900, ("temperature", "top-k", "top-p", "min-p")),
                                                  (1280, 720, ("temperature", "top-k", "top-p"))])
def test_the_first_screen_holds_the_prompt_generate_the_lessons_knobs_and_the_stage_chart(browser, app_url, width,
                                                                                          height, knobs):
    page = open_page(browser, app_url, width, height)
    for elem_id in ("prompt", "generate", "step", "stop", *knobs):
        box = page.locator(f"#{elem_id}").bounding_box()
        assert box["y"] + box["height"] <= height, (elem_id, box)
    assert page.locator("#stage-plot").bounding_box()["y"] < height / 2  # the charts beside the knobs, not below
    buttons = [page.locator(f"#{b}").bounding_box() for b in ("generate", "step", "stop")]
    assert buttons[0]["y"] == buttons[1]["y"] == buttons[2]["y"]  # side by side
    page.context.close()
