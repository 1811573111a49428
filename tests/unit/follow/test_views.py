"""The host's run as followers see it: built once per (room, run, step, language), shared by every follower."""

import pytest

from model_service import SamplingSettings
from playground.workshop.follow.seat import Seat, bar_text
from playground.workshop.follow.views import ViewCache, shared_run


@pytest.fixture(scope="module")
def records(tiny_service):
    return list(tiny_service.generate("ab", SamplingSettings(temperature=0.0), max_new_tokens=4))


def test_views_are_built_once_and_shared(records):
    cache = ViewCache()
    first = cache.step_views("ROOM1", 1, tuple(records), 2, "en")
    for _ in range(100):
        assert cache.step_views("ROOM1", 1, tuple(records), 2, "en") is first
    assert cache.built == 1
    assert "Step 3" in first["status"] and first["stage"] is not None
    assert cache.step_views("ROOM1", 1, tuple(records), 2, "vi") is not first  # per language
    assert cache.step_views("ROOM1", 1, tuple(records), 99, "en")["status"].startswith("**Step 4**")  # clamped
    cache.run_figure("ROOM1", 1, tuple(records), "en")
    assert cache.run_figure("ROOM1", 1, tuple(records), "en") is cache.run_figure("ROOM1", 1, tuple(records), "en")


def test_the_cache_is_bounded(records):
    cache = ViewCache(size=3)
    for step in range(4):
        cache.step_views("ROOM1", 1, tuple(records), step, "en")
    cache.step_views("ROOM1", 1, tuple(records), 0, "en")
    assert cache.built == 5  # step 0 was dropped to keep three


def test_a_shared_run_is_finished_and_scrubbable(records):
    run = shared_run(tuple(records), "vi")
    assert run.finished and run.records == records and run.lang == "vi"
    cut = shared_run(tuple(records[:2]))  # the host pressed Stop: no stop reason, still finished
    assert cut.finished and cut.stop_requested


def test_the_bar_escapes_what_the_host_and_link_put_in_it():
    seat = Seat("following", "4KX7P", problems=["no setting '<img src=x onerror=alert(1)>'"])
    text = bar_text(seat, "en")
    assert "<img" not in text and "&lt;img" in text and "**4KX7P**" in text
    host = Seat("host", "4KX7P", link='http://h/?follow=4KX7P"><script>')
    assert "<script>" not in bar_text(host, "vi") and "Bạn đang dẫn phòng" in bar_text(host, "vi")
    assert bar_text(Seat(), "en") == ""


def test_the_empty_views_are_the_labs_placeholders_serialised_once():
    cache = ViewCache()
    empty = cache.empty("vi")
    assert cache.empty("vi") is empty and cache.built == 1
    assert empty["status"].startswith("Bấm **Sinh văn bản**")  # the lab's own empty status line, in Vietnamese
    assert {"chips", "status", "stage", "draw", "run"} <= set(empty) and empty["stage"].type == "plotly"
