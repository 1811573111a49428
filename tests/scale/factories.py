"""Model services for the Ray Serve tests, built inside the replica (Ray imports this module there)."""

from __future__ import annotations

import time


def tiny(step_delay_s: float = 0.0, **service_options):
    """The tests' tiny random Llama (same seed, so the same weights as tests/conftest.py's tiny_service);
    step_delay_s slows each forward pass so that a test can act while a run is under way; service_options go to
    ModelService (max_rows, queue_size)."""
    from model_service import ModelService
    from tests.conftest import byte_tokenizer, tiny_llama

    model = tiny_llama()
    if step_delay_s:
        forward = model.forward

        def slow_forward(*args, **kwargs):
            time.sleep(step_delay_s)
            return forward(*args, **kwargs)

        model.forward = slow_forward
    return ModelService(model, byte_tokenizer(), **service_options)
