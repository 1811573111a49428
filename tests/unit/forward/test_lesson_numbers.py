"""The lessons' Llama-3.1-8B numbers beside the live model's, from the config shipped in assets/."""

from __future__ import annotations

from model_service.records.step import ModelInfo
from playground.forward.lesson_numbers import lesson_markdown, lesson_model


def info(**changes) -> ModelInfo:
    base = dict(name="SmolLM2-135M-Instruct", source="test", parameters=134_515_008, vocab_size=49152, hidden_size=576,
                num_layers=30, device="cpu", dtype="float32", has_chat_template=True, adds_bos=False,
                eos_token_ids=(2,), load_seconds=0.0, from_cache=True)
    return ModelInfo(**{**base, **changes})


def rows(markdown: str) -> dict[str, list[str]]:
    out = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] and not cells[0].startswith(":--"):
            out[cells[0]] = cells[1:]
    return out


def test_the_lessons_numbers_are_llama_3_1_8b_s():
    table = rows(lesson_markdown(info(), 5))
    ours, theirs = zip(*table.values())
    assert theirs == ("6 (with the begin marker)", "33 of 4,096 (32 blocks + 1)", "(1, 6, 128,256)",
                      "128,256 × 4,096, 1.05 GB at bfloat16", "3.08 MB")
    assert ours == ("5 (no begin marker)", "31 of 576 (30 blocks + 1)", "(1, 5, 49,152)",
                    "49,152 × 576, 113 MB at float32", "983 kB")


def test_a_model_with_a_begin_marker_and_an_unknown_count():
    table = rows(lesson_markdown(info(name="Gemma-3-270M", vocab_size=262144, hidden_size=640, num_layers=18,
                                      dtype="bfloat16", adds_bos=True), None))
    ours = [cells[0] for cells in table.values()]
    assert ours[0] == "—" and ours[1] == "19 of 640 (18 blocks + 1)" and ours[3] == "262,144 × 640, 336 MB at bfloat16"


def test_the_model_name_is_escaped():
    markdown = lesson_markdown(info(name="<img src=x onerror=alert(1)>|`x`"), 5)
    assert "<img" not in markdown and "&lt;img" in markdown and "\\|" in markdown


def test_the_table_in_vietnamese_has_the_same_numbers():
    table = rows(lesson_markdown(info(), 5, "vi"))
    assert "hidden states" in table and "LM head (từ vựng × d)" in table
    ours, theirs = zip(*table.values())
    assert theirs[0] == "6 (có marker bắt đầu)" and ours[0] == "5 (không có marker bắt đầu)"
    assert theirs[1] == "33 vector 4,096 chiều (32 block + 1)" and ours[3] == "49,152 × 576, 113 MB ở float32"
    markdown = lesson_markdown(info(), 5, "vi")
    assert "phòng này: SmolLM2-135M-Instruct" in markdown and "bài học: Llama-3.1-8B" in markdown


def test_the_shipped_config_is_an_8b_llama():
    """Built on PyTorch's meta device (no memory, no weights): the public config gives 8.03 B parameters."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = {k: v for k, v in lesson_model()["config"].items() if k not in ("architectures", "torch_dtype")}
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(LlamaConfig(**config))
    assert sum(p.numel() for p in model.parameters()) == 8_030_261_248
    assert model.lm_head.weight.shape == (128256, 4096)
