"""A lean session (playground/common/sessions.py): nothing built when a session starts, and what Gradio's deep-link
route reads, built on first read, equal to what the pinned Gradio's SessionState builds at once."""

from __future__ import annotations

import gradio as gr
import pytest
from gradio import state_holder
from gradio.blocks import BlocksConfig
from gradio.state_holder import SessionState, StateHolder

from playground.common.sessions import LazyConfigs, LeanSessionState, use_lean_sessions


@pytest.fixture(scope="module")
def demo():
    with gr.Blocks() as app:
        box = gr.Textbox("hello", label="prompt")
        state = gr.State([1, 2])
        plot = gr.Plot()
        button = gr.Button("Go")
        button.click(lambda t, s: (t.upper(), s), [box, state], [box, state])
        gr.Slider(0, 2, 1.0, label="temperature")
        del plot
    return app


def ids(demo, kind):
    return [k for k, b in demo.blocks.items() if isinstance(b, kind)]


def test_a_lean_session_builds_no_configuration_when_it_starts(demo, monkeypatch):
    built = []
    real = BlocksConfig.config_for_block
    monkeypatch.setattr(BlocksConfig, "config_for_block", staticmethod(
        lambda *a, **k: built.append(a[0]) or real(*a, **k)))
    lean = LeanSessionState(demo)
    assert built == []
    box = ids(demo, gr.Textbox)[0]
    lean._update_value_in_config(box, "an event's input")  # an event's input and outputs: nothing built either
    lean[box] = gr.Textbox("new", label="prompt", render=False)
    lean._update_config(box)
    assert built == []
    list(lean.components)  # the deep-link route reads them all: built then
    assert len(built) == 1 + len(demo.blocks)


def test_what_a_lean_session_gives_gradio_is_what_gradios_own_gives(demo):
    lean, gradios = LeanSessionState(demo), SessionState(demo)
    assert set(vars(lean)) == set(vars(gradios))  # the pinned Gradio's attributes, every one
    box, state = ids(demo, gr.Textbox)[0], ids(demo, gr.State)[0]
    for session in (lean, gradios):  # what an event does to a session before anything reads the whole
        session._update_value_in_config(box, "typed")
        session[state] = [3]
        session[box] = gr.Textbox("new", label="prompt", render=False)
        session._update_config(box)
        session._update_value_in_config(box, "answered")
    by_id = lambda session: {c["id"]: c for c in session.components}  # (the route's list; the page reads ids)
    assert by_id(lean) == by_id(gradios) and len(list(lean.components)) == len(list(gradios.components))
    assert next(c for c in lean.components if c["id"] == box)["props"]["value"] == "answered"
    assert lean[state] == gradios[state] == [3] and lean.get(ids(demo, gr.Slider)[0]) is not None


def test_entries_set_before_the_first_read_win_over_those_built_then():
    configs = LazyConfigs(lambda: {1: "built", 2: "built"})
    configs[2] = "set by an event"
    assert 2 in configs and 1 not in configs  # `in` builds nothing
    assert configs[2] == "set by an event"
    assert dict(configs.items()) == {1: "built", 2: "set by an event"} and len(configs) == 2
    assert configs.get(1) == "built" and configs.get(3, "none") == "none"


def test_a_deferred_entry_is_built_when_read_with_the_value_set_since():
    built = []
    configs = LazyConfigs(lambda: {1: {"props": {"value": "built"}}, 2: {"props": {"value": "built"}}})
    configs.defer(2, lambda: built.append(2) or {"props": {"value": "new block"}})
    configs.set_value(2, "answered", lambda: {"props": {}})
    configs.set_value(3, "typed", lambda: built.append(3) or {"props": {"value": None}})
    assert 2 in configs and 3 in configs and 1 not in configs and built == []
    assert configs[2] == {"props": {"value": "answered"}} and built == [2]
    configs[3] = {"props": {"value": "set"}}  # set over a deferred one: the set one
    assert dict(configs.items()) == {1: {"props": {"value": "built"}}, 2: {"props": {"value": "answered"}},
                                     3: {"props": {"value": "set"}}} and built == [2]


def test_every_new_session_of_a_launched_app_is_lean(demo, monkeypatch):
    monkeypatch.setattr(state_holder, "SessionState", SessionState)  # undone after the test
    use_lean_sessions()
    holder = StateHolder()
    holder.set_blocks(demo)
    assert isinstance(holder["a-learner"], LeanSessionState)
