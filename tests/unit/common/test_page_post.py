"""A page's small, frequent calls go as one POST each to a hidden event (common/page_post.py): the stream's acks
(common/acks.py) and the knobs' what-ifs (lab/what_if.py). The page script finds the event by its name in the page's
config and posts in the page's session, as Gradio's page does for an event outside the queue. These check what that
script relies on."""

from __future__ import annotations

import pathlib

import gradio as gr

from playground.common.acks import ack_event, ack_js
from playground.common.page_post import POST_JS
from playground.lab.what_if import ASK_JS

ASSETS = pathlib.Path(gr.__file__).parent / "templates" / "frontend" / "assets"


def test_the_post_finds_the_event_by_name_and_calls_it_in_the_pages_session():
    assert "d.api_name === name" in POST_JS and "/run/predict" in POST_JS
    assert "session_hash: session" in POST_JS and "fn_index: dep.id" in POST_JS


def test_the_ack_script_counts_then_posts_to_the_named_event():
    js = ack_js("(...values) => values", "page_has")
    assert js.index("(...values) => values") < js.index("fetch(")
    assert '"page_has", [null, counted[counted.length - 1]]' in js


def test_the_what_if_script_posts_the_knobs_with_the_state_left_to_the_server_and_escapes_what_it_says():
    assert 'post("what_if", [null, ...asked])' in ASK_JS and POST_JS in ASK_JS
    # a refusal is said on the line: the app's own come escaped (common/errors.py), anything else is escaped here
    assert "body.title !== undefined ? body.error : escape(body.error" in ASK_JS and "escape(e" in ASK_JS


def test_the_hidden_event_is_named_private_and_outside_the_queue():
    def handler(state, count):
        return None

    with gr.Blocks() as demo:
        ack_event(handler, gr.State(), "page_has")
    (dep,) = [d for d in demo.config["dependencies"] if d["api_name"] == "page_has"]
    assert dep["queue"] is False and dep["api_visibility"] == "private" and not dep["outputs"]


def test_this_gradio_gives_the_page_its_session_and_config():
    """The scripts read Gradio's window.__gradio_session_hash__ and window.gradio_config: a Gradio that stops
    setting them leaves the streams unpaced (every token at once, as to an API caller) and the knobs without
    what-ifs, so say so here first."""
    scripts = "".join(p.read_text(errors="ignore") for p in ASSETS.glob("*.js") if p.stat().st_size < 3_000_000)
    assert "window.__gradio_session_hash__=" in scripts
    assert "window.gradio_config=" in scripts or "window.gradio_config =" in scripts
    assert "/run${" in scripts  # the page's own calls outside the queue: {root}{api_prefix}/run/predict
