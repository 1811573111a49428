"""Weights moved into huge pages (models/huge_pages.py): every large tensor keeps its values and its identity (a tied
head stays tied, a layer's Parameter is the one the model holds), they share one mapping, small ones stay, the model
decodes what it decoded, and a system without the advice changes nothing. A start moves nothing: the room's loop
moves them once it has served a step and is idle, and its native step decodes the same numbers from there."""

from __future__ import annotations

import copy
import pickle
import threading

import torch

from model_service import ModelService, SamplingSettings
from model_service.models import huge_pages, native_step

from ..conftest import byte_tokenizer, tiny_llama
from ..waiting import wait_until


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



def test_the_rooms_loop_moves_the_weights_when_idle_after_its_first_step_and_decodes_the_same(monkeypatch):
    monkeypatch.setattr(huge_pages, "SMALLEST", 1 << 12)
    model = _model()
    native_step.prepare(model)
    later = model.ntp_huge_pages = huge_pages.Later(model)
    before = {name: p.data_ptr() for name, p in model.named_parameters()}
    service = ModelService(model, byte_tokenizer())
    try:
        assert not later.due(False) and later.reserved is None  # a start moves nothing, nor an idle room before a step
        greedy = SamplingSettings(temperature=0)
        first = [r.token_id for r in service.generate("Once upon", greedy, max_new_tokens=12)]
        wait_until(lambda: later.done, "the weights moved", timeout=30)
        moved = [p for p in model.parameters() if p.numel() * p.element_size() >= huge_pages.SMALLEST]
        ids = {id(p) for p in moved}
        assert moved and all(p.data_ptr() != before[n] for n, p in model.named_parameters() if id(p) in ids)
        # one storage for them all: the mapping's (each had its own before)
        assert len({p.untyped_storage().data_ptr() for p in moved}) == 1 < len(moved)
        assert moved[0].untyped_storage().nbytes() >= huge_pages.HUGE_PAGE
        assert model.ntp_native is not None and model.ntp_native.base.embed.data == model.model.embed_tokens.weight.data_ptr()
        assert [r.token_id for r in service.generate("Once upon", greedy, max_new_tokens=12)] == first
    finally:
        service.close()


def test_a_copied_or_pickled_model_has_no_pages_to_move():
    model = _model()
    model.ntp_huge_pages = huge_pages.Later(model)
    assert copy.deepcopy(model).ntp_huge_pages is None
    assert pickle.loads(pickle.dumps(model.ntp_huge_pages)) is None


def test_a_failed_move_leaves_the_weights_where_they_were_and_the_room_serving(monkeypatch):
    model = _model()
    later = huge_pages.Later(model)
    later.work(threading.RLock())  # the pages got
    wait_until(lambda: later.due(True), "the pages in", timeout=30)
    monkeypatch.setattr(huge_pages, "move", lambda *a: (_ for _ in ()).throw(OSError("no room")))
    pointers = [p.data_ptr() for p in model.parameters()]
    later.work(threading.RLock())
    assert later.done and not later.due(True) and [p.data_ptr() for p in model.parameters()] == pointers


def test_no_memory_for_the_pages_leaves_the_weights_where_they_were(monkeypatch):
    model = _model()
    later = huge_pages.Later(model)
    monkeypatch.setattr(huge_pages.mmap, "mmap", lambda *a, **k: (_ for _ in ()).throw(OSError("no memory")))
    later.work(threading.RLock())
    assert later.done and not later.due(True) and later.poll_s() is None
