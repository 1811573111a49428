"""Stop on the server: the run is cut to what the page showed, the streaming handler sends the frozen views as
its last update and nothing after a press, it keeps at most run.PAGE_AHEAD updates ahead of a page that counts, and what
the page's js sends is checked like any other input (no model: a fake service streams made-up records)."""

from __future__ import annotations

import threading
from dataclasses import fields, replace
from types import SimpleNamespace

import gradio as gr
import pytest

from playground.lab import handlers
from playground.lab.components import LabComponents
from playground.lab.run import PAGE_AHEAD, Pace, Run, parse_seen, wait_until
from playground.lab.view import View

from .test_charts import make_record

CONTROLS = ("Once upon a time", False, 0.8, 0, 1.0, 0.0, "3", 40, "", "hf")  # parse_request's order


class Part:
    """A component as the handlers use it: a distinct key of their {component: value}."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name


class FakeStream:
    """The service's Stream as generate() sees it: records, then closed."""

    def __init__(self, records):
        self.records, self.closed, self.read = list(records), False, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.closed or self.read == len(self.records):
            raise StopIteration
        self.read += 1
        return self.records[self.read - 1]

    def close(self):
        self.closed = True


def records(n: int, last_stops: bool = True) -> list:
    out = [make_record(step=i) for i in range(n)]
    return out[:-1] + [replace(out[-1], stop_reason="max_tokens")] if last_stops else out


@pytest.fixture()
def lab():
    return fake_lab()


def fake_lab() -> LabComponents:
    """The lab's components, each a distinct key, on a fake service that streams made-up records."""
    service = SimpleNamespace(info=SimpleNamespace(name="fake"), streams=[])

    def generate(*args, **kwargs):
        service.streams.append(FakeStream(service.next))
        return service.streams[-1]

    service.generate, service.next = generate, records(20)
    # every component a distinct key, as the handlers use them
    names = [f.name for f in fields(LabComponents) if f.name != "replays"]  # replays: its own (empty) kept runs
    parts = {name: Part(name) for name in names}
    return LabComponents(**{**parts, "service": service, "language": "en"})


def start(lab) -> tuple:
    """A Generate under way: the generator, and the run it streams (after the first update)."""
    gen = handlers.generate(lab, None, *CONTROLS, "en", View())
    first = next(gen)
    return gen, first[lab.run_state]


def chips_in(html: str) -> int:
    return html.count('<span class="ntp-chip')


def stop_in_thread(lab, run, on_page) -> dict:
    """Press Stop while the generator is driven here (Stop waits for the generator's last update)."""
    answer = {}
    thread = threading.Thread(target=lambda: answer.update(out=handlers.stop_run(lab, run, "en", View(), on_page)))
    thread.start()
    assert wait_until(lambda: run.stop_presses == 1, 5)
    answer["thread"] = thread
    return answer


def test_stop_cuts_the_run_to_the_chips_the_page_showed_and_sends_nothing_after_them(lab):
    gen, run = start(lab)
    sent = [next(gen) for _ in range(8)]  # no page counts here: every token goes out
    assert chips_in(sent[-1][lab.chips]) == 8 and run.tag in sent[-1][lab.chips]
    pressed = stop_in_thread(lab, run, f"{run.tag}:5")  # the page had rendered 5 chips of it
    last = next(gen)  # the generator sees the press before its next update: the frozen views, not record 9
    assert chips_in(last[lab.chips]) == 5 and len(run.records) == 5 and run.stop_requested
    assert "stopped by you at step 5" in last[lab.status]
    assert last[lab.scrub]["maximum"] == 5 and last[lab.scrub]["visible"]  # the scrubber and the run chart for them
    assert lab.service.streams[0].closed  # the row left the batch: what the stream still held is dropped
    with pytest.raises(StopIteration):
        next(gen)
    pressed["thread"].join(5)
    assert pressed["out"] == {lab.chips: gr.skip()}  # the generator sent the views, last in its own stream


def test_stop_before_the_first_token_says_so(lab):
    gen, run = start(lab)
    pressed = stop_in_thread(lab, run, f"{run.tag}:0")
    last = next(gen)
    assert run.records == [] and last[lab.status] == "**stopped by you before the first token**"
    assert chips_in(last[lab.chips]) == 0 and lab.scrub not in last
    with pytest.raises(StopIteration):
        next(gen)
    pressed["thread"].join(5)
    assert handlers.frozen(lab, run)[lab.status] == "**stopped by you before the first token**"


def test_chips_of_another_run_on_the_page_mean_none_of_this_one(lab):
    gen, run = start(lab)
    [next(gen) for _ in range(3)]
    stop_in_thread(lab, run, "0123abcd:12")  # the page still showed the last run's 12 chips
    assert next(gen)[lab.status] == "**stopped by you before the first token**"


def test_an_api_caller_without_a_page_count_stops_on_everything_the_server_has(lab):
    gen, run = start(lab)
    [next(gen) for _ in range(6)]
    pressed = stop_in_thread(lab, run, None)
    assert chips_in(next(gen)[lab.chips]) == 6
    list(gen)
    pressed["thread"].join(5)
    out = pressed["out"]
    assert chips_in(out[lab.chips]) == 6 and "stopped by you at step 6" in out[lab.status]


def test_stop_on_a_run_that_ended_redraws_it_whole(lab):
    run = Run(request=object(), records=records(4), lang="en", tag="ab12cd34")
    out = handlers.stop_run(lab, run, "vi", View(), ":4")  # nothing streams: every record is on the page
    assert chips_in(out[lab.chips]) == 4 and len(run.records) == 4
    run = Run(request=object(), records=records(4), lang="en", tag="ab12cd34")
    out = handlers.stop_run(lab, run, "vi", View(), "ab12cd34:4")  # all of its last update on the page
    assert chips_in(out[lab.chips]) == 4 and len(run.records) == 4
    assert handlers.stop_run(lab, Run(), "en", View(), "") == {lab.chips: gr.skip()}  # no run yet


def test_a_stop_pressed_as_the_last_update_left_cuts_the_run_where_the_page_was(lab):
    # the page had the update before the last (so the last went out), and Stop was pressed on it: the server sees
    # the press after the stream ended. The last update's chips keep the run's tag, so the page hides those past
    # the ones it counted (chips.STOP_JS), and Stop cuts the run there as if it had come in time.
    gen, run = start(lab)
    next(gen)
    handlers.page_has(lab, run, f"{run.tag}:1")
    *_, last = gen  # the model ended: its last update, then the stream ends
    assert chips_in(last[lab.chips]) == 20 and f'data-run="{run.tag}"' in last[lab.chips] and not run.streaming
    out = handlers.stop_run(lab, run, "en", View(), f"{run.tag}:1")
    assert chips_in(out[lab.chips]) == 1 and len(run.records) == 1 and "stopped by you at step 1" in out[lab.status]
    assert out[lab.scrub]["value"] == 1 and not out[lab.scrub]["interactive"]  # the scrubber for that one step
    again = handlers.stop_run(lab, run, "en", View(), ":1")  # pressed again on the frozen (untagged) chips
    assert chips_in(again[lab.chips]) == 1


def test_a_stop_that_lands_as_the_handler_ends_past_its_last_look_still_cuts_the_run(lab):
    # the handler sent its last update (every chip, tagged), looked at the presses (none), and the press came
    # before it said it had ended: Stop sees it streaming, waits, and must freeze the views itself (a CI run)
    run = Run(request=object(), records=records(6), lang="en", tag="ab12cd34", streaming="run")
    pressed = stop_in_thread(lab, run, "ab12cd34:2")
    run.streaming = ""  # the handler ends without freezing anything
    pressed["thread"].join(5)
    out = pressed["out"]
    assert chips_in(out[lab.chips]) == 2 and len(run.records) == 2 and "stopped by you at step 2" in out[lab.status]


@pytest.mark.parametrize("value", ["15", "ab:x", "ab:-1", "ab:1.5", "XYZ:3", 7, ["ab", 3]])
def test_what_the_page_sends_is_checked_and_a_bad_value_is_named(lab, value):
    with pytest.raises(ValueError, match="chips on the page"):
        parse_seen(value)
    with pytest.raises(gr.Error, match="chips on the page"):
        handlers.stop_run(lab, Run(request=object(), records=records(2)), "en", View(), value)


def test_what_the_page_sends_reads_as_tag_and_chips():
    assert parse_seen("ab12cd34:15") == ("ab12cd34", 15) and parse_seen(":0") == ("", 0)
    assert parse_seen("") is None and parse_seen(None) is None


def test_a_page_that_counts_is_at_most_page_ahead_updates_behind_and_the_tokens_that_wait_go_in_one(lab):
    gen, run = start(lab)
    first = next(gen)
    handlers.page_has(lab, run, f"{run.tag}:0")  # the page has the empty box, not the first chip yet
    # the next updates go while the page draws the first, each with its one new token, up to the lead
    on_their_way = [first] + [next(gen) for _ in range(PAGE_AHEAD - 1)]
    assert [chips_in(u[lab.chips]) for u in on_their_way] == list(range(1, PAGE_AHEAD + 1))
    # while the page lacks the first the tokens wait; the last one waits for it too, then all go at once
    threading.Timer(0.2, handlers.page_has, (lab, run, f"{run.tag}:1")).start()
    last = next(gen)
    assert chips_in(last[lab.chips]) == 20 and "stopped: reached max new tokens" in last[lab.status]
    handlers.page_has(lab, run, "ffff:3")  # another stream's chips: ignored
    assert run.page_chips == 1


def test_a_stop_pressed_while_the_page_catches_up_with_a_model_that_ended_still_cuts_the_run(lab):
    gen, run = start(lab)
    next(gen)  # the first chip goes out; the model has all 20 tokens before the page has drawn it
    handlers.page_has(lab, run, f"{run.tag}:0")
    for k in range(2, PAGE_AHEAD + 1):  # the next updates go too, up to the lead; then the page is behind
        assert chips_in(next(gen)[lab.chips]) == k
    answer = {}
    press = threading.Timer(0.2, lambda: answer.update(out=handlers.stop_run(lab, run, "en", View(), f"{run.tag}:1")))
    press.start()  # Stop, while the last update waits for the page: the page shows the first chip
    last = next(gen)
    assert chips_in(last[lab.chips]) == 1 and len(run.records) == 1 and "stopped by you at step 1" in last[lab.status]
    with pytest.raises(StopIteration):
        next(gen)
    press.join(5)
    assert answer["out"] == {lab.chips: gr.skip()}  # the generator sent the frozen views itself


def test_the_charts_describe_the_chips_the_page_has(lab):
    lab.service.next = records(20, last_stops=False)
    gen, run = start(lab)
    next(gen)
    handlers.page_has(lab, run, f"{run.tag}:1")
    out = next(gen)  # the page had the first chip: the next update goes out
    assert chips_in(out[lab.chips]) == 2 == len(run.records)
    # its status line and charts, when they go, describe the step the page has, not the server's last
    assert handlers.page_step_views(lab, run, final=False)[lab.status].startswith("**Step 1** of 1 ·")
    assert handlers.page_step_views(lab, run, final=True)[lab.status].startswith("**Step 2** of 2 ·")


def test_pace_holds_only_for_a_page_that_counts_and_not_for_ever(monkeypatch):
    seen = {"chips": None}
    pace = Pace(lambda: seen["chips"], ahead=2)
    pace.went(3)
    seen["chips"] = 0
    assert not pace.behind()  # one update on its way: a second may follow
    pace.went(5)
    seen["chips"] = None
    assert not pace.behind()  # no page counts (an API caller)
    seen["chips"] = 2
    assert pace.behind()  # two on their way, the page lacks the first
    seen["chips"] = 3
    assert not pace.behind()
    pace.went(6)
    assert pace.behind()  # the page lacks 5, the one before the last
    seen["chips"] = 0
    monkeypatch.setattr("playground.lab.run.PAGE_WAIT_S", 0.0)  # a page that stopped answering
    assert not pace.behind()


def test_pace_one_ahead_waits_for_the_last_update_and_a_lead_below_one_is_refused():
    seen = {"chips": 2}
    pace = Pace(lambda: seen["chips"], ahead=1)
    pace.went(3)
    assert pace.behind()
    seen["chips"] = 3
    assert not pace.behind()
    with pytest.raises(ValueError, match="at least 1 update"):
        Pace(lambda: 0, ahead=0)


def test_the_streaming_chips_carry_the_tag_the_js_reads():
    from playground.lab.chips import COUNT_JS, STOP_JS, chips_prefix, token_chips_html

    tagged = token_chips_html(records(3), tag="ab12cd34")
    assert '<div class="ntp-chips" data-run="ab12cd34">' in tagged and chips_in(tagged) == 3
    assert '<div class="ntp-chips" data-run="([0-9a-f]+)">' in COUNT_JS and '<span class="ntp-chip[ "]' in COUNT_JS
    assert chips_prefix() == chips_prefix(tag="") and "data-run" not in token_chips_html(records(3))
    assert '#chips .ntp-chips[data-run="${tag}"] > .ntp-chip:nth-of-type(n+${count + 1})' in STOP_JS


def test_a_language_change_mid_run_leaves_the_views_to_the_stream_which_keeps_its_tag(lab):
    # the stream redraws the chips in the new language from its next update, tagged: Stop must still read them as
    # this run's (untagged, they read as another run's and the run was cut to nothing). The change draws none of
    # the run's views itself: drawn from a run that moved on, they could land after the stream's last update
    gen, run = start(lab)
    [next(gen) for _ in range(4)]
    out = handlers.rerender(lab, "vi", run, "hf", "Once upon a time", View())
    assert lab.chips not in out and lab.stage_plot not in out and lab.order_note in out
    following = next(gen)[lab.chips]
    assert f'data-run="{run.tag}"' in following and chips_in(following) == 5 and "hạng 1" in following
    stop_in_thread(lab, run, f"{run.tag}:5")
    assert "5" in next(gen)[lab.status] and len(run.records) == 5


def test_a_language_change_redraws_the_step_the_run_says_the_page_shows(lab):
    # a link's ?lang= queues the change on load; on a busy server it may run after the run ended. It reads the
    # step from the run (the last one, or where the scrubber went), never the scrubber value its event carried
    gen, run = start(lab)
    list(gen)
    out = handlers.rerender(lab, "vi", run, "hf", "Once upon a time", View())
    assert run.finished and chips_in(out[lab.chips]) == 20 and "ntp-chip ntp-selected" not in out[lab.chips]
    handlers.scrub_to(lab, 3, run, "en", View())
    out = handlers.rerender(lab, "vi", run, "hf", "Once upon a time", View())
    assert out[lab.chips].count("ntp-chip ntp-selected") == 1 and 'ntp-selected" data-step="2"' in out[lab.chips]
    handlers.scrub_to(lab, 20, run, "en", View())  # back at the last step: drawn as a run's end is
    assert "ntp-chip ntp-selected" not in handlers.rerender(lab, "vi", run, "hf", "", View())[lab.chips]
    again, fresh = start(lab)
    assert fresh.scrubbed is None and fresh is not run  # a new run starts at its last step
    again.close()


def test_views_drawn_while_the_run_moved_on_are_drawn_again(lab, monkeypatch):
    gen, run = start(lab)
    list(gen)
    draw, calls = handlers.run_chart, []

    def scrubbed_while_drawing(*args):  # the learner scrubs to step 2 while the first drawing is under way
        calls.append(args)
        if len(calls) == 1:
            run.scrubbed = 1
        return draw(*args)

    monkeypatch.setattr(handlers, "run_chart", scrubbed_while_drawing)
    out = handlers.rerender(lab, "vi", run, "hf", "", View())
    assert len(calls) == 2 and 'ntp-selected" data-step="1"' in out[lab.chips]


def test_a_scrub_that_lands_while_a_branch_streams_leaves_the_branchs_chips(lab):
    # a scrub's answer queued behind another can land after a branch began streaming from the run: redrawing the
    # run's own chips then would hide the branch's, and a Stop would count the run's (clean run 54's failure)
    run = Run(request=object(), records=records(6), lang="en", tag="ab12cd34")
    assert chips_in(handlers.scrub_to(lab, 3, run, "en")[lab.chips]) == 6  # at rest: the step, with every chip
    run.streaming = "branch"
    assert handlers.scrub_to(lab, 3, run, "en") == {lab.chips: gr.skip()}
