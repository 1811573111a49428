"""A request's sampling settings are checked once, at the edge where they come in: the lab's Generate, the Engine
and Compare tables, /stream_records, the OpenAI API (n choices: one check, then a seed each) and the JSON that the
scheduler process, the Ray route and the remote client read (settings_from). This counts every check of a knob's
number (validation.number, named as that entry point names the field) per request."""

from __future__ import annotations

import collections

import pytest

from model_service.records import validation
from model_service.records.settings import SamplingSettings, settings_from
from playground.api import stream_records_of
from playground.compare.columns import parse_comparison
from playground.engine.table import parse_table
from playground.lab.request import parse_request
from playground.openai_api import schema

from ...app.lab_args import KNOBS_OFF


def counted(monkeypatch, name: str) -> collections.Counter:
    """field name -> how many times validation.<name> checked a value under it, from here on."""
    counter, check = collections.Counter(), getattr(validation, name)

    def counting(field, value, **kwargs):
        counter[field] += 1
        return check(field, value, **kwargs)

    monkeypatch.setattr(validation, name, counting)
    return counter


@pytest.fixture()
def checks(monkeypatch):
    """field name -> how many times a number was checked under it, from here on."""
    return counted(monkeypatch, "number")


class RecordingService:
    """What /stream_records hands the service: the settings, taken as they are."""

    def generate(self, prompt, settings, **kwargs):
        self.settings = settings
        return iter(())


def test_the_labs_generate_checks_each_knob_once(checks):
    request = parse_request("Hi", False, "0.7", "40", "0.9", "0.05", "3", "8", "", "hf", *KNOBS_OFF)
    assert request.settings.temperature == 0.7
    assert checks["temperature"] == 1 and checks["top-k"] == 1 and checks["typical-p"] == 1


def test_stream_records_checks_each_knob_once(checks):
    service = RecordingService()
    list(stream_records_of(service)("Hi", 0.7, 40, 0.9, 0.05, 3, "hf", 8, top_h=0.4))
    assert service.settings.top_h == 0.4
    assert checks["temperature"] == 1 and checks["top_k"] == 1 and checks["top_h"] == 1


def test_an_openai_request_of_three_choices_checks_its_settings_once(checks):
    plan = schema.parse({"prompt": "x", "temperature": 0.7, "top_p": 0.9, "n": 3, "seed": 5}, "completion")
    assert [s.seed for s in plan.settings] == [5, 6, 7] and {s.temperature for s in plan.settings} == {0.7}
    # OpenAI's own range first (0-2), then the sampler's: one check each, not one per choice
    assert checks["temperature"] == 2 and checks["top_p"] == 1 and checks["min_p"] == 1


def test_a_table_row_and_a_comparisons_column_are_each_checked_once(checks):
    numbers, requests = parse_table([["Hi", 0.7, 0, 1, 0, "hf", "", 8, "", 1, 0, 0]])
    assert len(requests) == 1 and checks["temperature"] == 1
    checks.clear()
    comparison = parse_comparison("Hi", [[0.7, 0, 1, 0, "hf"], [1.2, 0, 1, 0, "vllm"]], "1", 4)
    assert len(comparison.requests) == 2 and checks["temperature"] == 2  # two columns: one check each


def test_settings_read_from_json_are_checked_once_and_settings_given_as_they_are_not_again(checks):
    settings = settings_from({"temperature": "0.7", "order": "llama.cpp", "dry_multiplier": 0.8})
    assert settings.temperature == 0.7 and checks["temperature"] == 1 and checks["dry_multiplier"] == 1
    checks.clear()
    assert settings_from(settings) is settings and settings.with_seed(9).seed == 9
    assert checks["temperature"] == 0 and checks["seed"] == 1  # a new seed is checked; the rest is as it was


def test_settings_built_directly_are_still_checked_naming_the_field():
    with pytest.raises(validation.InputError, match="^temperature must be a number"):
        SamplingSettings(temperature=-1)
    with pytest.raises(validation.InputError, match="^seed must be a whole number"):
        SamplingSettings().with_seed("x")


def test_stop_strings_are_checked_once_at_the_edge_and_taken_as_they_are_after(monkeypatch):
    checked = counted(monkeypatch, "text")
    request = parse_request("Hi", False, "0.7", "40", "0.9", "0.05", "3", "8", "\\n|.", "hf", *KNOBS_OFF)
    assert request.stop == ("\n", ".") and checked["stop strings"] == 2  # one check per stop string
    assert validation.stop_strings("stop", request.stop) is request.stop  # the service takes them as they are
    plan = schema.parse({"prompt": "x", "stop": [".", "!"], "n": 2}, "completion")
    checked.clear()
    assert all(validation.stop_strings("stop", r.stop) is plan.stop for r in plan.requests([1]))
    assert not checked
    assert validation.stop_strings("stop", [".", "!"]) == plan.stop and checked["stop"] == 2  # JSON's list: checked
