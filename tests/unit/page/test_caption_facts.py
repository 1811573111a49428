"""A caption's facts: declared, checked when the scene file loads (naming the field), and read from the scene's
own run (no model: made-up records), escaped, and said to be missing rather than made up."""

from __future__ import annotations

from dataclasses import replace

import pytest

from playground.workshop.caption_facts import Fact, fill, parse_facts, read
from playground.workshop.scenes import SceneError, parse_file

from ..lab.test_charts import make_record
from .test_scenes import GOOD, a_file

CAPTIONS = {"en": "{top} falls to {after}", "vi": "{top} tụt xuống {after}"}
FACTS = {"top": {"show": "token_p", "at": "raw"}, "after": {"show": "p", "at": "top_p", "rank_at": "raw"}}


def test_facts_are_read_from_the_run_as_the_charts_write_them():
    records = [make_record(step=0), make_record(step=1, chosen=1)]
    facts = parse_facts(FACTS, CAPTIONS, "here")
    assert fill("{top} falls to {after}", facts, records) == '"␣Paris" (50.0%) falls to 75.0%'
    assert read(Fact("token", step=2, pick="chosen"), records) == '"␣the"'
    assert read(Fact("removed", at="top_k"), records, "en") == '"↵" (6.0%) and "&lt;b&gt;" (2.0%)'
    assert read(Fact("removed", at="top_k"), records, "vi") == '"↵" (6.0%) và "&lt;b&gt;" (2.0%)'
    assert read(Fact("removed", at="top_p"), records) == '"␣London" (13.1%)'
    assert (read(Fact("kept", at="top_k"), records), read(Fact("mass", at="top_p"), records)) == ("3", "0.87")
    assert read(Fact("text"), [replace(records[-1], text="a *b* <i>")]) == '"a \\*b\\* &lt;i&gt;"'


def test_a_fact_the_run_cannot_give_says_so_and_no_run_yet_says_to_look():
    facts = parse_facts({"x": {"show": "p", "at": "xtc"}, "y": {"show": "token", "step": 9}}, {"en": "{x} {y}", "vi": "{x} {y}"},
                        "here")
    records = [make_record()]
    assert fill("{x} {y}", facts, records) == "(not in this model's run) (not in this model's run)"
    assert fill("{x} {y}", facts, None, "vi") == "(xem lượt chạy) (xem lượt chạy)"
    assert fill("{x} {not_a_fact}", facts, records).endswith(" {not_a_fact}")  # the host's own braces stay
    assert read(Fact("mu_low"), records) is None  # no mirostat in this run
    mus = [replace(make_record(step=i), mirostat_mu=mu) for i, mu in enumerate((6.0, 8.25, 7.5))]
    assert (read(Fact("mu_low", step=2), mus), read(Fact("mu_high", step=2), mus)) == ("7.5", "8.2")


@pytest.mark.parametrize("facts, captions, message", [
    ({"top": {"show": "logits"}}, {"en": "{top}", "vi": "{top}"}, "fact 'top': field 'show' must be one of token"),
    ({"top": {"show": "p", "step": 0}}, {"en": "{top}", "vi": "{top}"}, "field 'step' must be a whole number of at least 1"),
    ({"top": {"show": "p", "pick": "last"}}, {"en": "{top}", "vi": "{top}"}, "field 'pick' must be one of top, chosen"),
    ({"top": {"show": "p", "at": "<b>"}}, {"en": "{top}", "vi": "{top}"}, "field 'at' must be a stage's name"),
    ({"top": {"show": "p", "colour": 1}}, {"en": "{top}", "vi": "{top}"}, "unknown field 'colour'"),
    ({}, {"en": "{top}", "vi": "x"}, "the en caption names {top}, which field 'facts' does not declare"),
    ({"top": {"show": "p"}}, {"en": "{top}", "vi": "x"}, "fact 'top' must appear in the caption of every language"),
    ([1], {"en": "x", "vi": "x"}, "field 'facts' must be an object"),
])
def test_a_bad_fact_is_named_with_its_field(facts, captions, message):
    with pytest.raises(ValueError, match="here") as error:
        parse_facts(facts, captions, "here")
    assert message in str(error.value)


def test_a_scene_file_checks_its_facts_and_they_read_the_labs_run():
    scene = {**GOOD, "caption": {"en": "{top} " * 20, "vi": "{top} " * 20}, "facts": {"top": {"show": "token"}}}
    assert parse_file(a_file({**scene, "run": True}), "mine.json")[0].facts == {"top": Fact("token")}
    with pytest.raises(SceneError, match=r"mine.json: scene 1 \('my-scene'\): field 'facts' reads the lab's run"):
        parse_file(a_file(scene), "mine.json")  # run false: no run to read
    with pytest.raises(SceneError, match="fact 'top': field 'show'"):
        parse_file(a_file({**scene, "run": True, "facts": {"top": {"show": "x"}}}), "mine.json")
