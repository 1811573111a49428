"""'Look inside this step' through the API: sample the scrubbed step many times, and its views."""

from __future__ import annotations

import re

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from .lab_args import KNOBS_OFF_BY_NAME

LESSON = "The capital of France is"
UI_ARGS = dict(chat=False, temperature=0.8, top_k=0, top_p=0.95, min_p=0.0, seed="3", max_new=4, stop="", order="hf", **KNOBS_OFF_BY_NAME)


def test_sample_many_draws_the_scrubbed_step_and_tests_it(client):
    client.predict(LESSON, *UI_ARGS.values(), api_name="/generate")
    text, plot = client.predict(10_000, 2, api_name="/sample_many")  # the scrubber on step 2
    assert "**10,000 draws** at step 2" in text
    chi = re.search(r"p = ([0-9.e+-]+)", text)
    assert chi and "χ² =" in text and "degrees of freedom" in text
    assert plot["type"] == "plotly"
    assert re.search(r"(\d+) distinct tokens drawn \(of (\d+)", text)
    vi, _ = client.predict(500, 2, "vi", api_name="/sample_many")
    assert "**500 lần rút** ở bước 2" in vi


def test_inspect_step_views_follow_the_index(client):
    client.predict(LESSON, *UI_ARGS.values(), api_name="/generate")
    logits_text, logits_plot, cost_text, cost_plot, many_text, many_plot = client.predict(3, api_name="/inspect_step")
    assert logits_text.startswith("Step 3:") and "log Z" in logits_text
    assert "**Step 3**" in cost_text and "**Run, 4 steps**" in cost_text and "LM head" in cost_text
    assert logits_plot["type"] == cost_plot["type"] == "plotly"
    assert "Freeze this step" in many_text  # no draws for this step yet


def test_bad_draw_counts_and_no_run_are_clear_errors(client, app_url):
    client.predict(LESSON, *UI_ARGS.values(), api_name="/generate")
    with pytest.raises(AppError, match="draws must be a whole number between 100 and 10,000, got 50"):
        client.predict(50, 1, api_name="/sample_many")
    with pytest.raises(AppError, match="Run something first"):
        Client(app_url, verbose=False).predict(1000, 0, api_name="/sample_many")  # a new session: no run
