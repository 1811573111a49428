"""The model picker's allowlist: the host's, checked; a visitor can only pick one of its keys."""

from __future__ import annotations

import pytest

from model_service.models import catalog
from model_service.models.catalog import CATALOG, canonical, choose, default_allowlist, load_target, parse_allowlist


def test_the_offline_two_everywhere_the_larger_ones_on_a_gpu_the_gated_ones_with_a_token():
    assert default_allowlist(gpu=False, token=False) == ("smollm2", "gemma3-270m")  # both packages installed here
    assert default_allowlist(gpu=True, token=False) == ("smollm2", "gemma3-270m", "qwen2.5-1.5b", "smollm2-1.7b")
    assert default_allowlist(gpu=True, token=True)[-2:] == ("llama-3.2-1b", "llama-3.1-8b")


def test_without_its_package_a_gated_offline_model_needs_a_token(monkeypatch):
    monkeypatch.setattr(catalog.Entry, "offline", lambda self: False)  # a Space: requirements.txt only
    assert default_allowlist(gpu=False, token=False) == ("smollm2",)
    assert load_target("smollm2") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert load_target("gemma3-270m") == "google/gemma-3-270m"


def test_load_targets_here():
    assert load_target("smollm2") == "smollm2" and load_target("qwen2.5-1.5b") == "Qwen/Qwen2.5-1.5B-Instruct"
    assert load_target("my-org/my-model") == "my-org/my-model"  # the host's own id, as given


def test_the_hosts_list_keeps_order_puts_the_start_model_first_and_knows_aliases_and_hub_ids():
    assert parse_allowlist("gemma, Qwen/Qwen2.5-1.5B-Instruct ,smollm2,", start="smollm2", gpu=False, token=False) == (
        "smollm2", "gemma3-270m", "qwen2.5-1.5b")
    assert parse_allowlist(None, start="gemma3-270m", gpu=False, token=False) == ("gemma3-270m", "smollm2")
    assert parse_allowlist("  ", start=None, gpu=False, token=False) == ("smollm2", "gemma3-270m")
    assert canonical("SmolLM2-135M-Instruct") == "smollm2" and canonical("./my-dir") == "./my-dir"


@pytest.mark.parametrize("value", ["qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct", "<script>", "", None, ["smollm2"], "x" * 500])
def test_a_visitor_picks_only_a_key_of_the_allowlist(value):
    with pytest.raises(ValueError, match="model must be one of the host's models") as err:
        choose("model", value, ("smollm2", "gemma3-270m"))
    assert "x" * 100 not in str(err.value)  # long free text is not echoed back


def test_every_key_and_hub_id_is_unique():
    assert len({e.hub_id for e in CATALOG.values()}) == len(CATALOG)
    assert all(e.key == key for key, e in CATALOG.items())
