"""A room's state: the whole page as the host's page publishes it (every tab's link fields), checked like a link
before a follower applies it."""

import gradio as gr
import pytest

from playground import limits
from playground.common.lab_link import LINK_DEFAULTS
from playground.lab.deep_link import CONTROLS
from playground.workshop.follow.seat import Seat, bar_text
from playground.workshop.follow.state import defaults, follower_values, host_fields, page_state, parse_state
from playground.workshop.links import DEFAULTS, TABS
from playground.workshop.page_state import PageState

LAB = {name: LINK_DEFAULTS[name] for name in CONTROLS}
ENGINE = [["Bonjour <b>", 0.5, 3, 0.9, 0.0, "vllm", "7", 12, "", 1.1, 0.3, 0, ""],
          ["Hi", 1.0, 0, 1.0, 0.05, "hf", "", 8, ".", 1, 0, 0, ""]]
EVERY_TAB = {  # a value other than the default for every tab's inputs
    **LAB, "prompt": "Hello <b>", "temperature": 0.5, "top_k": 7, "seed": "3", "order": "vllm",
    "toy_logits": [1.0, 2.0, 3.5, -1.0, 0.25], "toy_shift": 2.5, "toy_temperature": 0.4, "engine": ENGINE,
    "fw_prompt": "Ngày xửa ngày xưa <i>", "fw_chat": True, "fw_block": 7, "fw_head": 2,
    "compare_prompt": "So sánh <b>", "compare_seed": "9", "compare_max_new": 7,
    "compare_table": [[0.5, 0, 1.0, 0.0, "hf", 1.0, 0.0, 0.0, ""], [1.0, 0, 1.0, 0.0, "hf", 1.0, 0.0, 0.0, ""],
                      [0.3, 0, 1.0, 0.0, "vllm", 1.0, 0.5, 0.0, ""]],
}


def test_every_tabs_inputs_round_trip_with_the_tab_and_step():
    state = page_state({**EVERY_TAB, "tab": "engine"}, 4)
    assert state["tab"] == "engine" and state["step"] == "4" and "top_p" not in state  # defaults left out
    assert {"toy_logits", "toy_shift", "toy_temperature", "engine", "fw_prompt", "fw_chat", "fw_block", "compare_prompt",
            "compare_seed", "compare_columns", "compare_c"} <= set(state)
    parsed, tab, step, problems = parse_state(state)
    assert (tab, step, problems) == ("engine", 4, [])
    assert {name: parsed[name] for name in EVERY_TAB} == EVERY_TAB


def test_fields_the_host_left_at_their_defaults_reset_the_followers_controls():
    parsed, tab, step, problems = parse_state({"prompt": "x", "tab": "softmax"}, "vi")
    assert (tab, step, problems) == ("softmax", None, [])
    assert parsed == defaults("vi") | {"prompt": "x"}
    assert parsed["toy_logits"] == DEFAULTS["toy_logits"] and parsed["engine"] == DEFAULTS["engine"]
    assert parsed["fw_prompt"] == parsed["compare_prompt"] == limits.LESSON_PROMPT_VI  # the lesson's, in the follower's
    assert parsed["compare_table"] == DEFAULTS["compare_table"]


def test_bad_fields_are_named_in_the_followers_language_and_keep_their_defaults():
    state = {"prompt": "ok", "tab": "<script>", "step": "-1", "<img src=x>": "1", "top_p": "7",
             "toy_logits": "1,2", "toy_temperature": "9", "engine": "[[", "fw_block": "0", "fw_chat": "maybe"}
    parsed, tab, step, problems = parse_state(state, "vi")
    assert tab == TABS[0] and step is None and parsed["prompt"] == "ok"
    for name in ("top_p", "toy_logits", "toy_temperature", "engine", "fw_chat"):
        assert parsed[name] == defaults("vi")[name], name
    assert "fw_block" not in parsed  # no default: the follower's own block stays
    assert len(problems) == 9
    for name in ("'<img src=x>'", "top_p", "tab", "step", "toy_temperature", "fw_block", "fw_chat"):
        assert any(name in p for p in problems), (name, problems)
    assert any("toy_logits" in p and " 5 " in p for p in problems) and any("JSON" in p for p in problems)
    assert any("top_p phải là" in p for p in problems)  # in the follower's language
    # the bar shows them escaped: the host's text reaches strangers
    text = bar_text(Seat("following", "4KX7P", problems=problems), "vi")
    assert "<img" not in text and "&lt;img src=x&gt;" in text and "<script>" not in text


def test_a_state_that_is_no_dict_of_text_or_too_long_is_named_and_nothing_applies():
    long = {"prompt": "x" * limits.MAX_FOLLOW_STATE_CHARS, "tab": "lab"}
    parsed, tab, step, problems = parse_state(long, "en")
    assert (parsed, tab, step) == (defaults("en"), "lab", None)
    assert problems == [f"the page's state has {limits.MAX_FOLLOW_STATE_CHARS + 12} characters, more than a room carries "
                        f"({limits.MAX_FOLLOW_STATE_CHARS}): shorten a prompt or the engine table"]
    assert "dict" in parse_state(["not", "a", "dict"])[3][0]
    assert "dict" in parse_state({"tab": 3})[3][0]


def test_the_full_state_of_a_big_page_fits_a_room():
    """The engine table as long as a link takes it and three long prompts still fit MAX_FOLLOW_STATE_CHARS."""
    from playground.workshop.links import MAX_ENGINE_JSON

    prompt = "word " * 1200  # ~1024 tokens of a small model, the prompt limit
    rows = [["x" * 900, 1, 0, 1, 0, "hf", "", 8, ""] for _ in range(8)]
    state = page_state({**EVERY_TAB, "prompt": prompt, "fw_prompt": prompt, "engine": rows, "tab": "lab"}, 3)
    assert len(state["engine"]) <= MAX_ENGINE_JSON
    assert parse_state(state)[3] == [] and parse_state(state)[0]["fw_prompt"] == prompt


def a_page():
    with gr.Blocks():
        with gr.Tabs() as tabs:
            with gr.Tab("Lab", id="lab") as lab_tab:
                lab = {name: gr.Textbox() for name in CONTROLS}
            with gr.Tab("Softmax", id="softmax") as softmax_tab:
                toy = gr.Dataframe()
            with gr.Tab("Forward", id="forward") as forward_tab:
                fw_prompt, fw_block = gr.Textbox(), gr.Slider(1, 30)
        fields = {**lab, "toy_logits": toy, "fw_prompt": fw_prompt, "fw_block": fw_block}
        page = PageState(fields, tabs, {"lab": lab_tab, "softmax": softmax_tab, "forward": forward_tab})
    return page, fields


def test_the_host_carries_the_forward_block_on_every_tab_and_a_follower_gets_plain_values():
    page, f = a_page()
    toy = {"headers": ["token", "logit"], "data": [["␣Paris", 1], ["␣the", 2], ["␣a", 3], ["␣Lyon", 4], ["␣France", 5]]}
    raw = ["softmax", *(LAB[name] for name in CONTROLS), toy, "Why <b>", 9]
    fields = host_fields(page, raw)
    assert fields["fw_block"] == 9 and fields["tab"] == "softmax"  # a link would leave it out off the forward tab
    state = page_state(fields, None)
    assert state["fw_block"] == "9" and state["toy_logits"] == "1,2,3,4,5"

    values = follower_values(page, parse_state(state, "vi")[0], "vi")
    assert len(values) == len(f)
    shown = dict(zip(f, values))
    assert shown["toy_logits"] == [["␣Paris", 1.0], ["␣the", 2.0], ["␣a", 3.0], ["␣Lyon", 4.0], ["␣France", 5.0]]
    assert shown["fw_prompt"] == "Why <b>" and shown["fw_block"] == 9 and shown["prompt"] == LAB["prompt"]
    # a field with neither a value nor a default keeps what the follower's page shows
    values = follower_values(page, parse_state({"tab": "lab"}, "vi")[0], "vi")
    blocks = dict(zip(f, values))
    assert blocks["fw_prompt"] == limits.LESSON_PROMPT_VI and isinstance(blocks["fw_block"], type(gr.skip()))


@pytest.mark.parametrize("lang", ["en", "vi"])
def test_the_bar_says_why_a_hosts_page_could_not_resume_and_what_was_not_shared(lang):
    lost = bar_text(Seat("lost", "4KX7P", problems=["no room <b>4KX7P</b>"]), lang)
    assert "**4KX7P**" in lost and "&lt;b&gt;" in lost and "<b>" not in lost
    host = bar_text(Seat("host", "4KX7P", problems=["too long <i>"]), lang)
    assert "too long &lt;i&gt;" in host
