"""Endpoints for scripts and notebooks: the step records as JSON, streamed.

    from gradio_client import Client
    client = Client("http://127.0.0.1:7860/")
    for record in client.submit("The capital of France is", 0.8, 0, 0.95, 0.0, 1, api_name="/stream_records"):
        print(record["piece"], record["stages"][-1]["chosen_prob"])

A bad setting ends the stream early; `job.result()` then raises the message (gradio_client.AppError).
"""

from __future__ import annotations

from typing import Generator

import gradio as gr

from .controls import parse_request


def register_api(service) -> None:
    """Call inside a Blocks context."""

    def stream_records(
        prompt: str,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
        order: str = "hf",
        max_new_tokens: int = 48,
        stop: list[str] | None = None,
        chat: bool = False,
        top_n: int = 20,
    ) -> Generator[dict, None, None]:  # gr.api needs Generator (not Iterator) to stream
        """Stream one JSON step record per generated token: the token, the text so far, every stage's
        top-N probabilities, kept counts and masses, entropies, the random draw and timings. The last
        record carries stop_reason ("eos", "max_tokens" or "stop_string")."""
        try:
            request = parse_request(prompt, chat, temperature, top_k, top_p, min_p, seed, max_new_tokens, "\n".join(stop or ()), order)
            records = service.generate(
                request.prompt, request.settings, max_new_tokens=request.max_new_tokens, stop=request.stop,
                chat=request.chat, top_n=top_n,
            )
        except (ValueError, RuntimeError) as e:
            raise gr.Error(str(e)) from None
        for record in records:
            yield record.to_dict()

    gr.api(stream_records, api_name="stream_records", concurrency_id="model")

