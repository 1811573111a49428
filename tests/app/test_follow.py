"""Following the host through the API, as the pages do it: the host's session opens a room and publishes; a
follower's streaming `follow` event receives the host's settings, step and finished run."""

from __future__ import annotations

import re
import time

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

LAB = ["The capital of France is", False, 0.0, 0, 1.0, 0.0, "", 4, "", "hf"]  # the lab's controls, in order
# indices in the follow stream's outputs: the bar's line, then the lab's 10 controls (then the tabs, the lab's chips,
# status line and charts: gradio_client leaves out states, and the tabs at times)
PROMPT, TEMPERATURE = 1, 3


def lab_status(out) -> str:
    """The lab's status line among the outputs ('**Step n** of m · …')."""
    return next((o for o in out[11:] if isinstance(o, str) and o.startswith("**Step")), "")


def chips(out) -> str:
    return next((o for o in out[11:] if isinstance(o, str) and "ntp-chip" in o), "")


def code_of(bar_line: str) -> str:
    return re.search(r"\*\*(\w{5})\*\*", bar_line).group(1)


def wait_for(job, check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for out in reversed(job.outputs()):
            if check(out):
                return out
        time.sleep(0.1)
    raise AssertionError(f"no update passed the check in {timeout} s; last: {job.outputs()[-1:]!r}"[:2000])


def follow(app_url, code):
    """A follower's session as its page does it: join (the bar), then the follow stream."""
    client = Client(app_url, verbose=False)
    assert "Following room" in client.predict(code, "en", api_name="/join")[0]
    return client.submit(api_name="/follow")


@pytest.fixture()
def host(app_url):
    client = Client(app_url, verbose=False)
    yield client
    client.predict("en", api_name="/close_room")


def test_a_follower_gets_the_hosts_settings_then_its_run_without_running_it(host, app_url):
    bar = host.predict(*LAB, "softmax", 1, "en", api_name="/open_room")[0]
    code = code_of(bar)
    assert "?follow=" + code in bar
    follower = follow(app_url, code.lower())
    first = wait_for(follower, lambda o: o[PROMPT] == LAB[0])
    assert first[TEMPERATURE] == 0.0 and "Following room" in first[0]
    assert "· 1 following" in host.predict(*LAB, "softmax", 1, "en", api_name="/host_publish")[0]  # the host's count

    host.predict(*LAB[:2], 1.5, *LAB[3:], "lab", 1, "en", api_name="/host_publish")
    wait_for(follower, lambda o: o[TEMPERATURE] == 1.5)

    # the host runs the model once; the follower shows that run (chips and status), at the host's step
    host.predict(*LAB, "en", api_name="/generate")
    host.predict(*LAB, "lab", 2, "en", api_name="/host_publish")  # the host's scrubber on step 2 (it counts from 1)
    shown = wait_for(follower, lambda o: lab_status(o).startswith("**Step 2**"))
    assert "Paris" in chips(shown)
    host.predict(*LAB, "lab", 4, "en", api_name="/host_publish")
    wait_for(follower, lambda o: lab_status(o).startswith("**Step 4**"))

    host.predict("en", api_name="/close_room")
    wait_for(follower, lambda o: "is closed" in str(o[0]))
    assert follower.done() or wait_for(follower, lambda o: True)


def test_only_the_hosts_session_publishes(host, app_url):
    code = code_of(host.predict(*LAB, "lab", 1, "en", api_name="/open_room")[0])
    follower = follow(app_url, code)
    wait_for(follower, lambda o: o[PROMPT] == LAB[0])
    stranger = Client(app_url, verbose=False)
    stranger.predict("hijacked", *LAB[1:], "lab", 1, "en", api_name="/host_publish")  # no room in its session
    time.sleep(1.0)
    assert all(o[PROMPT] != "hijacked" for o in follower.outputs())
    follower.cancel()


@pytest.mark.parametrize("code, message", [("0000", "room code must be 5 letters"), ("XXXXX", "no open room XXXXX")])
def test_a_bad_or_unknown_code_is_a_clear_error(client, code, message):
    with pytest.raises(AppError, match=message):
        client.predict(code, "en", api_name="/join")
