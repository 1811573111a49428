"""The whole page: a header that tracks model loading, then one tab per lesson.

UI code only lays out and wires; the service (any PlaygroundService, here usually a
LoadingService) is passed in, so a remote service can stand in without touching this file.
Each tab builds and wires its own components (playground/<tab>/tab.py); this module places them
and wires what crosses tabs: deep links into the lab, and the header's loading line.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from model_service import limits

from .api import register_api
from .common.errors import warn
from .common.text import escape_html
from .engine.tab import build_engine_tab
from .forward.tab import build_forward_tab
from .lab.deep_link import FIELDS, make_query, parse_query
from .lab.greedy_loop import build_greedy_loop
from .lab.tab import build_lab
from .softmax.tab import build_softmax_tab

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TITLE = "Next-Token Playground"
MAX_UPLOAD = "1kb"  # the page has no file input: Gradio's upload route must not store visitors' files


def model_line(status) -> str:
    if status.error:
        return f"⚠️ **The model failed to load:** {escape_html(status.error)}"
    if not status.ready:
        return f"⏳ Loading the model… {status.fraction:.0%} — {escape_html(status.message)}"
    return f"**Model:** {escape_html(status.message)}"


def build_demo(service) -> gr.Blocks:
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(f"# {TITLE}\nHow text becomes the next token, on a real language model.", elem_id="title")
        model_status = gr.Markdown(model_line(service.status), elem_id="model-status")
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Sampling lab", id="lab"):
                lab = build_lab(service)
                with gr.Row():
                    link_btn = gr.Button("🔗 Link to these settings", size="sm", scale=0, elem_id="make-link")
                    link = gr.Textbox(show_label=False, placeholder="a link that opens the lab with these settings",
                                      buttons=["copy"], scale=4, elem_id="link")
                with gr.Accordion("Greedy's repetition loop", open=False):
                    build_greedy_loop(service)
            with gr.Tab("Softmax & LM head", id="softmax"):
                build_softmax_tab(service, lab)
            with gr.Tab("Engine", id="engine"):
                build_engine_tab(service)
            with gr.Tab("Forward pass", id="forward") as forward_tab:
                forward = build_forward_tab(service, lab, tabs=tabs)
            forward_tab.select(
                forward["trace_if_new"], forward["select_inputs"], forward["select_outputs"],
                api_visibility="private", show_progress="minimal",
            )
        register_api(service)

        names = list(FIELDS)  # the lab controls a link can set, by name
        controls = [lab[name] for name in names]

        def apply_link(request: gr.Request):
            """Set the lab's controls from the page's query; warn (escaped) about anything ignored."""
            values, problems = parse_query(dict(request.query_params)) if request else ({}, [])
            for problem in problems:
                warn(f"Link: {problem}")
            return {lab[name]: values.get(name, gr.skip()) for name in names}

        def make_link(*values, request: gr.Request = None):
            page = (request.headers.get("referer") or "").split("?")[0] if request else ""
            return {link: f"{page}?{make_query(dict(zip(names, values)))}"}

        demo.load(apply_link, None, controls, api_visibility="private", show_progress="hidden")
        link_btn.click(make_link, controls, link, api_name="make_link", show_progress="hidden")

        def track_loading():
            from model_service.background import wait_until_ready

            for status in wait_until_ready(service):
                yield {model_status: model_line(status)}

        demo.load(track_loading, None, model_status, api_visibility="private", show_progress="hidden")
    return demo


def launch_options() -> dict:
    """What Gradio 6 takes in launch() rather than Blocks(): theme, CSS, and enough worker threads
    for a room (each streaming learner's handler waits on the model's scheduler in a thread)."""
    return {"theme": gr.themes.Soft(), "css": (ASSETS / "style.css").read_text(encoding="utf-8"),
            "max_threads": limits.GRADIO_THREADS, "max_file_size": MAX_UPLOAD}


def queue_options() -> dict:
    """Gradio's queue for a room. No per-event concurrency limit: the model serialises itself (one
    scheduler thread does every forward pass and batches all waiting learners into it), so events
    must not queue one behind another here. max_size bounds the events waiting in Gradio's queue;
    past it a visitor is told the queue is full (HTTP 503) instead of waiting forever."""
    return {"default_concurrency_limit": None, "max_size": limits.GRADIO_QUEUE_SIZE}
