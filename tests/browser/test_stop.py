"""Stop means stop, in a real browser, with the room's scheduler in a process of its own (the CPU default): after
the click no chip beyond the step in flight shows (the page is at most one update behind the model, and Stop
hides what of that update is still on its way), the run freezes on the chips the page showed, in the lab, the
presenter view, Compare and a branch; and Stop before the first token says so."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..conftest import launched

pytestmark = pytest.mark.browser
LONG_RUN = "max_new_tokens=120&temperature=0.8&seed=3"
# Armed before the click that starts the stream: in the task that first shows `at_least` chips (the most visible in
# any of the `groups`: Compare's columns), count them and press Stop; from then on keep the most chips ever visible.
# (Pressing from the test's side, a round trip after it saw them, let a busy machine's page draw the whole of a short
# stream first: a CI run's "Stop on the first chips" pressed on all 24.)
ARM = """([groups, chips, button, atLeast]) => {
  const visible = () => Math.max(0, ...[...document.querySelectorAll(groups)].map(
    g => [...g.querySelectorAll(chips)].filter(c => c.checkVisibility()).length));
  delete window.__shown;
  const watch = new MutationObserver(() => {
    const now = visible();
    if (window.__shown === undefined && now >= atLeast) {
      window.__shown = window.__most = now;
      document.querySelector(button).click();
    } else if (window.__shown !== undefined) {
      window.__most = Math.max(window.__most, now);
    }
  });
  watch.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


@pytest.fixture(scope="module")
def process_url():
    from model_service import ModelService
    from model_service.models.switching import LoadingService
    from playground.page import build_demo

    service = ModelService.load(scheduler="process")
    try:
        with launched(build_demo(LoadingService(service=service))) as url:
            yield url
    finally:
        service.close()


def stop_event(page, button: str) -> int:
    """The fn_index of the click of the button with elem_id `button` (its requests carry it)."""
    return page.evaluate("""(button) => {
      const config = window.gradio_config, id = config.components.find(c => c.props.elem_id === button).id;
      return config.dependencies.find(d => d.targets.some(([target, event]) => target === id && event === "click")).id;
    }""", button)


def stop_lands_late(page, button: str = "stop", status: str = "#run-status", ended: str = "reached max new tokens"):
    """Hold the request of every press of the Stop `button` (its elem_id) in the page until the run on screen has
    ended on the server (`status` says `ended`): its last update reaches the page after the press (the race a busy
    machine makes). Returns what lets them go (stop_pressed calls it). Only the Stop's requests wait: the page's
    other requests (its "I have these chips") go on, and the route's handler returns at once (a sleep there would
    hold every other route and the test's own calls)."""
    stop = stop_event(page, button)
    held = []

    def hold(route):
        if (route.request.post_data_json or {}).get("fn_index") == stop:
            held.append(route)
        else:
            route.continue_()

    def release() -> None:
        try:
            # the press's request reaches this handler some time after the click (the page's other requests queue
            # before it): release only once it is held, or it is never let go (a CI run saw its Stop held for good)
            for _ in range(1200):
                if held:
                    break
                page.wait_for_timeout(50)
            expect(page.locator(status)).to_contain_text(ended, timeout=120_000)
        finally:
            while held:
                held.pop(0).continue_()

    page.route("**/run/predict*", hold)
    return release


def open_page(browser, url):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
    return page


def arm_stop(page, groups: str, chips: str, button: str, at_least: int) -> list:
    """Have the page's own script press Stop once `at_least` chips show (call it before the click that starts).
    Returns the list that gets what the press's request says the page had ("tag:count", the Stop's js)."""
    page.evaluate(ARM, [groups, chips, button, at_least])
    stop, said = stop_event(page, button.lstrip("#")), []

    def heard(request) -> None:
        if "/run/predict" in request.url and (request.post_data_json or {}).get("fn_index") == stop:
            said.append(request.post_data_json["data"][-1])

    page.on("request", heard)
    return said


def stop_pressed(page, said: list, release=None) -> tuple[int, int]:
    """Wait for the armed Stop's press; `release`: a held Stop's (stop_lands_late). Returns the chips visible at the
    click and those its js counted as it ran: the same, or one update more (Gradio runs an event's js a moment
    after the click; that update is the one in flight, the most the page may show after a Stop)."""
    page.wait_for_function("window.__shown !== undefined", timeout=120_000)
    for _ in range(600):
        if said:
            break
        page.wait_for_timeout(50)
    if release is not None:
        release()
    page.wait_for_timeout(3000)
    shown, counted = page.evaluate("window.__shown"), int(said[0].rsplit(":", 1)[1])
    most = page.evaluate("window.__most")
    print(f"{shown} at the click, {counted} counted by Stop's js, at most {most} shown after")
    assert shown <= counted <= shown + 1 and most <= counted
    return shown, counted


@pytest.mark.parametrize("view", ["", "present=1&"], ids=["lab", "presenter"])
def test_stop_freezes_the_lab_on_the_chips_shown(browser, process_url, view):
    page = open_page(browser, f"{process_url}?{view}{LONG_RUN}")
    said = arm_stop(page, "#chips", ".ntp-chip", "#stop", 15)
    page.locator("#generate").click()
    _, cut = stop_pressed(page, said)
    status = page.locator("#run-status")
    expect(status).to_contain_text("stopped by you at step", timeout=30_000)
    expect(page.locator("#chips .ntp-chip")).to_have_count(cut)  # the run is cut there, on the server too
    expect(status).to_contain_text(f"stopped by you at step {cut}")
    expect(status).to_contain_text(f"Step {cut} of {cut}")
    expect(page.locator("#scrub")).to_be_visible()
    page.context.close()


def test_stop_on_the_first_chips_of_a_run_that_ends_at_once_cuts_it_there(browser, process_url):
    # the model ends long before the page has drawn the first update, so the last update (every chip) leaves as
    # the page takes in the first: a Stop pressed on the first chips lands after the stream ended, and must still
    # cut the run where the page was (the last update's chips keep the run's tag: the page hides the rest)
    page = open_page(browser, f"{process_url}?max_new_tokens=24&temperature=0.8&seed=3")
    release = stop_lands_late(page)
    said = arm_stop(page, "#chips", ".ntp-chip", "#stop", 1)
    page.locator("#generate").click()
    _, cut = stop_pressed(page, said, release)
    assert cut < 24, "the page had the whole run at the press: nothing was left to cut"
    expect(page.locator("#run-status")).to_contain_text("stopped by you at step", timeout=30_000)
    expect(page.locator("#chips .ntp-chip")).to_have_count(cut)
    expect(page.locator("#run-status")).to_contain_text(f"stopped by you at step {cut}")
    page.context.close()


def test_stop_before_the_first_token_says_so(browser, process_url):
    page = open_page(browser, f"{process_url}?{LONG_RUN}")
    # press Stop as soon as the new run's first update shows ("Starting a new run…"): no chip is on the page yet
    page.evaluate("""() => { window.__pressed = null; new MutationObserver(() => {
        if (window.__pressed === null && document.querySelector('#run-status').innerText.includes('Starting a new run')) {
          window.__pressed = document.querySelectorAll('#chips .ntp-chip').length; document.querySelector('#stop').click(); } })
      .observe(document.body, {subtree: true, childList: true, characterData: true}); }""")
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("stopped by you before the first token", timeout=30_000)
    assert page.evaluate("window.__pressed") == 0
    page.wait_for_timeout(2000)
    expect(page.locator("#chips .ntp-chip")).to_have_count(0)
    expect(page.locator("#run-status")).to_have_text("stopped by you before the first token")
    page.context.close()


def test_stop_freezes_compare_on_the_steps_shown(browser, process_url):
    page = open_page(browser, process_url)
    page.get_by_role("tab", name="Compare").click()
    page.locator("#compare-max-new input[type=number]").fill("120")
    page.locator("#compare-max-new input[type=number]").press("Enter")
    said = arm_stop(page, "#compare-texts .ntp-col", ".ntp-ctok", "#compare-stop", 15)
    page.locator("#compare-run").click()
    _, cut = stop_pressed(page, said)
    status = page.locator("#compare-status")
    expect(status).to_contain_text(f"stopped by you at step {cut}", timeout=30_000)
    steps = [page.locator(f"#compare-col-{c} .ntp-ctok").count() for c in "AB"]
    assert max(steps) == cut  # every column cut there (one that ended before keeps its end)
    expect(page.locator("#compare-scrub")).to_be_visible()
    page.context.close()


def test_stop_on_the_first_steps_of_a_comparison_that_ends_at_once_cuts_it_there(browser, process_url):
    page = open_page(browser, process_url)
    page.get_by_role("tab", name="Compare").click()
    page.locator("#compare-max-new input[type=number]").fill("24")
    page.locator("#compare-max-new input[type=number]").press("Enter")
    release = stop_lands_late(page, "compare-stop", "#compare-status", "done")
    said = arm_stop(page, "#compare-texts .ntp-col", ".ntp-ctok", "#compare-stop", 1)
    page.locator("#compare-run").click()
    _, cut = stop_pressed(page, said, release)
    assert cut < 24, "the page had the whole comparison at the press: nothing was left to cut"
    expect(page.locator("#compare-status")).to_contain_text(f"stopped by you at step {cut}", timeout=30_000)
    assert max(page.locator(f"#compare-col-{c} .ntp-ctok").count() for c in "AB") == cut
    page.context.close()


def stop_a_branch(browser, url: str, at_least: int, late: bool = False) -> tuple:
    """A run of `url`'s settings, a branch forced at its step 3, and Stop pressed by the page's own script once the
    branch shows `at_least` chips (held `late` in the page: stop_lands_late); returns (page, the chips it was cut at)."""
    page = open_page(browser, url)
    max_new = int(re.search(r"max_new_tokens=(\d+)", url).group(1))
    page.locator("#generate").click()
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    box = page.locator("#scrub input[type=number]")
    box.fill("3")
    box.press("Enter")
    expect(page.locator("#run-status")).to_contain_text("Step 3 of", timeout=60_000)
    page.locator("#branch-candidate input").click()
    page.get_by_role("option").nth(1).click()
    parent = page.locator("#chips .ntp-chips").get_attribute("data-run") or ""
    # late: until the branch has ended (the run it is forced from said "reached max new tokens" already)
    release = stop_lands_late(page, ended=f"Step {max_new} of {max_new}") if late else None
    # the branch's streaming chips carry a tag of their own (the parent's last chips keep the parent's: Stop on
    # them would reach the finished parent, before the branch began)
    said = arm_stop(page, f'#chips .ntp-chips[data-run]:not([data-run="{parent}"])', ".ntp-chip", "#stop", at_least)
    page.locator("#branch-force").click()
    _, cut = stop_pressed(page, said, release)
    assert cut < max_new, "the page had the whole branch at the press: nothing was left to cut"
    return page, cut


def expect_branch_stopped_at(page, cut: int) -> None:
    """The lab and the tree keep the branch as far as the page had it when Stop's js ran."""
    expect(page.locator("#run-status")).to_contain_text("stopped by you at step", timeout=30_000)
    expect(page.locator("#chips .ntp-chip")).to_have_count(cut)
    expect(page.locator("#run-status")).to_contain_text(f"stopped by you at step {cut}")
    expect(page.locator("#branch-list")).to_contain_text(f"{cut} tokens")
    page.context.close()


def test_stop_freezes_a_branch_on_the_chips_shown(browser, process_url):
    page, shown = stop_a_branch(browser, f"{process_url}?max_new_tokens=160&temperature=0.8&seed=3", 12)
    expect_branch_stopped_at(page, shown)


def test_stop_on_the_first_chips_of_a_branch_that_ends_at_once_cuts_it_there(browser, process_url):
    # as for a short run: the branch's last update leaves as the page takes in its first, and a Stop on that one
    # lands after the branch ended; the lab and the tree keep what the page showed (branch_panel.cut_short)
    page, shown = stop_a_branch(browser, f"{process_url}?max_new_tokens=24&temperature=0.8&seed=3", 3, late=True)
    expect_branch_stopped_at(page, shown)
