"""PlainFigure (playground/common/figures.py): the step charts' form, Plotly's JSON without graph objects."""

from __future__ import annotations

import json

import gradio as gr
import plotly.graph_objects as go
import pytest

from playground.common.figures import PlainFigure, empty_figure, for_view
from playground.lab.charts import draw_figure, run_figure, stage_figure
from playground.lab.view import View, draw_chart, stage_chart
from tests.unit.lab.test_charts import make_record


def built_every_way():
    record = make_record()
    yield stage_figure(record)
    yield stage_figure(record, fold=True, present=True, rows=3)
    yield stage_figure(record, stacked=True, log=True)
    yield draw_figure(record)
    yield run_figure([record, record])
    yield empty_figure("nothing <b>yet</b>")
    for view in (View(present=True), View(dark=True), View(narrow=True, present=True)):
        yield stage_chart(record, view)
        yield draw_chart(record, view)


@pytest.mark.parametrize("index", range(12))
def test_what_the_page_is_sent_is_what_plotly_itself_would_send(index):
    fig = list(built_every_way())[index]
    assert isinstance(fig, PlainFigure)
    sent = json.loads(fig.to_json())
    validated = go.Figure(sent)  # raises on any property plotly does not know, or a value it would not take
    assert json.loads(validated.to_json()) == sent
    assert sent == fig.to_plotly_json()


def test_gradio_plot_takes_it_as_a_plotly_figure():
    fig = stage_figure(make_record())
    data = gr.Plot().postprocess(fig)
    assert data.type == "plotly" and data.plot == fig.to_json()


def test_to_plotly_json_is_a_copy_and_update_layout_changes_what_is_sent():
    fig = draw_figure(make_record())
    copy = fig.to_plotly_json()
    copy["layout"]["height"] = 999
    assert fig.layout.height != 999
    assert fig.update_layout(meta={"what_if_serial": 3}) is fig
    assert json.loads(fig.to_json())["layout"]["meta"] == {"what_if_serial": 3} and fig.layout.meta == {"what_if_serial": 3}


def test_for_view_leaves_the_figure_it_was_given_as_it_was():
    fig = stage_figure(make_record())
    before = fig.to_json()
    dark = for_view(fig, big=True, dark=True)
    assert fig.to_json() == before and dark.to_json() != before
    assert for_view(go.Figure(fig.to_plotly_json()), dark=True).to_plotly_json() == for_view(fig, dark=True).to_plotly_json()
