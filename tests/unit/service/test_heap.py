"""model_service/heap.py: a process's long-lived objects frozen out of the collector, given back before a model is
dropped (models/switching.py:release_memory), so a dropped model's cycles are still freed."""

import gc
import weakref

import pytest

from model_service import heap
from model_service.models.switching import release_memory


class Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture(autouse=True)
def thawed():
    yield
    gc.unfreeze()


def test_settle_freezes_what_lives_and_frees_what_does_not():
    kept, dropped = Node(), Node()
    seen = weakref.ref(dropped)
    del dropped
    heap.settle()
    assert seen() is None  # collected first: garbage is not frozen with the rest
    assert gc.get_freeze_count() > 0
    assert not any(obj is kept for obj in gc.get_objects())  # frozen: objects are outside the collector's lists


def test_a_frozen_cycle_is_freed_when_its_model_is_released():
    model = Node()
    seen = weakref.ref(model)
    heap.settle()
    del model
    gc.collect()
    assert seen() is not None  # frozen: a full collection does not walk it
    release_memory("cpu")
    assert seen() is None
    assert gc.get_freeze_count() == 0
