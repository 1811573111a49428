"""The Softmax & LM head tab in a Vietnamese browser: the lesson, the toy table and figure, and the LM
head on the real model, all in Vietnamese; the header's picker switches them to English without asking
the model again (the LM head is redrawn from the record the panel kept)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser
REDRAW = 30_000  # ms for a server redraw: on a loaded 2-core machine the queue may take longer than 5 s


def test_the_tab_in_vietnamese_then_english_without_a_new_run(browser, app_url, embedded, monkeypatch):
    calls = []
    real = embedded._lm_head  # every client's lm_head() ends here (model_service/client.py)
    monkeypatch.setattr(embedded, "_lm_head", lambda *a: calls.append(a) or real(*a))
    context = browser.new_context(locale="vi-VN", viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    try:
        page.goto(app_url, wait_until="domcontentloaded")
        expect(page.locator("#model-status")).to_contain_text("Mô hình:", timeout=60_000)
        assert page.evaluate("document.documentElement.lang") == "vi"
        page.get_by_role("tab", name="Softmax & LM head").click()

        # the toy: lesson, controls, table and figure
        expect(page.locator("#toy-intro")).to_contain_text("Softmax trên một vocabulary đồ chơi", timeout=REDRAW)
        expect(page.locator("#toy-intro")).to_contain_text("(Paris 96%)", timeout=REDRAW)
        expect(page.locator("#toy-shift")).to_contain_text("Cộng vào mọi logit", timeout=REDRAW)
        expect(page.locator("#toy-temperature")).to_contain_text("0 = greedy (lấy token cao nhất)", timeout=REDRAW)
        expect(page.locator("#toy-logits")).to_contain_text("Vocabulary đồ chơi: sửa logit nào cũng được", timeout=REDRAW)
        expect(page.locator("#toy-table")).to_contain_text("xác suất", timeout=REDRAW)
        expect(page.locator("#toy-plot")).to_contain_text("xác suất = e^… / Σ", timeout=REDRAW)
        shift = page.locator("#toy-shift input[type=number]")
        shift.fill("2")
        shift.press("Enter")
        expect(page.locator("#toy-table")).to_contain_text("Mọi logit được cộng cùng một số", timeout=REDRAW)
        expect(page.locator("#toy-plot")).to_contain_text("e^((x + số cộng) / T)", timeout=REDRAW)

        # the LM head: one run on the real model
        expect(page.locator("#lm-head-lesson")).to_contain_text("LM head trên mô hình thật", timeout=REDRAW)
        expect(page.locator("#lm-head-plot")).to_contain_text("sẽ hiện ở đây", timeout=REDRAW)
        page.locator("#lm-head-show").click()
        summary, plot = page.locator("#lm-head-summary"), page.locator("#lm-head-plot")
        expect(summary).to_contain_text("Ở cuối prompt của lab:", timeout=60_000)
        expect(summary).to_contain_text("một ma trận 49,152 × 576", timeout=REDRAW)
        expect(summary).to_contain_text("logit của mô hình", timeout=REDRAW)
        expect(plot).to_contain_text("logit = h · w_hàng", timeout=REDRAW)
        expect(plot).to_contain_text("cho mọi token", timeout=REDRAW)
        # the lab's prompt is the Vietnamese lesson prompt on this page: its best candidate is the model's call
        expect(plot.locator(".ytick")).not_to_have_count(0, timeout=REDRAW)
        assert len(calls) == 1
        page.screenshot(path=str(ARTIFACTS / "softmax_vi_1440.png"), full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "softmax_vi_390.png"), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 1000})

        # the header's picker: everything back in English, the same numbers, no second run
        page.locator("#language").get_by_text("English").click()
        expect(summary).to_contain_text("At the end of the lab's prompt:", timeout=REDRAW)
        expect(summary).to_contain_text("a 49,152 × 576 matrix", timeout=REDRAW)
        expect(summary).to_contain_text("model's logit", timeout=REDRAW)
        expect(plot).to_contain_text("logit = h · w_row", timeout=REDRAW)
        expect(plot).to_contain_text("for every token", timeout=REDRAW)
        expect(page.locator("#lm-head-lesson")).to_contain_text("The LM head on the real model", timeout=REDRAW)
        expect(page.locator("#toy-intro")).to_contain_text("Softmax on a toy vocabulary", timeout=REDRAW)
        # the shift typed above is kept
        expect(page.locator("#toy-table")).to_contain_text("Every logit moved by the same amount", timeout=REDRAW)
        expect(page.locator("#toy-plot")).to_contain_text("e^((x + shift) / T)", timeout=REDRAW)
        expect(page.locator("#toy-shift")).to_contain_text("Shift every logit by", timeout=REDRAW)
        assert page.evaluate("document.documentElement.lang") == "en"
        for words in ("một ma trận", "xác suất", "mô hình thật"):
            expect(page.locator("#tabs")).not_to_contain_text(words)
        assert len(calls) == 1
    finally:
        context.close()


MOVE = """([id, value]) => {  // as a drag does: the range's value, then its input event
  const input = document.querySelector(`#${id} input[type=range]`);
  Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(input, String(value));
  input.dispatchEvent(new Event('input', {bubbles: true}));
}"""
PROBS = "() => document.querySelector('#toy-plot .js-plotly-plot').data[1].y.map(Number)"


def test_the_toy_follows_its_sliders_in_the_page_with_no_server_round_trip(browser, app_url):
    """The page redraws the bars, Σ and the table itself while the sliders move (playground/softmax/toy_live.py): with
    every request to the server held, the numbers still follow, and they are toy.softmax_table's."""
    from playground.softmax.toy import fmt_exp, fmt_prob, load_toy, softmax_table

    _, tokens, logits = load_toy()
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    try:
        page.goto(app_url + "?tab=softmax", wait_until="domcontentloaded")
        expect(page.locator("#toy-table")).to_contain_text("200.9", timeout=60_000)
        page.wait_for_function("() => document.querySelector('#toy-plot .js-plotly-plot')?.data?.length === 2")
        page.route("**/gradio_api/**", lambda route: None)  # the server never hears of the moves below
        for shift, t in ((0, 0.5), (0, 1.5), (2, 1.5)):
            page.evaluate(MOVE, ["toy-shift", shift])
            page.evaluate(MOVE, ["toy-temperature", t])
            table = softmax_table(logits, shift, t, tokens=tokens)
            expected = [r["prob"] for r in table["rows"]]
            assert page.evaluate(PROBS) == pytest.approx(expected, abs=1e-9), (shift, t)
            expect(page.locator("#toy-table")).to_contain_text(fmt_prob(expected[0]))
            expect(page.locator("#toy-table")).to_contain_text(fmt_exp(table["log_exp_sum"]))
            expect(page.locator("#toy-plot")).to_contain_text(f"Σ = {fmt_exp(table['log_exp_sum'])}")
        expect(page.locator("#toy-table")).to_contain_text("x + 2")  # the shift's column, as the server writes it
        page.screenshot(path=str(ARTIFACTS / "toy_live.png"))
    finally:
        context.close()
