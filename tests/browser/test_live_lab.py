"""The live lab in a real browser on the embedded model: after a seeded run, moving a lesson knob redraws the step
on screen (the top candidate's probability read off the stage chart is the model's own at T 0.5 and 1.5), the run's
chips stay, the line says what it shows, Reset brings the run's step back, and Continue from here goes on from the
step on screen with the new settings."""

from __future__ import annotations

import collections
import json
import math
import re

import pytest
from playwright.sync_api import expect

from model_service.records.settings import SamplingSettings

from .conftest import ARTIFACTS, open_accordion
from .test_samplers import WATCH_STATUS, generate, opened, set_number

pytestmark = pytest.mark.browser

LINK = "?prompt=The+capital+of+France+is&temperature=1&seed=5&max_new_tokens=6"


def status_change(page, action) -> None:
    """Do `action` and wait until the run's status line has changed after it."""
    page.evaluate(WATCH_STATUS)
    action()
    page.wait_for_function("() => window.ntpStatusChanges > 0", timeout=60_000)


def drawn(page) -> None:
    """Wait until the page has drawn the last what-if it was sent (what_if.DRAW_JS marks both figures with its
    serial once Plotly has drawn them)."""
    page.wait_for_function("""() => {
      const text = document.querySelector('#what-if-figures textarea')?.value;
      if (!text) return false;
      const serial = String(JSON.parse(text).serial);
      return [...document.querySelectorAll('#stage-plot .js-plotly-plot, #draw-plot .js-plotly-plot')]
        .every((div) => div.dataset.whatIf === serial);
    }""", timeout=30_000)


def top_of_stage(page, stage: str) -> float:
    """The top candidate's probability in a stage's panel, as its bar's hover says it (the chart's own number)."""
    return page.evaluate("""(stage) => {
      const plot = document.querySelector('#stage-plot .js-plotly-plot');
      const panel = plot.layout.annotations.findIndex((a) => a.text && a.text.startsWith('after ' + stage));
      const axis = panel > 0 ? 'x' + (panel + 1) : 'x';  // the panels' titles, in the panels' order
      const bar = plot.data.find((t) => t.type === 'bar' && (t.xaxis || 'x') === axis);
      return Math.max(...bar.x);
    }""", stage)


@pytest.fixture()
def ran(browser, app_url):
    context, page = opened(browser, app_url + LINK, 1440, 900)
    try:
        generate(page)
        yield page
    finally:
        context.close()


def test_moving_temperature_redraws_the_step_with_the_models_own_numbers(ran, embedded):
    page = ran
    chips = page.locator("#chips").inner_text()
    ids = embedded.encode("The capital of France is")
    import torch

    with torch.inference_mode():
        run = list(embedded.generate("The capital of France is", SamplingSettings(temperature=1.0, seed=5),
                                     max_new_tokens=6))
        logits = embedded.model(torch.tensor([ids + [r.token_id for r in run[:5]]])).logits[0, -1].float()
    for t in (0.5, 1.5):
        status_change(page, lambda t=t: set_number(page, "temperature", str(t)))
        expect(page.locator("#run-status")).to_contain_text(f"What if T {t:g}", timeout=30_000)
        expect(page.locator("#run-status")).to_contain_text("this run drew with T 1")
        drawn(page)
        expected = float(torch.softmax(logits / t, -1).max())
        shown = top_of_stage(page, "temperature")
        assert math.isclose(shown, expected, rel_tol=2e-3), (t, shown, expected)
        assert page.locator("#chips").inner_text() == chips  # the run stays
    page.screenshot(path=str(ARTIFACTS / "live_lab_what_if.png"))
    status_change(page, lambda: page.locator("#what-if-reset").click())
    expect(page.locator("#run-status")).not_to_contain_text("What if")
    expect(page.locator("#temperature input[type=number]")).to_have_value("1")
    expect(page.locator("#what-if-row")).to_be_hidden()


def test_each_lesson_knob_moves_the_step_and_continue_goes_on_from_it(ran):
    page = ran
    for elem_id, value, says in (("top-k", "3", "top-k 3"), ("top-p", "0.5", "top-p 0.5"), ("min-p", "0.2", "min-p 0.2")):
        status_change(page, lambda elem_id=elem_id, value=value: set_number(page, elem_id, value))
        expect(page.locator("#run-status")).to_contain_text(says, timeout=30_000)
    status_change(page, lambda: page.locator("#order").get_by_text("vLLM").click())
    expect(page.locator("#run-status")).to_contain_text("order vllm", timeout=30_000)
    # scrubbing keeps the what-if: the step there, under the knobs' settings
    scrub = page.locator("#scrub input[type=number]")
    status_change(page, lambda: (scrub.fill("3"), scrub.press("Enter")))
    expect(page.locator("#run-status")).to_contain_text("step 3", timeout=30_000)
    expect(page.locator("#run-status")).to_contain_text("What if")
    first_two = page.locator("#chips .ntp-chip").all_inner_texts()[:2]
    status_change(page, lambda: page.locator("#what-if-continue").click())
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    assert page.locator("#chips .ntp-chip").all_inner_texts()[:2] == first_two
    expect(page.locator("#run-status")).not_to_contain_text("What if")


def test_a_bad_value_in_a_what_if_is_named_on_the_line_as_text_and_the_step_stays(ran):
    page = ran
    status_change(page, lambda: set_number(page, "temperature", "0.5"))
    drawn(page)
    figure = page.locator("#what-if-figures textarea").input_value()
    open_accordion(page, page.locator("#penalties").get_by_text("Penalties, bans and logit bias"),
                   "#logit-bias textarea")
    status_change(page, lambda: (page.locator("#logit-bias textarea").fill("<b>oops</b>"),
                                 page.locator("#logit-bias textarea").press("Enter")))
    status = page.locator("#run-status")
    expect(status).to_contain_text("logit bias must map token ids", timeout=30_000)
    expect(status).to_contain_text("<b>oops</b>")  # the visitor's text shown as text, not as markup
    assert status.locator("b", has_text="oops").count() == 0
    assert page.locator("#what-if-figures textarea").input_value() == figure  # the step on screen is kept
    status_change(page, lambda: (page.locator("#logit-bias textarea").fill(""),
                                 page.locator("#logit-bias textarea").press("Enter")))
    expect(status).to_contain_text("What if", timeout=30_000)


def test_in_the_presenter_view_a_host_moves_t_from_the_keyboard_and_the_step_redraws(browser, app_url):
    context, page = opened(browser, app_url + LINK + "&present=1", 1280, 720)
    try:
        generate(page)
        strip = page.locator("#temperature")
        expect(strip).to_be_visible()
        assert strip.bounding_box()["y"] < 200  # a slim strip over the run, not the settings column
        page.locator("body").click(position={"x": 5, "y": 300})  # nothing focused: the page's keys
        page.keyboard.press("t")
        page.wait_for_function("() => document.activeElement && document.activeElement.closest('#temperature')")
        status_change(page, lambda: [page.keyboard.press("ArrowDown") for _ in range(5)])
        expect(page.locator("#run-status")).to_contain_text(re.compile(r"What if T 0\.\d"), timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "live_lab_presenter_1280.png"))
        assert page.locator("#draw-plot").bounding_box()["y"] + 40 < 720  # the draw bar stays on the screen
        expect(page.locator("#sweep-t")).to_be_hidden()  # no row of its own on the projector: W plays it
        page.locator("body").click(position={"x": 5, "y": 300})
        page.keyboard.press("w")
        page.wait_for_function("() => document.querySelector('#stage-plot .js-plotly-plot').dataset.sweepT === '0.5'",
                               timeout=30_000)
        expect(page.locator("#sweep-now")).to_be_visible()  # its T floats over the stage panels while it plays
        page.screenshot(path=str(ARTIFACTS / "live_lab_presenter_sweep.png"))
        assert page.locator("#draw-plot").bounding_box()["y"] + 40 < 720
    finally:
        context.close()


def test_sweep_t_plays_every_temperature_on_the_step_and_puts_it_back(ran):
    page = ran
    before = top_of_stage(page, "temperature")
    page.locator("#sweep-t").click()
    plot = "#stage-plot .js-plotly-plot"
    page.wait_for_function(f"() => document.querySelector('{plot}').dataset.sweepT === '0.5'", timeout=30_000)
    expect(page.locator("#sweep-now")).to_have_text("T = 0.5")
    page.screenshot(path=str(ARTIFACTS / "live_lab_sweep_t.png"))
    sharp = top_of_stage(page, "temperature")
    page.wait_for_function(f"() => document.querySelector('{plot}').dataset.sweepT === '2'", timeout=30_000)
    flat = top_of_stage(page, "temperature")
    assert sharp > before > flat  # T 0.5 sharpens the run's T 1, T 2 flattens it
    page.wait_for_function(f"() => document.querySelector('{plot}').dataset.swept", timeout=30_000)
    assert top_of_stage(page, "temperature") == before  # the step on screen is back


def test_continue_from_here_is_a_branch_the_tree_and_its_link_keep(ran, browser, app_url):
    page = ran
    original = page.locator("#chips .ntp-chip").all_inner_texts()
    status_change(page, lambda: set_number(page, "temperature", "0.3"))
    expect(page.locator("#run-status")).to_contain_text("What if T 0.3", timeout=30_000)
    scrub = page.locator("#scrub input[type=number]")
    status_change(page, lambda: (scrub.fill("3"), scrub.press("Enter")))
    expect(page.locator("#run-status")).to_contain_text("step 3", timeout=30_000)
    status_change(page, lambda: page.locator("#what-if-continue").click())
    expect(page.locator("#run-status")).to_contain_text("stopped", timeout=120_000)
    branches = page.locator("#branch-list label")
    expect(branches).to_have_count(2, timeout=30_000)  # the run it continued, then this one
    expect(branches.nth(1)).to_contain_text("from step 3, temperature 0.3")
    expect(page.locator("#branch-path textarea, #branch-path input")).to_have_value("3@temperature=0.3")
    expect(page.locator("#branch-note")).to_contain_text("From step 3 on, this branch draws with temperature 0.3")
    continued = page.locator("#chips .ntp-chip").all_inner_texts()
    assert continued[:2] == original[:2]
    page.locator("#branch-link-button").click()
    link_box = page.locator("#branch-link textarea, #branch-link input")
    expect(link_box).to_have_value(re.compile(r"branch=3%40temperature%3D0\.3"), timeout=30_000)
    link = link_box.input_value()
    branches.nth(0).click()  # the run it continued, as it was
    expect(page.locator("#chips .ntp-chip")).to_have_text(original, timeout=30_000)
    context, linked = opened(browser, link, 1440, 900)  # the link alone runs the root, then the branch
    try:
        expect(linked.locator("#branch-list label")).to_have_count(2, timeout=120_000)
        expect(linked.locator("#chips .ntp-chip")).to_have_text(continued, timeout=30_000)
    finally:
        context.close()


def asked(page, bodies: list) -> collections.Counter:
    """What the page asked the server for: each request's event, named by its api name (or its function) and the
    component that triggered it, with how many times."""
    names = page.evaluate("""() => ({
      fns: Object.fromEntries(window.gradio_config.dependencies.map((d) => [d.id, d.api_name || `fn ${d.id}`])),
      ids: Object.fromEntries(window.gradio_config.components.map((c) => [c.id, c.props.elem_id || c.type])),
    })""")
    asked = collections.Counter()
    for body in bodies:
        sent = json.loads(body or "{}")
        asked[f"{names['fns'].get(str(sent.get('fn_index')), sent.get('fn_index'))} "
              f"(by {names['ids'].get(str(sent.get('trigger_id')), sent.get('trigger_id'))})"] += 1
    return asked


@pytest.mark.parametrize("present", [False, True], ids=["lab", "presenter"])
def test_a_page_at_rest_after_a_run_and_a_what_if_asks_the_server_nothing(browser, app_url, present):
    # Gradio 6 fires a Plot's (and a Textbox's) change whenever its props are handed to it again: the panels under
    # the run chart, once triggered by it, went to the server ~13 times a second per open page, at rest, for ever.
    # Then, both on one hidden button, they restarted each other (Gradio's page replays a trigger to every event it
    # starts) ~20 times a second for seconds, in the presenter view mostly (tests/unit/page/test_triggers.py)
    context, page = opened(browser, app_url + LINK + ("&present=1" if present else ""), 1280, 720)
    try:
        generate(page)
        page.wait_for_timeout(2000)  # the run's end draws the panels under its chart once
        events = []
        page.on("request", lambda r: events.append(r.post_data) if r.method == "POST" and (
            "/queue/join" in r.url or "/run/predict" in r.url) else None)
        page.wait_for_timeout(3000)
        at_rest = asked(page, events)
        status_change(page, lambda: set_number(page, "temperature", "0.5"))
        drawn(page)
        events.clear()
        page.wait_for_timeout(3000)
        after_a_move = asked(page, events)
        # the room's watcher ticks every 5 s (one /run/predict at most in 3 s); nothing else
        assert sum(at_rest.values()) <= 1 and sum(after_a_move.values()) <= 1, (at_rest, after_a_move)
    finally:
        context.close()
