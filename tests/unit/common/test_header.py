"""The header's status line, and the page importing no torch (the UI renders records only)."""

from __future__ import annotations

import subprocess
import sys

from model_service.records.step import LoadStatus
from playground.header import model_line

from ...conftest import ROOT


def test_the_status_line_for_each_state():
    assert model_line(LoadStatus(1.0, "SmolLM2 · cpu · float32", True)) == "**Model:** SmolLM2 · cpu · float32"
    assert model_line(LoadStatus(0.4, "reading weights", False)).startswith("⏳ Loading the model… 40%")
    assert model_line(LoadStatus(0.4, "switching to gemma3-270m: reading", False), switching="gemma3-270m").startswith(
        "🔄 The host is switching the model… 40%")
    assert model_line(LoadStatus(0.1, "model failed to load", False, "no such model")).startswith(
        "⚠️ **The model failed to load:** no such model")
    kept = model_line(LoadStatus(1.0, "SmolLM2", True, "could not switch to x: gated"))
    assert kept.startswith("**Model:** SmolLM2") and "could not switch to x: gated" in kept


def test_the_status_line_escapes_what_it_quotes():
    line = model_line(LoadStatus(1.0, "<img src=x onerror=alert(1)>", True, "<script>"))
    assert "<img" not in line and "<script>" not in line and "&lt;img" in line


def test_the_device_and_dtype_are_in_the_status_line():
    from model_service.records.step import ModelInfo

    info = ModelInfo(name="Llama-3.1-8B", source="hub", parameters=8_030_261_248, vocab_size=128256, hidden_size=4096,
                     num_layers=32, device="cuda:0", dtype="bfloat16", has_chat_template=False, adds_bos=True,
                     eos_token_ids=(128001,), load_seconds=1.0, from_cache=False, device_name="NVIDIA L4")
    assert info.describe().endswith("32 layers · cuda:0 (NVIDIA L4) · bfloat16")


def test_the_page_imports_no_torch():
    code = "import sys, playground.page, playground.header; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_the_status_line_and_the_pickers_note_in_vietnamese():
    from playground.header import picker_note
    from playground.hosting import SwitchPolicy

    assert model_line(LoadStatus(0.4, "x", False), "vi", "gemma3-270m").startswith("🔄 Người chủ trì đang đổi mô hình… 40%")

    class Room:
        models = ("smollm2", "<b>mine</b>")

    note = picker_note(Room(), SwitchPolicy("key", "key"), "vi")
    assert note.startswith("Khóa của người chủ trì") and "&lt;b&gt;mine&lt;/b&gt;" in note
