"""The toy softmax of Lesson 13: the lesson's figures from the asset, shift invariance, T = 0,
bad edits, and the Gradio wiring (built and called without a model or a browser)."""

from __future__ import annotations

import json
import math

import pytest

from playground.softmax.toy import (
    fmt_exp,
    fmt_prob,
    load_toy,
    parse_rows,
    softmax_figure,
    softmax_table,
    table_markdown,
)


@pytest.fixture(scope="module")
def toy():
    return load_toy()


def paris(table) -> float:
    return next(r["prob"] for r in table["rows"] if r["token"] == " Paris")


def test_the_lessons_three_figures(toy):
    prompt, tokens, logits = toy
    assert prompt == "The capital of France is" and len(tokens) == 5 and " Paris" in tokens
    base = softmax_table(logits, tokens=tokens)
    assert round(base["exp_sum"], 1) == 200.9
    assert round(100 * paris(softmax_table(logits, temperature=0.5, tokens=tokens))) == 96
    assert round(100 * paris(softmax_table(logits, temperature=1.5, tokens=tokens))) == 57
    # and as a class reads them off the screen
    assert "**200.9**" in table_markdown(base)
    assert "**96%**" in table_markdown(softmax_table(logits, temperature=0.5, tokens=tokens))
    assert "**57%**" in table_markdown(softmax_table(logits, temperature=1.5, tokens=tokens))


def test_rows_hold_every_intermediate(toy):
    _, tokens, logits = toy
    t = softmax_table(logits, shift=1.0, temperature=0.5, tokens=tokens)
    for r, x in zip(t["rows"], logits):
        assert r["shifted"] == pytest.approx(x + 1) and r["scaled"] == pytest.approx((x + 1) / 0.5)
        assert r["exp"] == pytest.approx(math.exp((x + 1) / 0.5))
        assert r["prob"] == pytest.approx(r["exp"] / t["exp_sum"])
    assert sum(r["prob"] for r in t["rows"]) == pytest.approx(1.0)
    json.dumps(t, allow_nan=False)  # JSON-able as is


@pytest.mark.parametrize("shift", [-10, -3.5, 2, 10])
def test_shift_changes_exp_and_sum_but_not_probabilities(toy, shift):
    _, tokens, logits = toy
    base = softmax_table(logits, tokens=tokens)
    moved = softmax_table(logits, shift=shift, tokens=tokens)
    assert [r["prob"] for r in moved["rows"]] == pytest.approx([r["prob"] for r in base["rows"]], rel=1e-12)
    assert moved["exp_sum"] == pytest.approx(base["exp_sum"] * math.exp(shift))
    assert moved["rows"][0]["exp"] != pytest.approx(base["rows"][0]["exp"])
    assert "probabilities do not" in moved["note"]


def test_huge_logits_do_not_overflow_and_still_show_e_to_the_x():
    t = softmax_table([1000.0, 999.0], tokens=["a", "b"])
    assert t["overflow"] and t["exp_sum"] is None and t["rows"][0]["exp"] is None
    assert [r["prob"] for r in t["rows"]] == pytest.approx([1 / (1 + math.e**-1), 1 / (1 + math.e)])
    md = table_markdown(t)
    assert "× 10⁴³⁴" in md and "e^(x − max)" in md  # e^1000 ≈ 1.97 × 10^434
    json.dumps(t, allow_nan=False)
    softmax_figure(t)


def test_temperature_zero_is_greedy(toy):
    _, tokens, logits = toy
    t = softmax_table(logits, temperature=0, tokens=tokens)
    assert t["greedy"] and [r["prob"] for r in t["rows"]] == [1.0, 0, 0, 0, 0]
    assert t["exp_sum"] is None and all(r["exp"] is None for r in t["rows"])
    assert "greedy" in t["note"] and "greedy" in table_markdown(t)
    tie = softmax_table([1.0, 3.0, 3.0], temperature=0)  # first of the tied maxima, like argmax
    assert [r["prob"] for r in tie["rows"]] == [0, 1, 0]
    softmax_figure(t)


def test_temperature_sharpens_and_flattens(toy):
    _, tokens, logits = toy
    p = [paris(softmax_table(logits, temperature=T, tokens=tokens)) for T in (0.05, 0.5, 1, 1.5, 2)]
    assert p == sorted(p, reverse=True) and p[0] > 0.99


def test_user_edits_are_parsed_robustly():
    tokens, logits = parse_rows([["␣Paris", "5"], [" the", " −1,5 "], ["a", 2], ["", None], [None, ""]])
    assert tokens == ["␣Paris", " the", "a"] and logits == [5.0, -1.5, 2.0]


@pytest.mark.parametrize(
    "value, message",
    [("abc", "must be a number"), ("", "is empty"), (None, "is empty"), ("inf", "must be a number between"), ("1e9", "between -1e\\+06 and 1e\\+06")],
)
def test_a_bad_logit_names_its_token(value, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_rows([[" Paris", 5], [" Lyon", value]])
    assert "␣Lyon" in str(err.value)


def test_bad_settings():
    with pytest.raises(ValueError, match="temperature"):
        softmax_table([1.0, 2.0], temperature=-1)
    with pytest.raises(ValueError, match="at least one"):
        parse_rows([])


def test_formats_for_a_projector():
    assert fmt_exp(math.log(200.9)) == "200.9" and fmt_exp(1.4) == "4.06" and fmt_exp(-1) == "0.368"
    assert fmt_exp(100) == "2.7 × 10⁴³" and fmt_exp(-10) == "4.5 × 10⁻⁵"
    assert [fmt_prob(p) for p in (0.9599, 0.5674, 0.074, 0.0004, 0)] == ["96%", "57%", "7.4%", "<0.1%", "0%"]


def test_figure_has_two_panels_and_the_sum(toy):
    _, tokens, logits = toy
    fig = softmax_figure(softmax_table(logits, tokens=tokens))
    assert len(fig.data) == 2 and list(fig.data[0].x)[0] == "␣Paris"
    assert any("Σ = 200.9" in (a.text or "") for a in fig.layout.annotations)
    assert tuple(fig.layout.yaxis2.range) == (0, 1.12)
    assert fig.layout.template.layout.to_plotly_json() == {}  # template="none": small payloads


# ----------------------------------------------------------------------------- the Gradio tab


def test_tab_builds_without_a_model_and_handles_bad_edits():
    import gradio as gr

    from playground.softmax.toy_panel import build_toy_panel, toy_softmax

    with gr.Blocks() as demo:
        with gr.Tab("Softmax"):
            lesson = build_toy_panel()
    assert isinstance(lesson.logits, gr.Dataframe) and isinstance(lesson.plot, gr.Plot)
    assert lesson.temperature.minimum == 0 and lesson.temperature.maximum == 2
    assert (lesson.shift.minimum, lesson.shift.maximum) == (-10, 10)
    apis = [d.api_name for d in demo.fns.values() if d.api_visibility == "public"]
    assert apis == ["toy_softmax"]

    md, fig, table = toy_softmax([["␣Paris", 5.0], ["␣the", "3.2"]], 0, 0.5)
    assert "␣Paris" in md and table["rows"][0]["token"] == " Paris" and len(fig.data) == 2
    with pytest.warns(UserWarning, match="␣Paris"):  # gr.Warning outside an event is a warning
        md, fig, table = toy_softmax([["␣Paris", "five"]], 0, 1)
    assert "must be a number" in md and table["error"].startswith("the logit of '␣Paris' must be a number")
    assert fig == gr.skip()


def test_mapping_input_and_repeated_or_html_tokens_keep_their_own_bars():
    t = softmax_table({"a": 1.0, "<br>": 2.0})
    assert t["tokens"] == ["a", "<br>"] and t["top"] == 1
    fig = softmax_figure(softmax_table([1.0, 2.0, 3.0], tokens=["x", "x", "<b>"]))
    assert list(fig.data[1].x) == ["x", "x (2)", "&lt;b&gt;"]


# ----------------------------------------------------------------------------- two languages


def test_vietnamese_table_figure_and_note(toy):
    _, tokens, logits = toy
    t = softmax_table(logits, shift=2, temperature=0.5, tokens=tokens, lang="vi")
    assert t["note"] == ("Mọi logit được cộng cùng một số: e^x và tổng thay đổi, xác suất thì không; "
                         "T = 0.5 < 1 kéo giãn khoảng cách: token đứng đầu được thêm xác suất.")
    md = table_markdown(t, "vi")
    assert md.splitlines()[0] == "| token | logit x | x + 2 | (x + 2) / 0.5 | e^((x + 2) / 0.5) | xác suất |"
    assert "**96%**" in md and "probability" not in md  # the numbers as the lesson prints them
    fig = softmax_figure(t, lang="vi")
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:2] == ["e^((x + số cộng) / T)", "xác suất = e^… / Σ"]
    # English stays the default, word for word
    en = softmax_table(logits, shift=2, temperature=0.5, tokens=tokens)
    assert en["note"].startswith("Every logit moved by the same amount") and "| probability |" in table_markdown(en)
    assert [a.text for a in softmax_figure(en).layout.annotations][:2] == ["e^((x + shift) / T)", "probability = e^… / Σ"]


def test_vietnamese_greedy_and_overflow(toy):
    _, tokens, logits = toy
    greedy = softmax_table(logits, temperature=0, tokens=tokens, lang="vi")
    assert greedy["note"] == "T = 0 là greedy: không có softmax, logit cao nhất nhận xác suất 1."
    texts = [a.text for a in softmax_figure(greedy, lang="vi").layout.annotations]
    assert "e^(x / T): không có khi T = 0" in texts and "T = 0 → greedy:<br>lấy logit cao nhất" in texts
    huge = softmax_table([1000.0, 999.0], tokens=["a", "b"], lang="vi")
    assert "quá lớn cho kiểu float" in table_markdown(huge, "vi")
    assert "(e^x bị tràn số)" in softmax_figure(huge, lang="vi").layout.annotations[0].text
    assert softmax_table([1.0], lang="vi")["note"] == "Chỉ hiệu số giữa các logit là quan trọng."


@pytest.mark.parametrize("rows, message", [
    ([["␣Lyon", "abc"]], "logit của '␣Lyon' phải là một số từ -1e+06 đến 1e+06, nhận được 'abc'"),
    ([["␣Lyon", " "]], "logit của '␣Lyon' đang trống: hãy gõ một số, ví dụ 2.5"),
    ([["␣Lyon", True]], "logit của '␣Lyon' phải là một số, nhận được True"),
    ([], "bảng đang trống: hãy thêm ít nhất một token kèm logit của nó"),
])
def test_a_bad_edit_is_explained_in_vietnamese(rows, message):
    with pytest.raises(ValueError) as err:
        parse_rows(rows, "vi")
    assert str(err.value) == message


def test_english_error_messages_are_unchanged():
    with pytest.raises(ValueError) as err:
        parse_rows([["␣Lyon", "abc"]])
    assert str(err.value) == "the logit of '␣Lyon' must be a number between -1e+06 and 1e+06, got 'abc'"


def test_the_panel_redraws_in_the_pages_language_without_a_toast():
    import gradio as gr

    from playground.softmax.toy_panel import build_toy_panel, toy_rows

    with gr.Blocks() as demo:
        language = gr.Radio(["en", "vi"], value="en")
        lesson = build_toy_panel(language=language)
    redraws = [f for f in demo.fns.values() if (language._id, "change") in f.targets]
    assert len(redraws) == 1 and redraws[0].api_visibility == "private"
    _, tokens, logits = load_toy()
    out = redraws[0].fn("vi", toy_rows(tokens, logits), 0, 1.5)
    intro = next(v for k, v in out.items() if k not in (lesson.markdown, lesson.plot, lesson.numbers))
    assert intro.startswith("**Softmax trên một vocabulary đồ chơi**") and "(Paris 96%)" in intro
    assert "| xác suất |" in out[lesson.markdown] and "T = 1.5 > 1 ép khoảng cách lại" in out[lesson.markdown]
    assert out[lesson.plot].layout.annotations[1].text == "xác suất = e^… / Σ"
    english = redraws[0].fn("en", toy_rows(tokens, logits), 0, 1.5)
    assert "| probability |" in english[lesson.markdown]
    # a bad edit on screen: the message is redrawn in the new language, with no second toast
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bad = redraws[0].fn("vi", [["␣Paris", "năm"]], 0, 1)
    assert "phải là một số" in bad[lesson.markdown] and bad[lesson.plot] == gr.skip()
    # the edit handler takes the language as its last input
    edit = next(f for f in demo.fns.values() if f.api_name == "toy_softmax")
    assert edit.inputs[-1] is language
    assert "| xác suất |" in edit.fn(toy_rows(tokens, logits), 0, 1, "vi")[lesson.markdown]


def test_a_redraw_is_remembered_but_a_bad_edit_is_said_each_time(toy):
    from playground.softmax.toy_panel import remembered_views, toy_rows, toy_softmax

    _, tokens, logits = toy
    rows = toy_rows(tokens, logits)
    first = remembered_views(rows, 0, 1.0, "vi")
    assert remembered_views([list(r) for r in rows], 0, 1.0, "vi") is first  # every learner's page load
    assert remembered_views(rows, 0, 1.0, "en") is not first and remembered_views(rows, 0, 0.5, "vi") is not first
    assert remembered_views([["a", 1]], 0, 1.0)[3] is None
    assert "must be a number" in remembered_views([["a", True]], 0, 1.0)[3]  # True == 1 as a key, not as a logit
    with pytest.warns(UserWarning) as toasts:
        toy_softmax([["a", "x"]])
        toy_softmax([["a", "x"]])
    assert len(toasts) == 2
