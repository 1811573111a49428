"""The issue's acceptance test: every scene opens from its absolute link in a fresh page and shows its tab and
settings. One browser, a fresh context per scene; a couple of control values each (the rest is unit-tested)."""

from __future__ import annotations

import json
import re

import pytest
from gradio_client import Client
from playwright.sync_api import expect

from playground.workshop.scenes import load, scene_paths

from .conftest import ARTIFACTS, open_accordion

pytestmark = pytest.mark.browser

TAB_LABELS = {"lab": "Sampling lab", "softmax": "Softmax & LM head", "engine": "Engine", "compare": "Compare",
              "forward": "Forward pass"}
NUMBER = {"temperature": "#temperature", "top_k": "#top-k", "top_p": "#top-p", "min_p": "#min-p",
          "max_new_tokens": "#max-new", "toy_shift": "#toy-shift", "toy_temperature": "#toy-temperature",
          "compare_max_new": "#compare-max-new"}
TEXT = {"prompt": "#prompt textarea", "fw_prompt": "#fw-prompt textarea", "seed": "#seed textarea, #seed input",
        "compare_prompt": "#compare-prompt textarea"}
SCENES = load(scene_paths(""))


def checked_fields(query: dict) -> list[str]:
    """Up to two fields a browser can read back, numbers first (they show that the settings arrived)."""
    fields = [f for f in query if f in NUMBER and float(query[f]) != 0] + [f for f in query if f in TEXT or f == "engine"]
    return fields[:2]


def expect_field(page, name: str, raw: str) -> None:
    if name in NUMBER:
        box = page.locator(f"{NUMBER[name]} input[type=number]")
        expect(box).to_have_value(_number(raw))
    elif name == "engine":
        expect(page.locator("#engine-table")).to_contain_text(json.loads(raw)[-1][0])
    else:
        expect(page.locator(TEXT[name]).first).to_have_value(raw)


def _number(raw: str) -> str:
    value = float(raw)
    return str(int(value)) if value.is_integer() else str(value)


def open_fresh(browser, link: str, width=1440, height=1000):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(link, wait_until="domcontentloaded")
    return context, page


def test_every_scene_opens_from_its_absolute_link(browser, app_url):
    client = Client(app_url, verbose=False)
    shots = {"l13-top-p-unsure": (1440, 1000), "l10-attention": (1280, 720), "l13-temperature-05": (390, 844),
             "l13-compare-temperatures": (1440, 1000)}
    for scene in SCENES.scenes:
        link = client.predict(scene.id, "en", api_name="/scene_link")
        assert link == f"{app_url}?scene={scene.id}"
        width, height = shots.get(scene.id, (1440, 1000))
        context, page = open_fresh(browser, link, width, height)
        try:
            expect(page.locator("#scene-caption")).to_contain_text(scene.text("title", "en"), timeout=60_000)
            expect(page.locator("#tabs [role=tab][aria-selected=true]")).to_have_text(TAB_LABELS[scene.tab])
            for name in checked_fields(dict(scene.query)):
                expect_field(page, name, scene.query[name])
            if scene.id in shots:
                page.wait_for_function("() => window.scrollY > 0", timeout=120_000)  # its run or trace, then the scroll
                page.wait_for_timeout(1000)
                page.screenshot(path=str(ARTIFACTS / f"scene_{scene.id}_{width}.png"))
        finally:
            context.close()


def test_keys_and_buttons_walk_the_scenes_and_a_vietnamese_link_captions_in_vietnamese(browser, app_url):
    context, page = open_fresh(browser, app_url + "?lang=vi")
    try:
        # no scene open: no caption, and the picker's own box says how to start
        expect(page.locator("#scene-picker input")).to_have_attribute("placeholder", "Chọn một cảnh", timeout=60_000)
        expect(page.locator("#scene-caption")).to_be_hidden()
        page.locator("body").press("PageDown")
        expect(page.locator("#scene-caption")).to_contain_text("Cảnh 1/34 · Bài 10 · Tokenizer")
        expect(page.locator("#tabs [role=tab][aria-selected=true]")).to_have_text("Forward pass", timeout=30_000)
        page.locator("body").press("Alt+ArrowRight")
        expect(page.locator("#scene-caption")).to_contain_text("Cảnh 2/34")
        page.locator("#scene-prev").click()
        expect(page.locator("#scene-caption")).to_contain_text("Cảnh 1/34")
        page.locator("body").press("PageUp")  # the first scene stays the first
        expect(page.locator("#scene-caption")).to_contain_text("Cảnh 1/34")
    finally:
        context.close()


def test_walking_on_from_a_scene_leaves_nothing_of_it_behind(browser, app_url):
    # XTC (llama.cpp's order, XTC on) then → DRY, → no-repeat (the hf order): each as it opens alone, no XTC panel
    # left on its chart and no "XTC probability is not part of the hf order" toast
    context, page = open_fresh(browser, app_url + "?scene=l13-xtc", 1280, 720)
    toasts = page.locator('[data-testid="toast-body"]')
    try:
        expect(page.locator("#stage-plot")).to_contain_text("after XTC", timeout=120_000)
        # what each shows once run: DRY's panel on its last step; no-repeat's text, which goes on to " bed"
        for scene_id, shown, says in (("l13-dry", "#stage-plot", "after DRY"), ("l13-no-repeat", "#chips", "bed")):
            page.locator("body").press("PageDown")
            expect(page.locator("#scene-caption")).to_contain_text(SCENES.get(scene_id).text("title", "en"))
            expect(page.locator(shown)).to_contain_text(says, timeout=120_000)
            expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
            expect(page.locator("#stage-plot")).not_to_contain_text("after XTC")
            assert toasts.count() == 0, toasts.all_inner_texts()
        open_accordion(page, page.locator("#samplers > button").first, "#xtc-probability input[type=number]")
        expect(page.locator("#xtc-probability input[type=number]")).to_have_value("0")  # back at its default
    finally:
        context.close()


CAPTION_SHOWN = """() => {
  const box = document.getElementById("scene-caption"), r = box.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, height: innerHeight, whole: box.scrollHeight <= box.clientHeight + 1,
          scrolled: scrollY};
}"""


@pytest.mark.parametrize("width,height,extra", [(1280, 720, ""), (853, 480, ""), (390, 844, ""), (1280, 720, "&present=1")])
def test_the_caption_stays_on_screen_in_full_when_the_scene_scrolls_to_its_fact(browser, app_url, width, height, extra):
    scene = SCENES.get("l13-compare-temperatures")  # the longest caption
    context, page = open_fresh(browser, f"{app_url}?scene={scene.id}{extra}", width, height)
    try:
        expect(page.locator("#scene-caption")).to_contain_text(scene.text("title", "en"), timeout=60_000)
        page.wait_for_function("() => window.scrollY > 0", timeout=120_000)  # its run, then the scroll to its fact
        page.wait_for_timeout(500)
        shown = page.evaluate(CAPTION_SHOWN)
        assert shown["top"] >= 0 and shown["bottom"] <= shown["height"] and shown["whole"], shown
        page.mouse.wheel(0, 600)  # the room scrolls on: the caption stays
        page.wait_for_timeout(300)
        shown = page.evaluate(CAPTION_SHOWN)
        assert shown["top"] >= 0 and shown["bottom"] <= shown["height"], shown
        page.screenshot(path=str(ARTIFACTS / f"scene_caption_{width}x{height}{'_present' if extra else ''}.png"))
    finally:
        context.close()


def test_a_warmed_pages_lab_scene_shows_its_kept_run_at_once_and_a_moved_knob_runs_live(browser, embedded):
    from model_service.models.switching import LoadingService
    from playground.common.kept_batches import KeptBatches
    from playground.lab.replays import Replays
    from playground.page import build_demo

    from ..conftest import launched

    replays, kept = Replays(), KeptBatches()
    with launched(build_demo(LoadingService(service=embedded), warm_scenes=True, replays=replays, kept=kept)) as url:
        replays.warming.join(timeout=600)  # every lab scene's run, once (a host's page has them before the room)
        kept.warming.join(timeout=600)  # then the Engine and Compare scenes' batches
        context, page = open_fresh(browser, f"{url}?scene=l13-top-p-confident", 1280, 720)
        try:
            status = page.locator("#run-status")
            expect(status).to_contain_text("shown at once", timeout=60_000)
            expect(page.locator("#stage-plot")).to_contain_text("after top-p")
            kept = replays.get(embedded, kept_request("l13-top-p-confident"))
            assert f"id {kept[-1].token_id}" in page.locator("#chips .ntp-chip").last.get_attribute("title")
            page.locator("body").press("PageDown")  # the next lab scene: kept too
            expect(status).to_contain_text("Step 1 of 1", timeout=60_000)
            expect(page.locator("#scene-caption")).to_contain_text(SCENES.get("l13-top-p-unsure").text("title", "en"))
            expect(status).to_contain_text("shown at once", timeout=60_000)
            page.locator("#seed textarea, #seed input").first.fill("2")  # another request: live
            page.locator("#generate").click()
            expect(status).to_contain_text("seed 2", timeout=60_000)
            expect(status).not_to_contain_text("shown at once")
        finally:
            context.close()
        for scene, done in (("l13-engine", "#engine-status"), ("l13-compare-temperatures", "#compare-status")):
            context, page = open_fresh(browser, f"{url}?scene={scene}", 1280, 720)
            try:  # the batch as its kept run left it, in one update
                expect(page.locator(done)).to_contain_text("shown at once", timeout=60_000)
                expect(page.locator(done)).to_contain_text("finished" if scene == "l13-engine" else "done")
            finally:
                context.close()


def kept_request(scene_id: str):
    from playground.lab.replays import scene_request

    return scene_request(SCENES.get(scene_id).query, "en")


def test_on_a_phone_the_stage_panels_stand_one_under_another_down_to_the_lessons_point(browser, app_url):
    """The top-p scene's point is the panel after top-p (kept 10 of 49,152): on a 390-wide phone the panels stand one
    under another, each the screen's width, so scrolling down (never sideways) reaches every title, the lesson's
    count in it, in text of at least 12 px."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(app_url + "?scene=l13-top-p-confident", wait_until="domcontentloaded")
        expect(page.locator("#chips .ntp-chip").first).to_be_visible(timeout=120_000)
        plot = page.locator("#stage-plot")
        expect(plot.locator(".js-plotly-plot")).to_be_visible(timeout=60_000)
        expect(plot.locator("text.annotation-text", has_text="after top-p")).to_be_visible(timeout=30_000)
        wide = plot.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
        assert wide[0] <= wide[1], wide  # nothing to scroll sideways
        titles = plot.locator("text.annotation-text", has_text=re.compile("raw softmax|after |final"))
        boxes = [titles.nth(i).bounding_box() for i in range(titles.count())]
        assert len(boxes) >= 3 and all(0 <= b["x"] and b["x"] + b["width"] <= 390 for b in boxes), boxes
        assert [b["y"] for b in boxes] == sorted(b["y"] for b in boxes)  # one under another
        assert re.search(r"kept 10\b", titles.filter(has_text="after top-p").first.text_content())
        sizes = plot.evaluate("(el) => Array.from(el.querySelectorAll('svg text')).filter((t) => t.getBBox().width > 0)"
                              ".map((t) => parseFloat(getComputedStyle(t).fontSize))")
        assert min(sizes) >= 12, min(sizes)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # the page itself does not scroll
        titles.filter(has_text="after top-p").first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "phone_stage_stacked.png"))
    finally:
        context.close()


def test_a_captions_numbers_are_the_runs_own_in_both_languages(browser, app_url):
    # the repetition penalty's caption: the top token at step 1, its probability before and after the penalty and
    # greedy's pick, read from the scene's run (caption_facts.py), also after a switch to Vietnamese
    context, page = open_fresh(browser, app_url + "?scene=l13-repetition-penalty", 1280, 720)
    caption = page.locator("#scene-caption")
    try:
        expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
        expect(caption).to_contain_text(re.compile(r'at step 1, "␣mat" falls from 14\.7% to 0\.4% .* greedy picks "␣bed"'))
        expect(page.locator("#chips")).to_contain_text("bed")  # the run on screen drew the token the caption names
        page.locator("#language").get_by_text("Tiếng Việt").click()
        expect(caption).to_contain_text(re.compile(r'"␣mat" tụt từ 14\.7% xuống 0\.4% .* greedy chọn "␣bed"'))
        assert "{" not in caption.inner_text() and "(xem lượt chạy)" not in caption.inner_text()
    finally:
        context.close()


def test_a_scenes_button_that_mounts_late_is_still_pressed(browser):
    # a busy CI machine mounted the Forward tab after the scene's script had looked for its section (5 s): the
    # knock-out scene's button was never pressed and the tab stayed on "Restored"
    from playground.workshop.scene_bar import ACTION_JS

    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content("<body></body>")
        page.evaluate(ACTION_JS, json.dumps({"id": "s", "focus": "late-section", "run": "late-button"}))
        page.wait_for_timeout(6_000)  # past the look for the section
        page.evaluate("""() => {
          const section = document.createElement("div"); section.id = "late-section";
          const button = document.createElement("button"); button.id = "late-button";
          button.onclick = () => { window.__pressed = (window.__pressed || 0) + 1; };
          section.appendChild(button); document.body.appendChild(section);
        }""")
        page.wait_for_function("window.__pressed === 1", timeout=5_000)
    finally:
        context.close()
