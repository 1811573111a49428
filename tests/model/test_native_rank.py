"""The sampler's ranking window in C (native/rank.h, sampling/window.py): each row's best ids, most probable first,
ties by the lower id, exactly as a stable sort of the whole row orders them, on rows of every kind (ties at the cut,
a row of bans' -inf, a row of equal logits, a vocabulary no multiple of the vector width, the widest window); a NaN
leaves the row to torch."""

from __future__ import annotations

import pytest
import torch

from model_service.models import native_build, native_step
from model_service.sampling import window

from ..conftest import tiny_llama


@pytest.fixture()
def native():
    lib, _ = native_build.load()
    window.use_native(lib.ntp_rank)
    yield lib.ntp_rank
    window.use_native(None)


def _wanted(x: torch.Tensor, width: int) -> torch.Tensor:
    return x.sort(dim=-1, descending=True, stable=True).indices[:, :width]


def _rows(kind: str, rows: int, vocab: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, vocab, generator=g) * 3
    if kind == "ties":  # few distinct values: ties at every rank, the cut's too
        x = x.round()
    elif kind == "banned":  # most of a row at -inf, as after a cut
        x[:, torch.randperm(vocab, generator=g)[: vocab - 5]] = float("-inf")
    elif kind == "flat":
        x[:] = 0.5
    return x


@pytest.mark.parametrize("kind", ["random", "ties", "banned", "flat"])
@pytest.mark.parametrize("vocab, width", [(49152, 256), (49152, 1024), (49152, 4096), (1003, 1002), (37, 1), (64, 64 - 1),
                                          (20000, 17)])
def test_the_window_is_the_stable_sorts_head(native, kind, vocab, width):
    for seed in range(3):
        x = _rows(kind, 4, vocab, seed)
        assert torch.equal(window.ranked_window(x, width), _wanted(x, width)), seed


def test_a_row_with_a_nan_is_left_to_torch_and_the_others_still_rank(native):
    x = _rows("random", 2, 500, 0)
    x[1, 7] = float("nan")
    ids = torch.empty(2, 10, dtype=torch.int64)
    assert native(x.data_ptr(), 2, 500, 10, ids.data_ptr()) == -1
    window.use_native(None)
    torch_ids = window.ranked_window(x, 10)
    window.use_native(native)
    assert torch.equal(window.ranked_window(x, 10), torch_ids)
    assert native(x.data_ptr(), 2, 500, 0, ids.data_ptr()) == -1 == native(x.data_ptr(), 2, 500, 501, ids.data_ptr())


def test_a_cpu_start_ranks_with_the_library_whatever_its_model():
    window.use_native(None)
    model = tiny_llama(layers=1)
    try:
        native_step.prepare(model)
        assert window._native is not None
    finally:
        window.use_native(None)
