"""Weights moved into huge pages (models/huge_pages.py): every large tensor keeps its values and its identity (a tied
head stays tied, a layer's Parameter is the one the model holds), they share one mapping, small ones stay, the model
decodes what it decoded, and a system without the advice changes nothing."""

from __future__ import annotations

import torch

from model_service.models import huge_pages

from ..conftest import tiny_llama


def _model():
    model = tiny_llama(vocab_size=1024)
    model.lm_head.weight = model.model.embed_tokens.weight  # tied, as SmolLM2's
    return model


def test_large_tensors_move_into_one_mapping_with_their_values_and_identity(monkeypatch):
    monkeypatch.setattr(huge_pages, "SMALLEST", 1 << 12)
    model = _model()
    before = {name: (p, p.detach().clone()) for name, p in model.named_parameters()}
    prompt = torch.tensor([[1, 5, 9, 200]])
    with torch.inference_mode():
        want = model(prompt).logits
    moved = huge_pages.move(model)
    assert moved > 0
    large = [p for p in model.parameters() if p.numel() * p.element_size() >= huge_pages.SMALLEST]
    small = [p for p in model.parameters() if p.numel() * p.element_size() < huge_pages.SMALLEST]
    assert large and small
    for name, p in model.named_parameters():
        assert p is before[name][0] and torch.equal(p, before[name][1])
    assert model.lm_head.weight is model.model.embed_tokens.weight
    starts = sorted(p.data_ptr() for p in large)
    assert starts[-1] - starts[0] < moved and starts[0] % huge_pages.ALIGN == 0  # one mapping, cache-line aligned
    assert all(p.untyped_storage().data_ptr() != before[n][1].data_ptr() for n, p in model.named_parameters())
    with torch.inference_mode():
        assert torch.equal(model(prompt).logits, want)


def test_without_the_advice_nothing_moves(monkeypatch):
    monkeypatch.delattr(huge_pages.mmap, "MADV_HUGEPAGE")
    model = _model()
    pointers = [p.data_ptr() for p in model.parameters()]
    assert huge_pages.move(model) == 0
    assert [p.data_ptr() for p in model.parameters()] == pointers


def _saved(tmp_path, model) -> int:
    """The model's checkpoint in tmp_path; the bytes of its large tensors, as move lays them out."""
    model.save_pretrained(tmp_path)
    return sum(-(-p.numel() * p.element_size() // huge_pages.ALIGN) * huge_pages.ALIGN
               for p in model.parameters() if p.numel() * p.element_size() >= huge_pages.SMALLEST)


def test_a_reservation_sized_from_the_checkpoint_holds_the_weights_it_was_read_for(monkeypatch, tmp_path):
    monkeypatch.setattr(huge_pages, "SMALLEST", 1 << 12)
    model = _model()
    size = _saved(tmp_path, model)
    assert huge_pages.checkpoint_bytes(tmp_path, 4) == size  # (the tied head saved once)
    assert huge_pages.checkpoint_bytes(tmp_path, 2) < size and huge_pages.checkpoint_bytes(tmp_path / "no", 4) == 0
    reserved = huge_pages.reserve(tmp_path, 4)
    area = reserved.area
    begin = torch.frombuffer(area, dtype=torch.uint8).data_ptr()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    assert huge_pages.move(model, reserved) == size and reserved.area is None
    large = [p for p in model.parameters() if p.numel() * p.element_size() >= huge_pages.SMALLEST]
    assert all(begin <= p.data_ptr() < begin + len(area) for p in large)  # in the reserved mapping
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())


def test_a_reservation_too_small_for_the_weights_is_let_go_and_they_get_their_own(monkeypatch, tmp_path):
    monkeypatch.setattr(huge_pages, "SMALLEST", 1 << 12)
    model = _model()
    _saved(tmp_path, model)
    reserved = huge_pages.reserve(tmp_path, 2)  # as if read in bfloat16: half what float32 needs
    area = reserved.area
    assert huge_pages.move(model) > 0 and huge_pages.move(_model(), reserved) > 0
    assert area.closed
    unused = huge_pages.reserve(tmp_path, 4)
    unused.close()
    assert unused.area is None and huge_pages.reserve(tmp_path / "no", 4) is None
