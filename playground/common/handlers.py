"""One way to hand Gradio a module-level handler with its first arguments already given (a tab's components
dataclass, the service): `bind`. Gradio names an event's endpoint after its function, reads the event's inputs
from the parameters left, looks among them for a gr.Request by its annotation, and streams a generator; the
bound handler keeps all four. Bind a handler once where several events share it: they then share one
concurrency group, as they would share one function."""

from __future__ import annotations

import functools
import inspect


def bind(handler, *first):
    # a plain function, not functools.partial: Gradio reads a partial's hints from its __call__ (none), and
    # decides whether to stream by asking whether the function itself is a generator function
    if inspect.isasyncgenfunction(handler):
        async def bound(*args, **kwargs):
            updates = handler(*first, *args, **kwargs)
            try:
                async for update in updates:
                    yield update
            finally:  # a cancelled event (Break away, a closed page) closes the handler at once, its finally run
                await updates.aclose()
    elif inspect.iscoroutinefunction(handler):
        async def bound(*args, **kwargs):
            return await handler(*first, *args, **kwargs)
    elif inspect.isgeneratorfunction(handler):
        def bound(*args, **kwargs):
            yield from handler(*first, *args, **kwargs)
    else:
        def bound(*args, **kwargs):
            return handler(*first, *args, **kwargs)
    signature = inspect.signature(functools.partial(handler, *first))  # the parameters left: the event's inputs
    functools.update_wrapper(bound, handler)  # its name, docstring and annotations (gr.Request is found by them)
    bound.__signature__ = signature
    return bound


__all__ = ["bind"]
