"""The model picker through the API: only the host, only the allowlist, and the switch is seen by all."""

from __future__ import annotations

import time

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from ..conftest import HOST_KEY


@pytest.fixture()
def host(picker_app):
    url, keys = picker_app
    return Client(url, verbose=False), keys


def wait_ready(client, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.predict(api_name="/model_info")
        if info["status"]["ready"] and not info["models"]["switching"]:
            return info
        time.sleep(0.25)
    raise AssertionError(info)


def test_model_info_names_the_allowlist_and_the_current_model(host):
    client, keys = host
    info = wait_ready(client)
    assert info["models"]["allowlist"] == keys and info["models"]["current"] in keys


@pytest.mark.parametrize("choice", ["smollm2", "Qwen/Qwen2.5-0.5B", "/etc", "<b>x</b>"])
def test_a_model_off_the_allowlist_is_refused(host, choice):
    client, _ = host
    with pytest.raises(AppError, match="model must be one of the host's models"):
        client.predict(choice, HOST_KEY, api_name="/switch_model")


def test_a_wrong_key_is_refused_slowly(host):
    client, keys = host
    started = time.monotonic()
    for key in ("", "let-me-i", HOST_KEY + " "):
        with pytest.raises(AppError, match="host key"):
            client.predict(keys[1], key, api_name="/switch_model")
    assert time.monotonic() - started >= 3.0  # limits.HOST_KEY_DELAY_SECONDS each


def test_the_host_switches_and_back(host):
    client, keys = host
    before = wait_ready(client)
    other = keys[1] if before["models"]["current"] == keys[0] else keys[0]
    status, line, picker = client.predict(other, HOST_KEY, api_name="/switch_model")  # the header's line, the menu's
    assert status.startswith("**Model:** tiny-") and line == status and picker == other
    after = wait_ready(client)
    assert after["models"]["current"] == other and after["models"]["epoch"] == before["models"]["epoch"] + 1
    assert after["model"]["num_layers"] == (3 if other == keys[1] else 2)
    records = list(client.submit("Hi", 0, 0, 1.0, 0.0, 1, "hf", 2, None, False, 5, api_name="/stream_records"))
    assert len(records) == 2


def test_switching_is_off_unless_the_host_enabled_it():
    from model_service.models.switching import LoadingService
    from playground.page import build_demo

    from ..conftest import byte_tokenizer, tiny_llama

    loading = LoadingService(service=__import__("model_service").ModelService(tiny_llama(), byte_tokenizer()),
                             models=("smollm2", "gemma3-270m"))
    demo = build_demo(loading)  # no policy given: nobody may switch
    fn = next(f for f in demo.fns.values() if f.api_name == "switch_model").fn
    with pytest.raises(Exception, match="switching the model is off"):
        next(fn("gemma3-270m", ""))
    assert loading.current == "smollm2" and loading.switching is None
