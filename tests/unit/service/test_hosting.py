"""Where the app runs, read from a simulated environment (the variables Hugging Face Spaces set), and
the defaults and switch policy that follow."""

from __future__ import annotations

import pytest

from playground.hosting import Machine, defaults, detect, has_token, switch_policy

LAPTOP: dict = {}
CPU_SPACE = {"SPACE_ID": "teacher/next-token", "SPACE_HOST": "teacher-next-token.hf.space", "ACCELERATOR": "none",
             "SYSTEM": "spaces", "CPU_CORES": "2", "MEMORY": "16Gi"}
L4_SPACE = {**CPU_SPACE, "ACCELERATOR": "l4x1", "CPU_CORES": "8", "MEMORY": "30Gi"}
ZERO_SPACE = {**CPU_SPACE, "SPACES_ZERO_GPU": "true"}


@pytest.mark.parametrize("env, space, gpu, zero, accelerator", [
    (LAPTOP, None, False, False, None),
    (CPU_SPACE, "teacher/next-token", False, False, None),
    (L4_SPACE, "teacher/next-token", True, False, "l4x1"),
    (ZERO_SPACE, "teacher/next-token", True, True, None),
    ({"SYSTEM": "spaces"}, "unknown/space", False, False, None),  # Gradio's own test for a Space
    ({"SPACE_ID": "a/b", "ACCELERATOR": "A10G-Small"}, "a/b", True, False, "a10g-small"),
])
def test_detect_reads_the_space_variables(env, space, gpu, zero, accelerator):
    host = detect(env)
    assert (host.space_id, host.gpu, host.zero_gpu, host.accelerator) == (space, gpu, zero, accelerator)
    assert host.on_space is (space is not None)


@pytest.mark.parametrize("value, expected", [("true", True), ("True", True), ("1", True), ("t", True),
                                             ("false", False), ("0", False), ("", False), ("yes", False)])
def test_zero_gpu_is_read_as_the_spaces_package_reads_it(value, expected):
    assert detect({"SPACE_ID": "a/b", "SPACES_ZERO_GPU": value}).zero_gpu is expected


def test_defaults_on_a_laptop_change_nothing():
    d = defaults(detect(LAPTOP), cuda=False, env={})
    assert (d.bind, d.model, d.gpu, d.token) == ("127.0.0.1", "smollm2", False, False)
    # a laptop with a GPU still starts on the embedded model (the README's command), offering the larger ones
    d = defaults(detect(LAPTOP), cuda=True, env={})
    assert (d.bind, d.model, d.gpu) == ("127.0.0.1", "smollm2", True)


@pytest.mark.parametrize("env, model, gpu", [
    (CPU_SPACE, "smollm2", False),
    (L4_SPACE, "qwen2.5-1.5b", True),
    (ZERO_SPACE, "qwen2.5-1.5b", True),
])
def test_defaults_on_a_space_serve_a_room(env, model, gpu):
    d = defaults(detect(env), cuda=False, env=env)
    assert (d.bind, d.model, d.gpu) == ("0.0.0.0", model, gpu)


def test_a_token_is_any_of_the_hub_variables():
    assert not has_token({}) and not has_token({"HF_TOKEN": "  "})
    assert has_token({"HF_TOKEN": "hf_x"}) and has_token({"HUGGING_FACE_HUB_TOKEN": "hf_x"})


TWO = ("smollm2", "gemma3-270m")


@pytest.mark.parametrize("host, kwargs, mode", [
    (Machine(), dict(models=("smollm2",), bind="127.0.0.1", share=False, host_key=None), "off"),  # nothing to switch to
    (Machine(), dict(models=TWO, bind="127.0.0.1", share=False, host_key=None), "open"),  # only this machine reaches it
    (Machine(), dict(models=TWO, bind="0.0.0.0", share=False, host_key=None), "off"),  # a room, no key
    (Machine(), dict(models=TWO, bind="127.0.0.1", share=True, host_key=None), "off"),  # a public link, no key
    (Machine(), dict(models=TWO, bind="0.0.0.0", share=False, host_key="k"), "key"),
    (Machine("a/b"), dict(models=TWO, bind="127.0.0.1", share=False, host_key=None), "off"),  # a Space is public
    (Machine("a/b", accelerator="l4x1"), dict(models=TWO, bind="0.0.0.0", share=False, host_key="k"), "key"),
    (Machine("a/b", zero_gpu=True), dict(models=TWO, bind="0.0.0.0", share=False, host_key="k"), "off"),
])
def test_who_may_switch_the_model(host, kwargs, mode):
    policy = switch_policy(host, **kwargs)
    assert policy.mode == mode and policy.why and policy.enabled is (mode != "off")
