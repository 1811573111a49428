"""Rows per step sized for a simulated GPU card, and the device and dtype the loader picks."""

from __future__ import annotations

import json

import pytest

from model_service import limits
from model_service.engine.card import kv_bytes_per_token, rows_for_card

from ...conftest import ROOT

GB = 10**9
LLAMA = json.loads((ROOT / "assets" / "llama-3.1-8b.json").read_text())["config"]


def llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(**{k: v for k, v in LLAMA.items() if k not in ("architectures", "torch_dtype")})


def test_kv_cache_of_llama_8b_is_128_kib_a_token_at_bf16():
    # 2 (keys, values) × 32 layers × 8 kv heads × 128 × 2 bytes
    assert kv_bytes_per_token(llama_config(), 2) == 131072


@pytest.mark.parametrize("card, total, expected", [
    # (24 GB × 0.85 − 16.06 GB of weights) / (1,536 tokens × 128 KiB + 12 × 128,256 × 4 B) = 4.34 GB / 207.5 MB = 20.9
    ("L4 / A10G (24 GB)", 24 * GB, 20),
    ("L40S (48 GB)", 48 * GB, 64),
    ("A100 (80 GB)", 80 * GB, 64),
    ("ZeroGPU H200 slice (74.6 GB)", 74_625_056_768, 64),
])
def test_llama_8b_rows_per_card(card, total, expected):
    weights = 8_030_261_248 * 2
    rows = rows_for_card(total, weights, kv_bytes_per_token(llama_config(), 2), LLAMA["vocab_size"])
    assert rows == expected, card


def test_a_card_too_small_still_runs_one_row_and_the_cap_holds():
    assert rows_for_card(16 * GB, 16 * GB, 131072, 128256) == 1
    assert rows_for_card(10**15, 1, 1, 1) == limits.MAX_ROWS_GPU


def test_cuda_means_bf16_and_the_cpu_float32(monkeypatch):
    import torch

    from model_service.models.loading import pick_device

    assert pick_device("cpu") == (torch.device("cpu"), torch.float32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a simulated card (ZeroGPU answers so too)
    assert pick_device(None) == (torch.device("cuda"), torch.bfloat16)
    assert pick_device("cuda:1") == (torch.device("cuda:1"), torch.bfloat16)
    monkeypatch.setenv("NTP_DEVICE", "cpu")
    assert pick_device(None)[1] == torch.float32


def test_a_model_on_a_simulated_card_gets_rows_for_that_card(monkeypatch):
    """The room is sized through card_rows (card.room_limits, which the service and a scheduler process call):
    the tiny model 'on' a 1 MB card gets one row."""
    import torch

    from model_service.engine import card

    from ...conftest import tiny_llama

    model = tiny_llama()
    monkeypatch.setattr(type(model), "device", property(lambda self: torch.device("cuda")))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: type("P", (), {"total_memory": 10**6})())
    assert card.card_rows(model) == 1
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: type("P", (), {"total_memory": 10**12})())
    assert card.room_limits(model) == (limits.MAX_ROWS_GPU, limits.QUEUE_SIZE)
