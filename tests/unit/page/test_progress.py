"""What the page asks of the browser per message: events that show no progress track it on no component (the
browser re-sets every tracked component on every message of every event), and the views of one step under the
stage charts wait for a streaming run to end instead of redrawing with each chart."""

from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pytest

from model_service.models.switching import LoadingService
from model_service.records.step import LoadStatus
from playground.lab.run import Run
from playground.page import build_demo

from ..lab.test_charts import make_record


@pytest.fixture(scope="module")
def demo():
    loading = LoadingService.__new__(LoadingService)  # a load that never finishes: the page without a model
    loading._service, loading._status = None, LoadStatus(0.4, "reading weights", False)
    return build_demo(loading)


def test_events_that_show_no_progress_track_it_on_no_component(demo):
    deps = demo.config["dependencies"]
    hidden = [d for d in deps if d["show_progress"] == "hidden"]
    shown = [d for d in deps if d["show_progress"] != "hidden" and d["outputs"]]
    assert len(hidden) > 50 and shown  # the page's streams, links, scenes and watchers; the Forward tab's traces
    assert all(d["show_progress_on"] == [] for d in hidden), [d["api_name"] for d in hidden if d["show_progress_on"]]
    assert all(d["show_progress_on"] is None for d in shown)  # a trace's spinner stays on its outputs


def streamed(*stops, streaming="run", stop_requested=False) -> Run:
    records = [replace(make_record(step=i), stop_reason=stop) for i, stop in enumerate(stops)]
    return Run(records=records, streaming=streaming, stop_requested=stop_requested)


def test_a_run_is_mid_stream_until_its_last_step_or_stop():
    assert streamed(None, None).mid_stream
    assert not streamed(None, "max_new_tokens").mid_stream  # its last step came: the views may draw it
    assert not streamed(None, None, stop_requested=True).mid_stream  # Stop froze it
    assert not streamed(None, None, streaming="").mid_stream  # a Step, an imported run: nothing streams
    assert not Run().mid_stream


def step_view(demo, name: str):
    """Look inside's or the batch effect's handler of the step on screen, called as its run_plot.change calls it."""
    if name == "inspect":
        fn = next(f for f in demo.fns.values() if f.api_name == "inspect_step")
        return fn, lambda run, drawn=None: fn.fn(2, run, None, "en", drawn)
    fn = next(f for f in demo.fns.values() if f.name == "show_step" and str(f.show_progress) == "minimal")
    return fn, lambda run, drawn=None: fn.fn(2, run, False, None, "en", drawn)


def skipped(out: dict) -> bool:
    return all(isinstance(v, type(gr.skip())) for v in out.values())


@pytest.mark.parametrize("name", ["inspect", "batch effect"])
def test_the_views_of_one_step_wait_for_a_streaming_run_and_draw_a_step_once(demo, name):
    fn, call = step_view(demo, name)
    out = call(streamed(None, None))
    assert set(out) == set(fn.outputs) and skipped(out)
    run = streamed(None, "max_new_tokens")
    out = call(run)  # the run ended: the views draw its step, and remember what they drew
    drawn = out[fn.outputs[-1]]
    assert not any(isinstance(v, type(gr.skip())) for v in out.values()) and drawn == run.drawn_as(2, "en", *(
        [] if name == "inspect" else [False]))
    # the plots' new values fire run_plot's change again (Gradio's Plot does on every value): nothing to redraw
    assert skipped(call(run, drawn))
    run.scrubbed = 0  # the learner scrubbed: draw again
    assert not skipped(call(run, drawn))
