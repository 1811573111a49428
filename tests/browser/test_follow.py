"""Two pages in one browser: a host opens a room, a follower opens its link and follows the host's settings and
tab, breaks away to try its own, and follows again.

How fast a follower follows (the promise: within 2 s) is a benchmark's to check, over many changes and followers,
with percentiles (bench/bench_room_follow.py, BENCHMARKS.md "Following the host"), not one timed sample here: one
sample on a loaded CI machine once read 2.07 s. These tests wait up to WAIT_MS for each change and write the
delays they saw to artifacts/follow_delays.txt, for a person reading a run."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser

WAIT_MS = 30_000  # how long to wait for a change to reach the follower at all (a loaded CI machine once took >10 s)


def set_number(page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(value)
    box.press("Enter")


def temperature(page):
    return page.locator("#temperature input[type=number]")


def open_room(host) -> str:
    """The host's page opens a room; its link."""
    host.locator("#room-button").click()  # the header's Room menu
    host.locator("#room-open").click()
    expect(host.locator("#follow-status")).to_contain_text("You host room")
    link = host.locator("#room-link textarea, #room-link input").first.input_value()
    host.keyboard.press("Escape")  # the menu closes; the room's line keeps the code and the link
    expect(host.locator("#room-panel")).to_be_hidden()
    return link


def test_a_follower_follows_the_host_breaks_away_and_comes_back(page, browser, app_url):
    host = page
    link = open_room(host)
    assert re.search(r"^http://127\.0\.0\.1:\d+/\?follow=[A-Z0-9]{5}$", link), link

    context = browser.new_context(viewport={"width": 1280, "height": 720})
    follower = context.new_page()
    try:
        follower.goto(link, wait_until="domcontentloaded")
        expect(follower.locator("#follow-status")).to_contain_text("Following room", timeout=60_000)
        expect(follower.locator("#follow-break")).to_be_visible()
        # the room's first update sets every tab's inputs, and the follower's tabs redraw from them (the toy's
        # chart): let that settle, so the figure below is the delay of one change
        time.sleep(1.0)

        set_number(host, "temperature", "0.35")
        start = time.monotonic()
        expect(temperature(follower)).to_have_value("0.35", timeout=WAIT_MS)
        followed_in = time.monotonic() - start

        host.get_by_role("tab", name="Softmax & LM head").click()
        expect(follower.get_by_role("tab", name="Softmax & LM head")).to_have_attribute(
            "aria-selected", "true", timeout=WAIT_MS)
        follower.screenshot(path=str(ARTIFACTS / "follow_follower.png"))
        host.get_by_role("tab", name="Sampling lab").click()
        expect(follower.get_by_role("tab", name="Sampling lab")).to_have_attribute(
            "aria-selected", "true", timeout=WAIT_MS)

        # break away: the follower's own settings stay while the host moves on
        follower.locator("#follow-break").click()
        expect(follower.locator("#follow-status")).to_contain_text("You broke away")
        set_number(follower, "temperature", "1.7")
        set_number(host, "temperature", "0.6")
        time.sleep(1.5)  # three of the host's publishes and seven of a follower's looks
        expect(temperature(follower)).to_have_value("1.7")

        # follow again: back to what the host shows now
        follower.locator("#follow-again").click()
        expect(temperature(follower)).to_have_value("0.6", timeout=WAIT_MS)
        expect(follower.locator("#follow-status")).to_contain_text("Following room")
        host.screenshot(path=str(ARTIFACTS / "follow_host.png"))
        note_delays(("settings", followed_in))
    finally:
        context.close()
        host.locator("#room-close").click()


def value_of(page, elem_id: str, kind: str = "input[type=number]"):
    return page.locator(f"#{elem_id} {kind}").first


def select_tab(host, follower, name: str) -> None:
    host.get_by_role("tab", name=name).click()
    expect(follower.get_by_role("tab", name=name)).to_have_attribute("aria-selected", "true", timeout=WAIT_MS)


def note_delays(*delays: tuple[str, float]) -> None:
    """Append each (change, seconds to reach the follower) to artifacts/follow_delays.txt."""
    with open(ARTIFACTS / "follow_delays.txt", "a", encoding="utf-8") as out:
        out.writelines(f"{what}: {took:.2f} s\n" for what, took in delays)


def timed(check) -> float:
    start = time.monotonic()
    check()
    return time.monotonic() - start


def test_a_follower_follows_every_tab_and_a_reloaded_host_page_keeps_its_room(page, browser, app_url):
    host = page
    link = open_room(host)
    code = link.rsplit("=", 1)[1]
    assert "room-key" not in link and ":" not in link.split("://", 1)[1].split("/", 1)[1]  # no token in the link

    context = browser.new_context(viewport={"width": 1280, "height": 720})
    follower = context.new_page()
    try:
        follower.goto(link, wait_until="domcontentloaded")
        expect(follower.locator("#follow-status")).to_contain_text("Following room", timeout=60_000)

        # the softmax toy, then the forward tab's prompt (text shown as text: the host's input reaches strangers)
        select_tab(host, follower, "Softmax & LM head")
        set_number(host, "toy-temperature", "0.35")
        toy_in = timed(lambda: expect(value_of(follower, "toy-temperature")).to_have_value("0.35", timeout=WAIT_MS))
        select_tab(host, follower, "Forward pass")
        for shown in (host, follower):  # both pages trace the lesson's prompt on the tab's select: let them finish
            expect(shown.locator("#fw-status")).to_contain_text("Traced", timeout=60_000)
        words = "Ngày xửa ngày xưa <b>bold</b>"
        host.locator("#fw-prompt textarea").fill(words)
        prompt_in = timed(lambda: expect(follower.locator("#fw-prompt textarea")).to_have_value(words, timeout=WAIT_MS))
        assert follower.locator("#fw-prompt b").count() == 0

        # the host's page reloads: it hosts the same room again and shows the room's state, not its defaults
        host.reload(wait_until="domcontentloaded")
        expect(host.locator("#follow-status")).to_contain_text(f"You host room {code}", timeout=60_000)
        expect(host.get_by_role("tab", name="Forward pass")).to_have_attribute("aria-selected", "true")
        expect(host.locator("#fw-prompt textarea")).to_have_value(words)
        time.sleep(1.5)  # three of the host's publishes: the follower still shows the host's page, not defaults
        expect(follower.locator("#fw-prompt textarea")).to_have_value(words)
        expect(follower.locator("#follow-status")).to_contain_text("Following room")

        select_tab(host, follower, "Softmax & LM head")
        expect(value_of(host, "toy-temperature")).to_have_value("0.35")
        set_number(host, "toy-temperature", "1.2")
        after_reload = timed(lambda: expect(value_of(follower, "toy-temperature")).to_have_value("1.2", timeout=WAIT_MS))
        host.screenshot(path=str(ARTIFACTS / "follow_host_reloaded.png"))
        follower.screenshot(path=str(ARTIFACTS / "follow_follower_toy.png"))
        note_delays(("toy", toy_in), ("forward prompt", prompt_in), ("toy after the reload", after_reload))
    finally:
        context.close()
        host.locator("#room-close").click()
    # the close is done (the page forgot its seat) before the reload: a reload during it may still resume the room
    expect(host.locator("#follow-bar")).to_be_hidden(timeout=WAIT_MS)
    # a closed room leaves nothing to resume: the next reload is an ordinary page
    host.reload(wait_until="domcontentloaded")
    expect(host.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
    time.sleep(1.0)
    expect(host.locator("#follow-bar")).to_be_hidden()


# the boxes a learner's phone shows, top to bottom (document coordinates), and what of the host's is on screen
PHONE = """() => {
  const box = (id) => { const e = document.getElementById(id); if (!e) return null; const r = e.getBoundingClientRect();
    return r.height ? {top: r.top + scrollY, bottom: r.bottom + scrollY, height: r.height} : null; };
  return {follower: document.body.classList.contains('ntp-follower'), focus: document.body.dataset.ntpFocus,
          ids: Object.fromEntries(['follow-bar', 'follow-break', 'scene-caption', 'chips', 'run-status', 'stage-plot',
                                   'draw-plot', 'lab-controls', 'generate', 'scene-next', 'share-button', 'present']
                                  .map(id => [id, box(id)])), width: document.documentElement.scrollWidth};
}"""


def test_a_learners_phone_shows_the_hosts_scene_then_its_chips_then_its_chart(page, browser, app_url):
    host = page
    host.goto(app_url + "?scene=l13-top-k", wait_until="domcontentloaded")  # a lab scene: its run, its stage chart
    expect(host.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    link = open_room(host)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone = context.new_page()
    try:
        phone.goto(link, wait_until="domcontentloaded")
        expect(phone.locator("#follow-status")).to_contain_text("Following room", timeout=60_000)
        expect(phone.locator("#scene-caption")).to_contain_text("top-k", timeout=WAIT_MS)
        expect(phone.locator("#chips .ntp-chip").first).to_be_visible(timeout=WAIT_MS)
        phone.wait_for_timeout(1500)  # the cue's scroll
        shown = phone.evaluate(PHONE)
        ids = shown["ids"]
        assert shown["follower"] and shown["focus"] == "stage-plot"
        for hidden in ("lab-controls", "generate", "scene-next", "share-button", "present"):  # the host's controls
            assert ids[hidden] is None, (hidden, ids[hidden])
        assert ids["follow-break"]["height"] >= 44  # a large tap target
        # in the order the host talks: the caption, the step's chips, then the chart the scene is about
        assert ids["scene-caption"]["bottom"] <= ids["chips"]["top"] < ids["stage-plot"]["top"]
        assert ids["stage-plot"]["top"] < ids["draw-plot"]["top"]
        assert ids["chips"]["bottom"] <= 844  # the chips on the first screen
        assert shown["width"] <= 390
        phone.screenshot(path=str(ARTIFACTS / "follow_phone_390.png"))

        host.locator("#scene-next").click()  # the host moves on: the phone's caption follows
        expect(phone.locator("#scene-caption")).to_contain_text("top-p", timeout=WAIT_MS)

        phone.locator("#follow-break").tap()  # breaking away gives the learner the lab's controls back
        expect(phone.locator("#follow-status")).to_contain_text("You broke away")
        expect(phone.locator("#generate")).to_be_visible()
        assert not phone.evaluate("document.body.classList.contains('ntp-follower')")
    finally:
        context.close()
        host.locator("#room-close").click()
