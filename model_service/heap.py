"""The collector's pauses: what a process keeps for its whole life is frozen out of the cyclic garbage collector.

A process that serves the model holds a few million tracked objects for its whole life (torch, transformers, Gradio,
the model's modules, the page's blocks). CPython's full collection walks every one of them, and it runs every few
seconds under load: the web process paused 150-490 ms at a time and the scheduler process 70-310 ms, beside 16
generating learners (gc.callbacks, BENCHMARKS.md "The collector's pauses"), stalling a what-if's answer or the room's
step. `settle()`, once a process has loaded what it keeps, collects once and moves every object still alive to the
collector's permanent generation (gc.freeze): later collections walk only what was made since. `thaw()` gives them
back before a model is dropped, so the collection that frees it can find its cycles.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect what is garbage now, then freeze the rest: it lives as long as the process (or the model)."""
    gc.collect()
    gc.freeze()


def thaw() -> None:
    """Hand the frozen objects back to the collector (a model is about to be dropped; settle() again after)."""
    gc.unfreeze()


__all__ = ["settle", "thaw"]
