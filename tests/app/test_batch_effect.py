"""The busy-room lesson through the API: the scrubbed step alone and in a room of 16, in both arithmetics."""

from __future__ import annotations

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from .lab_args import KNOBS_OFF_BY_NAME

LESSON = "Once upon a time"
UI_ARGS = dict(chat=False, temperature=1.0, top_k=0, top_p=0.95, min_p=0.0, seed="42", max_new=4, stop="", order="hf", **KNOBS_OFF_BY_NAME)


def test_the_scrubbed_step_alone_and_in_a_busy_room(client):
    client.predict(LESSON, *UI_ARGS.values(), api_name="/generate")
    text, plot = client.predict(3, api_name="/batch_effect")  # the scrubber on step 3
    assert text.startswith("**Step 3**, seed 42") and "row 16 of a room of 16" in text
    assert "| default arithmetic | batch-invariant mode |" in text
    assert "0 / 49,152" in text and "bit-identical" in text  # the mode's column, on the real model
    assert ("no flip" in text) or ("**flipped**" in text)
    assert plot["type"] == "plotly"
    vi, _ = client.predict(3, "vi", api_name="/batch_effect")
    assert vi.startswith("**Bước 3**") and "giống hệt từng bit" in vi


def test_no_run_is_a_clear_error(app_url):
    with pytest.raises(AppError, match="Generate a run first"):
        Client(app_url, verbose=False).predict(1, api_name="/batch_effect")
