"""app.py's flags: booleans parsed strictly (NTP_SHARE=False must not turn sharing on)."""

from __future__ import annotations

import pytest

import app


@pytest.mark.parametrize("value, expected", [
    ("", False), ("0", False), ("false", False), ("False", False), ("no", False), ("off", False),
    ("1", True), ("true", True), ("YES", True), ("on", True),
])
def test_share_is_parsed_strictly(monkeypatch, value, expected):
    monkeypatch.setenv("NTP_SHARE", value)
    assert app.parse_args([]).share is expected


@pytest.mark.parametrize("name, value", [("NTP_SHARE", "maybe"), ("NTP_PORT", "http"), ("NTP_MAX_ROWS", "0")])
def test_anything_else_stops_the_start_naming_the_variable(monkeypatch, capsys, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        app.parse_args([])
    assert name in str(stop.value)


def test_lang_vi_runs_the_multilingual_model_unless_one_is_named(monkeypatch):
    import app

    monkeypatch.delenv("NTP_MODEL", raising=False)
    monkeypatch.delenv("NTP_LANG", raising=False)
    assert app.parse_args(["--lang", "vi"]).model == "gemma3-270m"
    assert app.parse_args(["--lang", "vi", "--model", "smollm2"]).model == "smollm2"
    assert app.parse_args(["--lang", "en"]).model is None
    assert app.parse_args([]).lang is None
    monkeypatch.setenv("NTP_LANG", "vi")
    assert app.parse_args([]).model == "gemma3-270m"
    monkeypatch.setenv("NTP_LANG", "fr")
    with pytest.raises(SystemExit, match="NTP_LANG must be one of en, vi"):
        app.parse_args([])
