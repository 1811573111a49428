"""Following the host through the API, as the pages do it: the host's session opens a room and publishes the whole
page; a follower's streaming `follow` event receives the host's tab, every tab's inputs, the step and the finished
run. A reloaded host page (a new session) resumes its room with the key its tab kept; a wrong key is refused."""

from __future__ import annotations

import json
import re
import time

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.waiting import wait_until

from .lab_args import KNOBS_OFF

LAB = ["The capital of France is", False, 0.0, 0, 1.0, 0.0, "", 4, "", "hf", *KNOBS_OFF]  # the lab's controls, in order
# indices in the follow stream's outputs: the bar's line, then the lab's 10 controls, then the other tabs' fields
# (gradio_client leaves out states, and the tabs)
PROMPT, TEMPERATURE = 1, 3
# a row with penalties, and an old one of nine cells (from before them: the follower's has them off)
ENGINE = [["Bonjour <b>", 0.5, 3, 0.9, 0.0, "vllm", "7", 12, "", 1.2, 0.4, 0.1], ["Hi", 1.0, 0, 1.0, 0.05, "hf", "", 8, "."]]


def lab_status(out) -> str:
    """The lab's status line among the outputs ('**Step n** of m · …')."""
    return next((o for o in out[11:] if isinstance(o, str) and o.startswith("**Step")), "")


def chips(out) -> str:
    return next((o for o in out[11:] if isinstance(o, str) and "ntp-chip" in o), "")


def table(out, header: str):
    """The rows of the table (toy: 'logit'; engine: 'max tokens') among a stream's outputs, or None."""
    for o in out:
        if isinstance(o, dict) and header in (o.get("headers") or []):
            return o["data"]
    return None


def code_of(bar_line: str) -> str:
    return re.search(r"\*\*(\w{5})\*\*", bar_line).group(1)


def wait_for(job, check):
    """The latest update of `job` that passes `check`, waiting for one (a deadline that only fails a hang)."""
    return wait_until(lambda: next((out for out in reversed(job.outputs()) if check(out)), None),
                      f"an update passing the check (last: {job.outputs()[-1:]!r})"[:2000], interval=0.1)


class Page:
    """A host page's inputs as /open_room and /host_publish take them: [key, tab, *every field, scrub, lang], each
    at the page's default (from the API's description), set by what a test changes."""

    def __init__(self, client: Client):
        info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/host_publish"]
        self.client, self.args = client, [p.get("parameter_default") for p in info["parameters"]]
        self.args[2:2 + len(LAB)] = LAB

    def set(self, tab=None, lab=None, step=None, toy=None, engine=None, scene=None) -> Page:
        if tab is not None:
            self.args[1] = tab
        if lab is not None:
            self.args[2:2 + len(lab)] = lab
        if step is not None:
            self.args[-2] = step
        if scene is not None:  # the header's scene picker, just before the scrubber
            self.args[-3] = scene
        for rows, header in ((toy, "logit"), (engine, "max tokens")):
            if rows is not None:
                i = next(i for i, a in enumerate(self.args) if isinstance(a, dict) and header in a.get("headers", []))
                self.args[i] = {**self.args[i], "data": rows}
        return self

    def call(self, api_name: str, key: str = "") -> list:
        return self.client.predict(key, *self.args[1:], api_name=api_name)


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
    page = Page(host).set(tab="softmax", step=1)
    bar, _, key = page.call("/open_room")[:3]
    code = code_of(bar)
    assert "?follow=" + code in bar and key.startswith(code + ":") and key[6:] not in bar  # the token: never shown
    follower = follow(app_url, code.lower())
    first = wait_for(follower, lambda o: o[PROMPT] == LAB[0])
    assert first[TEMPERATURE] == 0.0 and "Following room" in first[0]
    assert "· 1 following" in page.call("/host_publish")[0]  # the host's count

    page.set(lab=[*LAB[:2], 1.5, *LAB[3:]], tab="lab").call("/host_publish")
    wait_for(follower, lambda o: o[TEMPERATURE] == 1.5)

    # the host runs the model once; the follower shows that run (chips and status), at the host's step
    page.set(lab=LAB)
    host.predict(*LAB, "en", api_name="/generate")
    page.set(step=2).call("/host_publish")  # the host's scrubber on step 2 (it counts from 1)
    shown = wait_for(follower, lambda o: lab_status(o).startswith("**Step 2**"))
    assert "Paris" in chips(shown)
    page.set(step=4).call("/host_publish")
    wait_for(follower, lambda o: lab_status(o).startswith("**Step 4**"))

    host.predict("en", api_name="/close_room")
    wait_for(follower, lambda o: "is closed" in str(o[0]))
    assert follower.done() or wait_for(follower, lambda o: True)


def test_a_follower_gets_the_hosts_scene_in_its_own_language_and_an_unknown_one_opens_nothing(host, app_url):
    page = Page(host).set(tab="lab", scene="l13-top-k")
    code = code_of(page.call("/open_room")[0])
    client = Client(app_url, verbose=False)
    assert "Đang theo" in client.predict(code, "vi", api_name="/join")[0]
    follower = client.submit(api_name="/follow")
    shown = wait_for(follower, lambda o: "Cảnh" in str(o[-2]))  # the caption, in the follower's Vietnamese
    assert shown[-3] == "l13-top-k" and json.loads(shown[-1])["focus"] == "stage-plot"  # picker, cue
    page.set(scene="<b>nope</b>").call("/host_publish")  # none of the page's scenes: the room carries none
    cleared = wait_for(follower, lambda o: o[-2] == "" and o[-3] is None)
    assert json.loads(cleared[-1])["focus"] == ""
    follower.cancel()


def test_a_follower_gets_the_hosts_engine_table_and_toy_logits(host, app_url):
    page = Page(host).set(tab="engine")
    code = code_of(page.call("/open_room")[0])
    follower = follow(app_url, code)
    wait_for(follower, lambda o: o[PROMPT] == LAB[0])
    toy = [["␣Paris", 1.0], ["␣the", 2.5], ["␣a", 3.0], ["␣Lyon", -4.0], ["␣France", 0.5]]
    page.set(toy=toy, engine=ENGINE).call("/host_publish")
    shown = wait_for(follower, lambda o: table(o, "max tokens") is not None and table(o, "max tokens")[0][0] == "Bonjour <b>")
    assert table(shown, "max tokens") == [[*ENGINE[0], ""], [*ENGINE[1], 1, 0, 0, ""]]  # as typed: text, not HTML
    assert [[t, float(x)] for t, x in table(shown, "logit")] == toy
    follower.cancel()


def test_only_the_hosts_session_publishes(host, app_url):
    page = Page(host)
    code = code_of(page.call("/open_room")[0])
    follower = follow(app_url, code)
    wait_for(follower, lambda o: o[PROMPT] == LAB[0])
    stranger = Page(Client(app_url, verbose=False)).set(lab=["hijacked", *LAB[1:]])
    stranger.call("/host_publish")  # no room in its session
    stranger.call("/host_publish", key=f"{code}:guessed-token")  # nor with a made-up key
    time.sleep(1.0)
    assert all(o[PROMPT] != "hijacked" for o in follower.outputs())
    follower.cancel()


def test_a_reloaded_host_page_resumes_its_room_with_its_key_and_a_wrong_key_is_refused(host, app_url):
    page = Page(host).set(tab="softmax", lab=["Resume me", *LAB[1:]])
    bar, _, key = page.call("/open_room")[:3]
    code = code_of(bar)
    follower = follow(app_url, code)
    wait_for(follower, lambda o: o[PROMPT] == "Resume me")

    reloaded = Client(app_url, verbose=False)  # the host's reloaded page: a new session, the key its tab kept
    refused = reloaded.predict(f"{code}:not-the-token", "en", api_name="/resume_room")
    assert "Could not host room" in refused[0] and f"only the host of room {code}" in refused[0]
    assert refused[2] == ""  # the tab forgets the key
    assert "no open room" in reloaded.predict("XXXXX:token", "en", api_name="/resume_room")[0]
    assert "room code must be" in reloaded.predict("<b>:x", "en", api_name="/resume_room")[0]

    out = reloaded.predict(key, "en", api_name="/resume_room")
    assert f"You host room **{code}**" in out[0] and out[2] == key
    assert "Resume me" in out[3:6]  # the page shows the room's state again (the lab's prompt), before it publishes
    resumed = Page(reloaded).set(lab=["After the reload", *LAB[1:]])
    assert "You host room" in resumed.call("/host_publish")[0]
    wait_for(follower, lambda o: o[PROMPT] == "After the reload")
    reloaded.predict("en", api_name="/close_room")
    wait_for(follower, lambda o: "is closed" in str(o[0]))


def test_a_publish_still_on_its_way_when_the_host_closes_is_no_reload_to_resume(host, app_url):
    page = Page(host)
    key = page.call("/open_room")[2]
    host.predict("en", api_name="/close_room")
    # the page's timer sent this tick before the page heard of the close: its key is the old one
    late = page.call("/host_publish", key=key)
    assert late[0] == "" and late[2] == ""  # the bar stays hidden and the tab forgets the key (no "could not host")
    assert page.call("/host_publish")[0] == ""
    # a session the server forgot (a new one) with that key still says why it cannot host that room again
    forgot = Page(Client(app_url, verbose=False)).call("/host_publish", key=key)
    assert "Could not host room" in forgot[0] and "no open room" in forgot[0]


@pytest.mark.parametrize("code, message", [("0000", "room code must be 5 letters"), ("XXXXX", "no open room XXXXX")])
def test_a_bad_or_unknown_code_is_a_clear_error(client, code, message):
    with pytest.raises(AppError, match=message):
        client.predict(code, "en", api_name="/join")
