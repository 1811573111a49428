"""The page's word to a streaming handler goes as one POST to a hidden event (common/acks.py): the page script
finds the event by its name in the page's config and posts in the page's session, as Gradio's page does for an
event outside the queue. These check what that script relies on."""

from __future__ import annotations

import pathlib

import gradio as gr

from playground.common.acks import ack_event, ack_js

ASSETS = pathlib.Path(gr.__file__).parent / "templates" / "frontend" / "assets"


def test_the_script_counts_then_posts_to_the_named_event():
    js = ack_js("(...values) => values", "page_has")
    assert js.index("(...values) => values") < js.index("fetch(")
    assert 'd.api_name === "page_has"' in js and "/run/predict" in js
    assert "session_hash: session" in js and "fn_index: dep.id" in js


def test_the_hidden_event_is_named_private_and_outside_the_queue():
    def handler(state, count):
        return None

    with gr.Blocks() as demo:
        ack_event(handler, gr.State(), "page_has")
    (dep,) = [d for d in demo.config["dependencies"] if d["api_name"] == "page_has"]
    assert dep["queue"] is False and dep["api_visibility"] == "private" and not dep["outputs"]


def test_this_gradio_gives_the_page_its_session_and_config():
    """The script reads Gradio's window.__gradio_session_hash__ and window.gradio_config: a Gradio that stops
    setting them leaves the streams unpaced (every token at once, as to an API caller), so say so here first."""
    scripts = "".join(p.read_text(errors="ignore") for p in ASSETS.glob("*.js") if p.stat().st_size < 3_000_000)
    assert "window.__gradio_session_hash__=" in scripts
    assert "window.gradio_config=" in scripts or "window.gradio_config =" in scripts
    assert "/run${" in scripts  # the page's own calls outside the queue: {root}{api_prefix}/run/predict
