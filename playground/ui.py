"""The whole page: a header that tracks model loading, then one tab per lesson.

UI code only lays out and wires; the service (any PlaygroundService, here usually a
LoadingService) is passed in, so a remote service can stand in without touching this file.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from .api import register_api
from .deep_link import FIELDS, make_query, parse_query
from .engine_tab import build_engine_tab
from .forward_tab import build_forward_tab
from .greedy_loop import build_greedy_loop
from .lesson_tab import build_softmax_lesson
from .lm_head_panel import build_lm_head_panel
from .sampling_lab import build_sampling_lab

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TITLE = "Next-Token Playground"
LINK_CONTROLS = [key for key, _ in FIELDS.values()]  # the lab controls a link can set


def _model_line(status) -> str:
    if status.error:
        return f"⚠️ **The model failed to load:** {status.error}"
    if not status.ready:
        return f"⏳ Loading the model… {status.fraction:.0%} — {status.message}"
    return f"**Model:** {status.message}"


def build_demo(service) -> gr.Blocks:
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(f"# {TITLE}\nHow text becomes the next token, on a real language model.", elem_id="title")
        model_status = gr.Markdown(_model_line(service.status), elem_id="model-status")
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Sampling lab", id="lab"):
                lab = build_sampling_lab(service)
                with gr.Row():
                    link_btn = gr.Button("🔗 Link to these settings", size="sm", scale=0, elem_id="make-link")
                    link = gr.Textbox(show_label=False, placeholder="a link that opens the lab with these settings", buttons=["copy"], scale=4, elem_id="link")
                with gr.Accordion("Greedy's repetition loop", open=False):
                    build_greedy_loop(service)
            with gr.Tab("Softmax & LM head", id="softmax"):
                build_softmax_lesson()
                build_lm_head_panel(service, lab)
            with gr.Tab("Engine", id="engine"):
                build_engine_tab(service)
            with gr.Tab("Forward pass", id="forward") as forward_tab:
                forward = build_forward_tab(service, lab, tabs=tabs)
            forward_tab.select(
                forward["trace_if_new"], forward["select_inputs"], forward["select_outputs"],
                api_visibility="private", concurrency_id="model", show_progress="minimal",
            )
        register_api(service)

        keys = LINK_CONTROLS
        controls = [lab[k] for k in keys]

        def apply_link(request: gr.Request):
            values, problems = parse_query(dict(request.query_params)) if request else ({}, [])
            for problem in problems:
                gr.Warning(f"Link: {problem}; ignored")
            return [gr.update(value=values[k]) if k in values else gr.skip() for k in keys]

        def make_link(*values, request: gr.Request = None):
            page = (request.headers.get("referer") or "").split("?")[0] if request else ""
            return f"{page}?{make_query(dict(zip(keys, values)))}"

        demo.load(apply_link, None, controls, api_visibility="private", show_progress="hidden")
        link_btn.click(make_link, controls, link, api_name="make_link", show_progress="hidden")

        def track_loading():
            from model_service.background import wait_until_ready

            for status in wait_until_ready(service):
                yield _model_line(status)

        demo.load(track_loading, None, model_status, api_visibility="private", show_progress="hidden")
    return demo


def launch_options() -> dict:
    """What Gradio 6 takes in launch() rather than Blocks(): theme and CSS."""
    return {"theme": gr.themes.Soft(), "css": (ASSETS / "style.css").read_text(encoding="utf-8")}
