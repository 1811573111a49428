"""Shared fixtures: a tiny random Llama with a real byte-level tokenizer (milliseconds, no download)
and the embedded model, loaded once per test session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Tests never reach the Hub or phone home: CI has no internet beyond the package registries.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def byte_tokenizer():
    """A real fast tokenizer: one token per byte (GPT-2 byte alphabet), plus <eos> and <bos>.
    Multi-byte characters span several tokens, which is what the UTF-8 hold-back must handle."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<eos>": 0, "<bos>": 1, **{c: i + 2 for i, c in enumerate(alphabet)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", bos_token="<bos>")


CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")
NO_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
             + CHAT_TEMPLATE)  # as some real templates do (Gemma 2's, Mistral's older ones)


def byte_chat_tokenizer(system: bool = True):
    """byte_tokenizer with a small chat template (<role>content lines), one that refuses a system message unless
    `system`."""
    tok = byte_tokenizer()
    tok.chat_template = CHAT_TEMPLATE if system else NO_SYSTEM
    return tok


def tiny_llama(vocab_size: int = 258, seed: int = 0, layers: int = 2):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        bos_token_id=1, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    # Random init gives near-uniform logits; scale the head so distributions have a real shape.
    with torch.no_grad():
        model.lm_head.weight.mul_(8)
    return model


@pytest.fixture(autouse=True)
def _a_fresh_machine():
    """The page reads the machine it runs on once per process (hosting.this_machine); a test that sets a Space's
    variables must not leave the next test on that Space."""
    yield
    from playground.hosting import this_machine

    this_machine.cache_clear()


@pytest.fixture(scope="session")
def tiny_service():
    from model_service import ModelService

    return ModelService(tiny_llama(), byte_tokenizer())


@pytest.fixture(scope="session")
def embedded():
    from model_service import ModelService

    return ModelService.load()


def blas_threads_now() -> set[int]:
    """The thread counts numpy's BLAS libraries run with now (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def close_demo(demo) -> None:
    """Close a launched demo without racing its own event loop.

    Gradio's `Blocks.close` sets `app.stop_event`, an asyncio.Event, from the calling thread while the server's
    loop may be adding a heartbeat's waiter to it: 'deque mutated during iteration' (seen in CI). Setting it on the
    loop that owns it first makes close's own `set()` a no-op. The loop is the one the event bound itself to on its
    first wait; unbound means nobody waits, and then close's set() has nothing to race."""
    event = demo.app.stop_event
    loop = getattr(event, "_loop", None)
    if loop is not None and loop.is_running():

        async def set_it():
            event.set()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(set_it(), loop).result(timeout=10)
    demo.close(verbose=False)


@contextlib.contextmanager
def launched(demo, api=None):
    """Queue and launch a demo on a free local port the way app.py does; yield its URL; close it safely.
    api: the service whose OpenAI-compatible routes to mount too (open, as on 127.0.0.1)."""
    from playground.page import launch_options, queue_options

    extra = {}
    if api is not None:
        from playground.openai_api import Access, launch_kwargs

        extra = launch_kwargs(api, Access("open"))
    demo.queue(**queue_options())
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, ssr_mode=False,
                show_error=True, **launch_options(), **extra)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        close_demo(demo)


@pytest.fixture(scope="session")
def app_url(embedded):
    from model_service.models.switching import LoadingService
    from playground.page import build_demo

    with launched(build_demo(LoadingService(service=embedded))) as url:
        yield url


HOST_KEY = "let-me-in"


@pytest.fixture(scope="session")
def picker_app(tmp_path_factory):
    """An app whose host may switch between two tiny models (2 and 3 blocks) with HOST_KEY: (url, keys)."""
    from model_service.models.switching import LoadingService
    from playground.hosting import SwitchPolicy
    from playground.page import build_demo

    keys = []
    for layers in (2, 3):
        folder = tmp_path_factory.mktemp(f"tiny{layers}") / f"tiny-{layers}-blocks"
        tiny_llama(layers=layers).save_pretrained(folder)
        byte_tokenizer().save_pretrained(folder)
        keys.append(str(folder))
    service = LoadingService(keys[0], "cpu", models=tuple(keys))
    assert service.wait(120).ready, service.status
    policy = SwitchPolicy("key", "key")
    with launched(build_demo(service, policy=policy, host_key=HOST_KEY)) as url:
        yield url, keys


@pytest.fixture()
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)
