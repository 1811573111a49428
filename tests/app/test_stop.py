"""Stop through the API (gradio_client against the launched app): a caller without a page stops on every
record the server has, one that says what its page showed ("tag:chips", as the page's js does) on exactly
that, and the run's stream ends with the frozen views."""

from __future__ import annotations

import re
import time

import pytest
from gradio_client.exceptions import AppError

STORY = "Once upon a time, in a small village by the sea,"  # seed 1 goes on for 150+ tokens
# prompt, chat, temperature, top-k, top-p, min-p, seed, max new tokens, stop strings, order
LONG = (STORY, False, 0.8, 0, 1.0, 0.0, "1", 150, "", "hf")


def chips(html: str) -> int:
    return html.count('<span class="ntp-chip')


def streaming(client, updates: int = 6):
    """A Generate under way, once it has sent `updates` updates."""
    job = client.submit(*LONG, api_name="/generate")
    end = time.monotonic() + 120
    while len(job.outputs()) < updates:
        assert time.monotonic() < end and not job.done(), "the run did not stream"
        time.sleep(0.05)
    return job


def ended(job) -> list:
    end = time.monotonic() + 60
    while not job.done():
        assert time.monotonic() < end, "the run did not end after Stop"
        time.sleep(0.05)
    return job.outputs()


def test_stop_without_a_page_stops_on_every_record_the_server_has(client):
    job = streaming(client)
    chips_html, status, *_ = client.predict(api_name="/stop")
    step = int(re.search(r"stopped by you at step (\d+)", status).group(1))
    assert chips(chips_html) == step >= 5
    last = ended(job)[-1]
    assert chips(last[0]) == step and last[1] == status  # the stream's last update: the same frozen views
    assert last[4]["maximum"] == step  # and the scrubber for them


def test_stop_with_what_the_page_showed_cuts_the_run_there(client):
    job = streaming(client)
    tag = re.search(r'data-run="([0-9a-f]+)"', job.outputs()[-1][0]).group(1)
    client.predict(on_page=f"{tag}:3", api_name="/stop")
    last = ended(job)[-1]
    assert chips(last[0]) == 3 and "stopped by you at step 3" in last[1]
    # Stop again, on the stopped run: nothing changes
    chips_html, status, *_ = client.predict(api_name="/stop")
    assert chips(chips_html) == 3 and "stopped by you at step 3" in status


def test_stop_names_a_bad_page_count(client):
    with pytest.raises(AppError, match=r"chips on the page must be a whole number of at least 0, got 'x'"):
        client.predict(on_page="ab12:x", api_name="/stop")
    with pytest.raises(AppError, match="chips on the page must be text like"):
        client.predict(on_page="fifteen", api_name="/stop")
