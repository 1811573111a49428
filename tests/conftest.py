"""Shared fixtures: a tiny random Llama with a real byte-level tokenizer (milliseconds, no download)
and the embedded model, loaded once per test session."""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def tiny_service():
    from model_service import ModelService

    return ModelService(tiny_llama(), byte_tokenizer())


@pytest.fixture(scope="session")
def embedded():
    from model_service import ModelService

    return ModelService.load()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_url(embedded):
    from model_service.background import LoadingService
    from playground.page import build_demo, launch_options, queue_options

    demo = build_demo(LoadingService(service=embedded))
    demo.queue(**queue_options())
    port = free_port()
    demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, ssr_mode=False,
        show_error=True, **launch_options(),
    )
    yield f"http://127.0.0.1:{port}/"
    demo.close(verbose=False)


HOST_KEY = "let-me-in"


@pytest.fixture(scope="session")
def picker_app(tmp_path_factory):
    """An app whose host may switch between two tiny models (2 and 3 blocks) with HOST_KEY: (url, keys)."""
    from model_service.background import LoadingService
    from model_service.hosting import SwitchPolicy
    from playground.page import build_demo, launch_options, queue_options

    keys = []
    for layers in (2, 3):
        folder = tmp_path_factory.mktemp(f"tiny{layers}") / f"tiny-{layers}-blocks"
        tiny_llama(layers=layers).save_pretrained(folder)
        byte_tokenizer().save_pretrained(folder)
        keys.append(str(folder))
    service = LoadingService(keys[0], "cpu", models=tuple(keys))
    assert service.wait(120).ready, service.status
    policy = SwitchPolicy("key", "key")
    demo = build_demo(service, policy=policy, host_key=HOST_KEY)
    demo.queue(**queue_options())
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, ssr_mode=False,
                show_error=True, **launch_options())
    yield f"http://127.0.0.1:{port}/", keys
    demo.close(verbose=False)


@pytest.fixture()
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)
