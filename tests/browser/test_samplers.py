"""The samplers beyond the lesson in a real browser: a repetition penalty set in its accordion breaks greedy's loop
and its panel appears; a llama.cpp link with XTC, top-n-sigma, typical-p and a dynamic temperature draws their
panels (in Vietnamese too); an order that lacks a knob says so, naming it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS, mounted, open_accordion

pytestmark = pytest.mark.browser

LOOP = "The cat sat on the mat. The cat sat on the"
LLAMA = ("?prompt=Once+upon+a+time&order=llama.cpp&temperature=0.9&top_n_sigma=2&typical_p=0.9&xtc_probability=0.8"
         "&xtc_threshold=0.05&dynatemp_range=0.5&seed=3&max_new_tokens=8")


def opened(browser, url, width=1280, height=720):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text(re.compile("Model:|Mô hình:"), timeout=60_000)
    return context, page


def set_number(page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(value)
    box.press("Enter")


def expect_hits(page, count: int, says: str) -> None:
    """`count` chips underlined as hit by the shown step, the first one the run's first, its hover saying `says`."""
    hit = page.locator("#chips .ntp-hit.ntp-chip")
    expect(hit).to_have_count(count)
    expect(hit.first).to_have_attribute("data-step", "0")
    expect(hit.first).to_have_attribute("title", re.compile(says))


# Counts the changes to the run's status line from here on: a second run's "stopped" is the first's until it changes.
WATCH_STATUS = """() => {
  window.ntpStatusChanges = 0;
  if (window.ntpStatusWatch) return;
  const inStatus = (node) => !!node && !!(node.nodeType === 1 ? node : node.parentElement)?.closest("#run-status");
  window.ntpStatusWatch = new MutationObserver((changes) => {
    if (changes.some((c) => inStatus(c.target))) window.ntpStatusChanges++;
  });
  window.ntpStatusWatch.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def generate(page, done="stopped") -> None:
    """Press Generate and wait for this run's end: the status line changes, then says `done`, and the stage chart
    has settled on the run's last step."""
    page.evaluate(WATCH_STATUS)
    page.locator("#generate").click()
    page.wait_for_function("() => window.ntpStatusChanges > 0", timeout=120_000)
    expect(page.locator("#run-status")).to_contain_text(done, timeout=120_000)
    settled(page)


def settled(page) -> None:
    """Wait until the stage chart holds bars and has not changed for 0.4 s: a run's last step is drawn in place a task
    after its status says "stopped" (on a busy machine, later still), so a chart read at once can be the step before's
    or a blank."""
    page.wait_for_function("""() => new Promise((done) => {
      const box = document.querySelector('#stage-plot');
      const plot = box && box.querySelector('.js-plotly-plot');
      if (!plot || !(plot.data || []).some((t) => t.type === 'bar')) return done(false);
      let quiet = setTimeout(() => { watch.disconnect(); done(true); }, 400);
      const watch = new MutationObserver(() => { clearTimeout(quiet); watch.disconnect(); done(false); });
      watch.observe(box, {subtree: true, childList: true, attributes: true, characterData: true});
    })""", timeout=60_000, polling=100)


def test_a_repetition_penalty_from_its_accordion_breaks_greedys_loop(browser, app_url):
    context, page = opened(browser, app_url)
    try:
        page.locator("#prompt textarea").fill(LOOP)
        set_number(page, "temperature", "0")
        set_number(page, "max-new", "8")
        generate(page)
        assert "mat" in page.locator("#chips").inner_text()
        expect(page.locator("#stage-plot")).not_to_contain_text("after penalties")
        open_accordion(page, page.locator("#penalties").get_by_text("Penalties, bans and logit bias"),
                       "#repetition-penalty input[type=number]")
        set_number(page, "repetition-penalty", "1.3")
        generate(page)
        expect(page.locator("#stage-plot")).to_contain_text("after penalties")
        assert "The cat sat" not in page.locator("#chips").inner_text()
        page.locator("#stage-plot").screenshot(path=str(ARTIFACTS / "samplers_penalty.png"))

        # the Hugging Face order has no frequency penalty: the page says so, naming it, and keeps serving
        set_number(page, "frequency-penalty", "0.5")
        page.locator("#generate").click()
        expect(page.get_by_text("frequency penalty is not part of the hf order", exact=False).first).to_be_visible(
            timeout=30_000)
    finally:
        context.close()


@pytest.mark.parametrize("lang, titles", [
    ("en", ("after top-n-σ", "after typical-p", "after XTC", "chance", "dynamic: T")),
    ("vi", ("sau top-n-σ", "sau typical-p", "sau XTC", "cơ hội", "động: T")),
])
def test_a_llamacpp_link_draws_the_panels_of_its_samplers(browser, app_url, lang, titles):
    context, page = opened(browser, f"{app_url}{LLAMA}&lang={lang}")
    try:
        generate(page, "stopped" if lang == "en" else "đã dừng")
        for title in titles:
            expect(page.locator("#stage-plot")).to_contain_text(title)
        page.locator("#stage-plot").screenshot(path=str(ARTIFACTS / f"samplers_llamacpp_{lang}.png"))
        # the accordion shows the link's knobs
        open_accordion(page, page.locator("#samplers").get_by_text("XTC", exact=False).first, "#xtc-probability input")
        expect(page.locator("#xtc-probability input[type=number]")).to_have_value("0.8")
        expect(page.locator("#dynatemp-range input[type=number]")).to_have_value("0.5")
    finally:
        context.close()


# The page draws a streaming run's charts in place, a task after each update (lab/in_place.py). On a busy machine
# such a draw of the run's next-to-last step came after its last update had set the charts, and the chart stayed
# there (a CI run: no XTC panel, which the link's last step has and the one before lacks). Here those draws wait
# 1.5 s on purpose, so the race is there every time.
LATE_DRAWS = """() => {
  const setTimeout = window.setTimeout;
  window.setTimeout = (f, ms, ...rest) =>
    setTimeout(f, String(f).includes("__ntpStreamed") ? 1500 : ms, ...rest);
}"""


def test_a_late_draw_of_a_streamed_step_never_covers_the_runs_last(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.add_init_script(f"({LATE_DRAWS})()")
    page = context.new_page()
    try:
        page.goto(f"{app_url}{LLAMA}", wait_until="domcontentloaded")
        expect(page.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
        generate(page)
        page.wait_for_timeout(2_500)  # every draw still waiting has come
        expect(page.locator("#stage-plot")).to_contain_text("after XTC", timeout=1_000)
    finally:
        context.close()


@pytest.mark.parametrize("lang, words", [
    ("en", ("after DRY", "Underlined:", "moved its logit by")),
    ("vi", ("sau DRY", "Gạch chân:", "dời logit của nó")),
])
def test_dry_from_a_link_stops_the_loop_and_underlines_the_chips_it_hit(browser, app_url, lang, words):
    # the l13-dry scene's run: at step 12, " cat" would extend ". The" again: DRY hits it, and the chips of steps 1 and 7
    link = f"?prompt={LOOP.replace(' ', '+')}&order=llama.cpp&temperature=0&dry_multiplier=0.8&max_new_tokens=12"
    context, page = opened(browser, f"{app_url}{link}&lang={lang}")
    try:
        generate(page, "stopped" if lang == "en" else "đã dừng")
        assert "The cat sat on the mat" not in page.locator("#chips").inner_text()
        # step 1: DRY's panel shows " mat" cut down; the chips before the last step that its DRY hit are underlined
        expect(page.locator("#chips")).to_contain_text(words[1])
        expect_hits(page, 2, words[2])
        set_number(page, "scrub", "1")
        expect(page.locator("#stage-plot")).to_contain_text(words[0])
        page.locator("#stage-plot").screenshot(path=str(ARTIFACTS / f"samplers_dry_{lang}.png"))
    finally:
        context.close()


def test_mirostat_draws_mu_and_refuses_the_cuts_it_replaces(browser, app_url):
    link = "?prompt=Once+upon+a+time&order=llama.cpp&mirostat=2&mirostat_tau=3&mirostat_eta=0.3&seed=1&max_new_tokens=12"
    context, page = opened(browser, app_url + link)
    try:
        generate(page)
        expect(page.locator("#stage-plot")).to_contain_text("mirostat, μ")
        expect(page.locator("#run-plot")).to_contain_text("mirostat μ (bits)")
        page.locator("#run-plot").screenshot(path=str(ARTIFACTS / "samplers_mirostat_run.png"))
        set_number(page, "top-k", "40")  # mirostat replaces top-k: the page says so, naming it
        page.locator("#generate").click()
        expect(page.get_by_text("top-k is not applied with mirostat on", exact=False).first).to_be_visible(timeout=30_000)
    finally:
        context.close()


def test_a_custom_chain_the_chips_toggle_and_a_click_that_bans_a_token(browser, app_url):
    context, page = opened(browser, app_url + "?temperature=0.7&top_k=30&min_p=0.05&seed=3&max_new_tokens=6", 1440, 900)
    try:
        expect(page.locator("#chain")).to_be_hidden()
        page.locator("#order").get_by_text("Custom").click()
        mounted(page, "#chain textarea")  # the custom order shows its chain box
        page.locator("#chain textarea").fill("top_k > min_p > temperature")
        generate(page)
        for title in ("after top-k", "after min-p", "after temperature"):
            expect(page.locator("#stage-plot")).to_contain_text(title)
        text = page.locator("#stage-plot").inner_text()
        assert text.index("after min-p") < text.index("after temperature")  # the panels follow the chain
        # the chips' colour: the final probability at once, in the page
        raw = page.locator("#chips .ntp-chip").first.evaluate("e => getComputedStyle(e).backgroundColor")
        page.locator("#chip-probs").get_by_text("final p", exact=False).click()
        expect(page.locator("body")).to_have_class(re.compile("ntp-final-probs"))
        final = page.locator("#chips .ntp-chip").first.evaluate("e => getComputedStyle(e).backgroundColor")
        assert raw != final
        # a click on the top candidate's bar bans it: the bias box says so and the next run goes without it
        top = page.locator("#stage-plot .bars path").first
        top.click(force=True)
        open_accordion(page, page.locator("#penalties").get_by_text("Penalties, bans and logit bias"),
                       "#logit-bias textarea")
        expect(page.locator("#logit-bias textarea")).to_have_value(re.compile(r"^\d+:-100$"), timeout=60_000)
        banned = int(page.locator("#logit-bias textarea").input_value().split(":")[0])
        generate(page)
        chips = page.locator("#chips .ntp-chip")
        assert all(f"id {banned} " not in (chips.nth(i).get_attribute("title") or "") for i in range(chips.count()))
        page.screenshot(path=str(ARTIFACTS / "samplers_custom_chain.png"))
    finally:
        context.close()


@pytest.mark.parametrize("lang,words", [
    ("en", ("after no-repeat n-gram", "this step banned it", "stopped", "Penalties, bans and logit bias")),
    ("vi", ("sau no-repeat n-gram", "bước này đã cấm nó", "đã dừng", "Hình phạt lặp, lệnh cấm và logit bias")),
])
def test_a_no_repeat_ngram_from_its_accordion_bans_the_repeat_and_underlines_the_chip(browser, app_url, lang, words):
    # the l13-no-repeat scene by hand: n = 3 bans " mat" at step 1; step 7 (" dog") bans " cat", which would
    # repeat ". The cat": the first chip holds it, and its hover says so
    context, page = opened(browser, f"{app_url}?lang={lang}")
    try:
        page.locator("#prompt textarea").fill(LOOP)
        set_number(page, "temperature", "0")
        set_number(page, "max-new", "12")
        open_accordion(page, page.locator("#penalties").get_by_text(words[3]), "#no-repeat-ngram-size input[type=number]")
        set_number(page, "no-repeat-ngram-size", "3")
        generate(page, words[2])
        chips = page.locator("#chips").inner_text()
        assert "The cat sat on the mat" not in chips and "bed" in chips
        set_number(page, "scrub", "7")
        expect_hits(page, 1, words[1])
        set_number(page, "scrub", "1")
        expect(page.locator("#stage-plot")).to_contain_text(words[0])
        page.locator("#stage-plot").screenshot(path=str(ARTIFACTS / f"samplers_no_repeat_{lang}.png"))
    finally:
        context.close()


def test_the_custom_chains_board_reorders_by_arrow_by_drag_and_by_click(browser, app_url):
    link = "?order=custom&chain=top_k,min_p,temperature&top_k=30&min_p=0.05&temperature=0.7&seed=3&max_new_tokens=3"
    context, page = opened(browser, app_url + link, 1440, 900)
    board, box = page.locator("#chain-board"), page.locator("#chain textarea")
    try:
        expect(board).to_contain_text("1. top-k")
        mounted(page, "#chain textarea")  # the link has shown the chain box (the custom order's)
        expect(box).to_have_value("top_k, min_p, temperature")
        board.locator('button[data-op="right"][data-stage="top_k"]').click()  # an arrow: top-k one later
        expect(box).to_have_value("min_p, top_k, temperature")
        expect(board).to_contain_text("1. min-p")
        # a drag: temperature dropped on the left half of min-p goes first
        target = board.locator('.ntp-chain .ntp-stage[data-stage="min_p"]')
        board.locator('.ntp-chain .ntp-stage[data-stage="temperature"]').drag_to(target, target_position={"x": 3, "y": 8})
        expect(box).to_have_value("temperature, min_p, top_k")
        board.locator('button[data-op="add"][data-stage="top_p"]').click()  # a click adds a stage at the end
        expect(box).to_have_value("temperature, min_p, top_k, top_p")
        board.locator('button[data-op="remove"][data-stage="top_p"]').click()
        expect(box).to_have_value("temperature, min_p, top_k")
        expect(board).to_contain_text("3. top-k")
        generate(page)
        text = page.locator("#stage-plot").inner_text()
        # the panels follow the chain; a stage that removes nothing after the one before folds into the note
        shown = [name for name in ("temperature", "min-p", "top-k") if f"after {name}" in text]
        assert [text.index(f"after {name}") for name in shown] == sorted(text.index(f"after {name}") for name in shown)
        assert len(shown) >= 2 and all(name in text.split("same as the stage before")[0]
                                       for name in ("temperature", "min-p", "top-k") if name not in shown), text
        board.screenshot(path=str(ARTIFACTS / "samplers_chain_board.png"))
        page.locator("#order").get_by_text("Hugging Face").first.click()
        expect(board).to_be_hidden()
    finally:
        context.close()


def test_top_h_from_its_accordion_and_from_a_link_draws_its_panel(browser, app_url):
    context, page = opened(browser, app_url + "?top_h=0.4&temperature=0.8&seed=2&max_new_tokens=4")
    try:
        open_accordion(page, page.locator("#samplers").get_by_text("More samplers", exact=False).first,
                       "#top-h input[type=number]")
        expect(page.locator("#top-h input[type=number]")).to_have_value("0.4")  # the link set it
        generate(page)
        expect(page.locator("#stage-plot")).to_contain_text("after top-H")
        set_number(page, "top-h", "0")  # off: its panel goes with it
        generate(page)
        expect(page.locator("#stage-plot")).not_to_contain_text("after top-H")
        set_number(page, "top-h", "0.2")
        page.locator("#order label").filter(has_text="vLLM").click()
        page.locator("#generate").click()
        expect(page.get_by_text("top-H is not part of the vllm order", exact=False).first).to_be_visible(timeout=30_000)
    finally:
        context.close()
