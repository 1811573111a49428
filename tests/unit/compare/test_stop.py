"""Compare's Stop: the comparison is cut to the steps the page showed, says so in both languages, and the
streaming texts carry the tag the page's js reads."""

from __future__ import annotations

import re
from dataclasses import fields

import gradio as gr

from playground.compare import handlers, views
from playground.compare.views import COUNT_JS, STOP_JS, columns_html, status_markdown

from .test_views import two_columns


def test_a_stop_keeps_the_steps_the_page_showed_of_this_comparison():
    run = two_columns()
    run.done, run.tag, run.stop_seen = False, "ab12", ("ab12", 1)
    run.freeze()
    assert [len(c) for c in run.columns] == [1, 1] and run.batch_sizes == [2] and run.done and run.stopped
    assert status_markdown(run).endswith("1 steps · one batch of 2 rows · every column chose the same tokens"
                                         " · **stopped by you at step 1**")
    assert status_markdown(run, "vi").endswith("**bạn đã dừng ở bước 1**")


def test_another_comparisons_steps_on_the_page_or_none_mean_before_the_first_token():
    run = two_columns()
    run.tag, run.stop_seen = "ab12", ("ffff", 2)
    run.freeze()
    assert run.length == 0
    assert status_markdown(run) == "**2** columns · seed **5** (the same u's for every column) · " \
                                   "**stopped by you before the first token**"
    assert status_markdown(run, "vi").endswith("**bạn đã dừng trước token đầu tiên**")


def test_a_caller_without_a_page_stops_on_every_step():
    run = two_columns()
    run.stop_seen = None
    run.freeze()
    assert run.length == 2 and run.stopped


def test_what_the_page_has_is_a_view_of_the_first_steps():
    run = two_columns()
    assert run.upto(None) is run and run.upto(5) is run
    first = run.upto(1)
    assert first.length == 1 and run.length == 2 and first.divergence is None and run.divergence == 1


def test_the_streaming_texts_carry_the_tag_the_js_reads():
    html = columns_html(two_columns(), tag="ab12cd34")
    assert '<div class="ntp-compare" data-run="ab12cd34">' in html
    assert re.search(r'<div class="ntp-compare" data-run="\(\[0-9a-f\]\+\)">', COUNT_JS)  # the same markup
    assert html.count('<span class="ntp-ctok') == 4 and '<span class="ntp-ctok[ "]/g' in COUNT_JS
    assert '<div class="ntp-compare">' in columns_html(two_columns())  # untagged once it is not streaming
    assert "#compare-texts .ntp-compare" in STOP_JS and "ntp-ctok" in STOP_JS


def test_a_language_change_redraws_the_step_the_comparison_says_the_page_shows():
    # the change's event may have been queued before this comparison began (a link's ?lang= on a busy server): it
    # reads the step from the comparison, never the scrubber value it carried
    c = handlers.CompareComponents(**{f.name: f.name for f in fields(handlers.CompareComponents)})
    run = two_columns()
    out = handlers.finish(c, run, "en")
    assert run.shown == 1 and out[c.scrub]["value"] == 2  # where the columns part
    assert handlers.rerender(c, "vi", run, None, "")[c.step_table] == views.step_table_html(run, 1, "vi")
    handlers.scrub_to(c, 1, run, "en")
    assert handlers.rerender(c, "vi", run, None, "")[c.step_table] == views.step_table_html(run, 0, "vi")
    run.streaming, run.tag = True, "ab12"  # one still streaming keeps its tag, which Stop reads
    out = handlers.rerender(c, "vi", run, None, "")
    assert 'data-run="ab12"' in out[c.texts] and c.step_table not in out


def test_a_stop_pressed_as_the_last_update_left_cuts_the_comparison_where_the_page_was():
    c = handlers.CompareComponents(**{f.name: f.name for f in fields(handlers.CompareComponents)})
    run = two_columns()
    run.done, run.tag = True, "ab12"
    out = handlers.finish(c, run, "en")  # the comparison's last update keeps its tag: the page can hide its tail
    assert '<div class="ntp-compare" data-run="ab12">' in out[c.texts]
    assert handlers.stop(c, run, "en", "ab12:2") == {c.texts: gr.skip()}  # the page had every step: nothing to cut
    assert handlers.stop(c, run, "en", "ffff:1") == {c.texts: gr.skip()}  # another comparison's steps
    out = handlers.stop(c, run, "en", "ab12:1")  # it had one step when Stop was pressed
    assert run.length == 1 and run.stopped and out[c.status].endswith("**stopped by you at step 1**")
