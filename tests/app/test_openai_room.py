"""A full room, seen by scripts: the OpenAI-compatible API and /stream_records on a service with one row and one
place in its queue, whose tiny model takes ~30 ms a step, so a run lasts long enough to fill the room.

One request holds the row; a second waits and is told so (an SSE comment on the API's stream, a {"waiting": ...}
item on /stream_records with report_waiting); a third is refused at once: 429 in OpenAI's shape, which names
the full room, never a hang."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from gradio_client import Client

from tests.conftest import launched
from tests.scale.factories import tiny
from tests.waiting import wait_until

openai = pytest.importorskip("openai")  # a dev dependency (requirements-dev.txt)

LONG = {"prompt": "hold the row", "max_tokens": 200, "temperature": 0, "stream": True}


@pytest.fixture(scope="module")
def room():
    """(url, service): the page and the API on a one-row, one-waiting-place service."""
    from model_service.models.switching import LoadingService
    from playground.page import build_demo

    service = LoadingService(service=tiny(step_delay_s=0.03, max_rows=1, queue_size=1))
    with launched(build_demo(service), api=service) as url:
        yield url.rstrip("/"), service


class Holder:
    """A streamed completion that holds the room's row until released (its client hangs up)."""

    def __init__(self, url: str):
        self.release, self.first = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.run, args=(url,), daemon=True)
        self.thread.start()

    def run(self, url):
        with httpx.stream("POST", f"{url}/v1/completions", json=LONG, timeout=60) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    self.first.set()
                if self.release.is_set():
                    return

    def __enter__(self):
        assert self.first.wait(30), "the holding request never started"
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.thread.join(30)


def empty(service) -> bool:
    room = service.room()
    return not room.rows and not room.waiting


def test_a_full_room_refuses_with_429_naming_it_and_the_engine_tab_shows_it(room):
    url, service = room
    wait_until(lambda: empty(service), "an empty room", interval=0.05)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="not-needed-here", max_retries=0)
    with Holder(url):
        waiter = threading.Thread(target=lambda: httpx.post(f"{url}/v1/completions", json={**LONG, "stream": False},
                                                            timeout=60), daemon=True)
        waiter.start()
        wait_until(lambda: service.room().waiting, "the second request taking the queue's one place", interval=0.05)
        room_html = Client(url + "/", verbose=False).predict(api_name="/room")  # the Engine tab's live room
        assert "1 of 1 rows in use · 1 waiting" in str(room_html) and "of 200" in str(room_html), str(room_html)[:400]
        with pytest.raises(openai.RateLimitError) as refused:
            client.completions.create(model=service.info.name, prompt="one more", max_tokens=4)
        assert refused.value.status_code == 429
        message = refused.value.body["message"].lower()
        assert "full" in message or "wait" in message, message
    waiter.join(60)
    wait_until(lambda: empty(service), "an empty room", interval=0.05)
    again = client.completions.create(prompt="one more", max_tokens=4, model=service.info.name)
    assert again.choices[0].finish_reason in ("length", "stop")


def test_a_waiting_stream_is_told_its_place(room):
    url, service = room
    wait_until(lambda: empty(service), "an empty room", interval=0.05)
    with Holder(url):
        lines = []
        with httpx.stream("POST", f"{url}/v1/completions", timeout=60,
                          json={"prompt": "next", "max_tokens": 2, "temperature": 0, "stream": True}) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                lines.append(line)
                if line.startswith(": waiting"):
                    break
        assert lines and lines[-1] == ": waiting: 0 ahead of this request", lines[:5]
    wait_until(lambda: empty(service), "an empty room", interval=0.05)


def test_stream_records_reports_waiting_when_asked(room):
    url, service = room
    wait_until(lambda: empty(service), "an empty room", interval=0.05)
    client = Client(url + "/", verbose=False, httpx_kwargs={"timeout": 60})
    with Holder(url):
        job = client.submit("next", 0.0, 0, 1.0, 0.0, 1, "hf", 3, None, False, 5, True, api_name="/stream_records")
        wait_until(lambda: bool(job.outputs()) or job.done(), "the job's first output", interval=0.05)
        first = job.outputs()[0]
    assert first == {"waiting": {"position": 1, "ahead": 0, "queue_length": 1}}, json.dumps(first)[:200]
    job.result()
    records = job.outputs()
    assert [r.get("step") for r in records if "waiting" not in r] == [0, 1, 2]
    wait_until(lambda: empty(service), "an empty room", interval=0.05)
