"""common/handlers.py:bind hands Gradio a handler as Gradio reads one: its name (the endpoint's), the inputs
left, a gr.Request found by its hint, a generator streamed, an async generator closed when its event is."""

from __future__ import annotations

import asyncio
import inspect
import threading

import gradio as gr
from gradio import utils

from playground.common.handlers import bind


def plain(c, x: int, request: gr.Request):
    """its doc"""
    return c, x, request


def streamed(c, n):
    yield from range(c, n)


def test_a_bound_handler_reads_as_the_handler_less_its_first_arguments():
    bound = bind(plain, "components")
    assert bound.__name__ == "plain" and bound.__doc__ == "its doc"
    assert list(inspect.signature(bound).parameters) == ["x", "request"]
    assert utils.get_type_hints(bound)["request"] is gr.Request  # what Gradio's special_args reads
    assert bound(1, None) == ("components", 1, None)
    assert inspect.isgeneratorfunction(bind(streamed, 2)) and list(bind(streamed, 2)(5)) == [2, 3, 4]


def test_an_async_generator_is_closed_with_its_event():
    left = []

    async def follow(room, code):
        try:
            while True:
                yield code
                await asyncio.sleep(0)
        finally:
            left.append(room)

    bound = bind(follow, "room")
    assert inspect.isasyncgenfunction(bound)

    async def cancel_after_one():
        updates = bound("ab123")
        assert await updates.__anext__() == "ab123"
        await updates.aclose()  # Gradio cancels the event: Break away, a closed page

    # in a thread of its own: the browser tests' Playwright may hold an event loop in this one
    worker = threading.Thread(target=asyncio.run, args=(cancel_after_one(),))
    worker.start()
    worker.join(10)
    assert left == ["room"]
