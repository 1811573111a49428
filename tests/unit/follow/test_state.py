"""A room's state: what the host's page publishes, checked like a link before a follower applies it."""

from playground.follow.state import TABS, page_state, parse_state
from playground.lab.deep_link import CONTROLS, LINK_DEFAULTS

DEFAULTS = {name: LINK_DEFAULTS[name] for name in CONTROLS}  # a room carries the lab's controls (a branch is none)


def test_a_hosts_state_round_trips_to_the_same_controls_tab_and_step():
    values = dict(LINK_DEFAULTS, prompt="Hello <b>", temperature=0.5, top_k=7, seed="3", order="vllm")
    values = {name: values[name] for name in CONTROLS}  # a room carries the lab's controls (a branch is no control)
    state = page_state(values, "softmax", 4)
    assert state["tab"] == "softmax" and state["step"] == "4" and "top_p" not in state  # defaults left out
    parsed, tab, step, problems = parse_state(state)
    assert (parsed, tab, step, problems) == (values, "softmax", 4, [])


def test_fields_the_host_left_at_their_defaults_reset_the_followers_controls():
    parsed, _, step, _ = parse_state({"prompt": "x", "tab": "lab"})
    assert parsed == dict(DEFAULTS, prompt="x") and step is None


def test_bad_fields_are_reported_in_the_followers_language_and_keep_their_defaults():
    state = {"prompt": "ok", "top_p": "7", "tab": "<script>", "step": "-1", "evil": "<img src=x>"}
    parsed, tab, step, problems = parse_state(state, "vi")
    assert parsed["top_p"] == LINK_DEFAULTS["top_p"] and tab == TABS[0] and step is None
    assert len(problems) == 4 and any("top_p phải là" in p for p in problems)
    parsed, tab, step, problems = parse_state({"prompt": "x" * 5000, "tab": "lab"})
    assert parsed == DEFAULTS and problems == ["state"]
    assert parse_state(["not", "a", "dict"])[3] == ["state"]
