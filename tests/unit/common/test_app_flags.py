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


@pytest.mark.parametrize("name, value", [("NTP_SHARE", "maybe"), ("NTP_PORT", "http"), ("NTP_MAX_ROWS", "0"),
                                         ("NTP_BATCH_INVARIANT", "sometimes"), ("NTP_CUDA_GRAPHS", "maybe")])
def test_anything_else_stops_the_start_naming_the_variable(monkeypatch, capsys, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        app.parse_args([])
    assert name in str(stop.value)


@pytest.mark.parametrize("variable, flag, expected", [
    (None, [], None), ("yes", [], True), ("off", [], False), ("on", ["--batch-invariant", "false"], False),
    (None, ["--batch-invariant", "1"], True),
])
def test_batch_invariant_is_unset_true_or_false_and_the_flag_wins(monkeypatch, variable, flag, expected):
    if variable is None:
        monkeypatch.delenv("NTP_BATCH_INVARIANT", raising=False)
    else:
        monkeypatch.setenv("NTP_BATCH_INVARIANT", variable)
    assert app.parse_args(flag).batch_invariant is expected  # None: the device's default (limits.py)


def test_a_bad_batch_invariant_flag_stops_the_start_naming_it(monkeypatch, capsys):
    monkeypatch.delenv("NTP_BATCH_INVARIANT", raising=False)
    with pytest.raises(SystemExit):
        app.parse_args(["--batch-invariant", "sometimes"])
    assert "--batch-invariant" in capsys.readouterr().err


SPACE_VARIABLES = ("SPACE_ID", "SYSTEM", "SPACES_ZERO_GPU", "ACCELERATOR", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                   "NTP_MODEL", "NTP_MODELS", "NTP_HOST", "NTP_HOST_KEY", "NTP_SHARE", "NTP_LANG")


@pytest.fixture()
def env(monkeypatch):
    """A clean environment to simulate a machine in: no Space variables, no NTP_* choices."""
    for name in SPACE_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def set_(**values):
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_


def test_locally_nothing_changes(env):
    args = app.parse_args([])
    assert (args.bind, args.model, args.machine.on_space) == ("127.0.0.1", "smollm2", False)
    assert args.models[:2] == ("smollm2", "gemma3-270m") and args.policy.mode == "open"


def test_a_cpu_space_serves_a_room_on_the_small_models(env):
    env(SPACE_ID="teacher/next-token", SYSTEM="spaces", ACCELERATOR="none")
    args = app.parse_args([])
    assert (args.bind, args.model, args.models) == ("0.0.0.0", "smollm2", ("smollm2", "gemma3-270m"))
    assert args.policy.mode == "off"  # a public Space and no host key


def test_a_gpu_space_starts_on_the_gpu_model_and_offers_the_larger_ones(env):
    env(SPACE_ID="teacher/next-token", ACCELERATOR="l4x1", NTP_HOST_KEY="k3y")
    args = app.parse_args([])
    assert (args.bind, args.model) == ("0.0.0.0", "qwen2.5-1.5b")
    assert args.models == ("qwen2.5-1.5b", "smollm2", "gemma3-270m", "smollm2-1.7b")  # no token: no Llama
    assert args.policy.mode == "key"


def test_with_a_token_the_gated_models_join(env):
    env(SPACE_ID="teacher/next-token", ACCELERATOR="a100-large", HF_TOKEN="hf_test")
    assert {"llama-3.2-1b", "llama-3.1-8b"} <= set(app.parse_args([]).models)


def test_on_zero_gpu_the_model_is_fixed_at_startup(env):
    env(SPACE_ID="teacher/next-token", SPACES_ZERO_GPU="true", NTP_HOST_KEY="k3y")
    args = app.parse_args([])
    assert args.machine.zero_gpu and args.model == "qwen2.5-1.5b" and args.policy.mode == "off"


def test_the_hosts_flags_win_over_the_space_defaults(env):
    env(SPACE_ID="teacher/next-token", ACCELERATOR="l4x1", NTP_MODEL="smollm2", NTP_MODELS="smollm2,llama-3.1-8b")
    args = app.parse_args(["--host", "127.0.0.1"])
    assert (args.bind, args.model, args.models) == ("127.0.0.1", "smollm2", ("smollm2", "llama-3.1-8b"))


def test_zero_gpu_without_the_spaces_package_stops_with_a_clear_message(env, monkeypatch):
    import sys

    env(SPACE_ID="teacher/next-token", SPACES_ZERO_GPU="true")
    monkeypatch.setitem(sys.modules, "spaces", None)  # `import spaces` fails as if it were not installed
    import importlib

    import model_service.deploy.zero_gpu as zero_gpu

    importlib.reload(zero_gpu)
    try:
        with pytest.raises(SystemExit, match="spaces"):
            app.main([])
    finally:
        monkeypatch.delitem(sys.modules, "spaces")
        importlib.reload(zero_gpu)


def test_lang_vi_runs_the_multilingual_model_unless_one_is_named(monkeypatch, env):
    import app

    monkeypatch.delenv("NTP_MODEL", raising=False)
    monkeypatch.delenv("NTP_LANG", raising=False)
    assert app.parse_args(["--lang", "vi"]).model == "gemma3-270m"
    assert app.parse_args(["--lang", "vi", "--model", "smollm2"]).model == "smollm2"
    assert app.parse_args(["--lang", "en"]).model == "smollm2"  # the default
    assert app.parse_args([]).lang is None
    monkeypatch.setenv("NTP_LANG", "vi")
    assert app.parse_args([]).model == "gemma3-270m"
    monkeypatch.setenv("NTP_LANG", "fr")
    with pytest.raises(SystemExit, match="NTP_LANG must be one of en, vi"):
        app.parse_args([])


def test_lang_vi_on_a_gpu_space_keeps_its_multilingual_gpu_model(monkeypatch, env):
    monkeypatch.delenv("NTP_LANG", raising=False)
    env(SPACE_ID="teacher/next-token", ACCELERATOR="l4x1")
    assert app.parse_args(["--lang", "vi"]).model == "qwen2.5-1.5b"


def test_on_zero_gpu_the_queue_keeps_room_for_a_room(monkeypatch):
    """Gradio caps the queue at one waiting event on ZeroGPU unless max_size is given: we always give it."""
    import gradio as gr

    from playground import limits
    from playground.page import queue_options

    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    with gr.Blocks() as bare:
        gr.Markdown("x")
    assert bare.queue()._queue.max_size == 1  # what Gradio does on its own there
    with gr.Blocks() as ours:
        gr.Markdown("x")
    assert ours.queue(**queue_options())._queue.max_size == limits.GRADIO_QUEUE_SIZE
