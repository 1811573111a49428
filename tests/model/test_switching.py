"""The host's model switch: only models on the allowlist, the room told, the old model's memory freed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from model_service import SamplingSettings
from model_service.models.switching import LoadingService, ServiceNotReady

from ..conftest import ROOT

# Run in a fresh process: the resident set of this test process carries every other test's models.
SWITCH_AND_BACK = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from model_service import SamplingSettings
from model_service.models import huge_pages
from model_service.models.switching import LoadingService

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))

def use(loader):  # touch every weight: a generation, then a trace; and the room settled (its weights in huge pages)
    list(loader.generate("The capital of France is", SamplingSettings(temperature=0), max_new_tokens=4))
    loader.trace("The capital of France is")
    assert huge_pages.settled(loader.service.model, 120)

loader = LoadingService("smollm2", models=("smollm2", "gemma3-270m"))
assert loader.wait(300).ready, loader.status
use(loader)
first = rss_mb()
seen = [(loader.current, loader.epoch, loader.info.name)]
for key in ("gemma3-270m", "smollm2"):
    loader.switch(key)
    status = loader.wait(300)
    assert status.ready and not status.error, status
    use(loader)
    seen.append((loader.current, loader.epoch, loader.info.name))
print(json.dumps({"first": first, "back": rss_mb(), "seen": seen}))
"""


def test_switching_away_and_back_gives_the_memory_back():
    out = subprocess.run([sys.executable, "-c", SWITCH_AND_BACK, str(ROOT)], capture_output=True, text=True,
                         timeout=600, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(__import__("pathlib").Path.home())})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert [key for key, _, _ in result["seen"]] == ["smollm2", "gemma3-270m", "smollm2"]
    assert [epoch for _, epoch, _ in result["seen"]] == [1, 2, 3]
    assert result["seen"][1][2] == "Gemma-3-270M"
    # Gemma alone takes ~1 GB more than SmolLM2: without the release, "back" would carry it.
    assert result["back"] <= result["first"] * 1.10, result


@pytest.fixture()
def loader(tiny_service):
    return LoadingService(service=tiny_service, models=("smollm2", "gemma3-270m"))


@pytest.mark.parametrize("choice", ["Qwen/Qwen2.5-0.5B", "../../etc", "", None, 3, "SMOLLM2"])
def test_only_a_model_on_the_allowlist_can_be_chosen(loader, choice):
    with pytest.raises(ValueError, match="model must be one of the host's models"):
        loader.switch(choice)


def test_a_switch_ends_requests_in_flight_with_a_clear_message(tmp_path):
    from model_service import ModelService

    from ..conftest import byte_tokenizer, tiny_llama

    old = ModelService(tiny_llama(), byte_tokenizer())
    stream = old.generate("Hello", SamplingSettings(temperature=0, seed=1), max_new_tokens=200, ignore_eos=True)
    next(stream)
    old.close("The host switched the model to gemma3-270m; press the button again in a moment.")
    with pytest.raises(RuntimeError, match="switched the model"):
        for _ in stream:
            pass
    with pytest.raises(RuntimeError, match="switched the model"):
        old.trace("Hello")
    assert old.model is None


def test_while_switching_the_page_is_told_to_wait():
    loading = LoadingService.__new__(LoadingService)
    from model_service.records.step import LoadStatus

    loading._status, loading._switching = LoadStatus(0.4, "switching to gemma3-270m: reading weights", False), "gemma3-270m"
    with pytest.raises(ServiceNotReady, match="switching the model"):
        loading.generate("Hi")
