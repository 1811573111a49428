"""The live lab through gradio_client (a script's session, as a learner's page): a run, then /what_if redraws its
last step from the logits the service kept for this session (no forward pass), Continue from here goes on from it,
and bad knob values are named."""

from __future__ import annotations

import pytest
from gradio_client.exceptions import AppError

from .lab_args import KNOBS_OFF_BY_NAME

LESSON = "The capital of France is"
ARGS = dict(chat=False, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed="5", max_new=6, stop="", order="hf",
            **KNOBS_OFF_BY_NAME)


def args(**changed):
    return (LESSON, *{**ARGS, **changed}.values())


def test_a_what_if_redraws_the_runs_last_step_from_its_kept_logits(client):
    chips, status, *_ = client.predict(*args(), api_name="/generate")
    assert "stopped" in status
    status, stage, draw = client.predict(*args(temperature=0.5), api_name="/what_if")
    assert status.startswith("**What if** T 0.5 · this run drew with T 1 · step 6"), status
    assert "recomputed" not in status  # this session's run was kept: no forward pass
    assert stage["type"] == "plotly" and draw["type"] == "plotly"
    status, *_ = client.predict(*args(), api_name="/what_if")  # back at the run's own settings: its own step
    assert status.startswith("**Step 6** of 6"), status


def test_a_bad_knob_value_is_named(client):
    with pytest.raises(AppError, match="top-p"):
        client.predict(*args(top_p=7), api_name="/what_if")
