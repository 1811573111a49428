"""The native step's threads (native/pool.h): its products' weight rows shared among the host's model threads, each
output row computed whole by one of them, so every thread count gives the numbers of one thread, bit for bit, in every
precision, for a lone row and a room; a step called from two threads at once gives each its own numbers; the
embedded model decodes the same tokens and logits at 1 and 2 threads."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest
import torch

from model_service.models import native_build, precision
from model_service.models.native_step import Run, prepare, step_rows


@contextmanager
def torch_threads(n: int):
    """The host's model threads (the native step follows torch's count), as they were afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _model(mode: str):
    """A random Llama whose products are big enough to split (at least 64 weight rows; 320: a chunk left over)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    config = LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=320, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    if mode != "fp32":
        model.to(torch.bfloat16)
        precision.quantise(model, mode)
    assert prepare(model).startswith("native")
    return model


def _steps(model, rows: int, steps: int = 5) -> torch.Tensor:
    """`steps` native steps of `rows` rows, each fed its own made-up tokens: every step's logits."""
    runs = [Run(model.ntp_native) for _ in range(rows)]
    return torch.stack([step_rows(runs, [(7 * row + 13 * s + 1) % 1000 for row in range(rows)]) for s in range(steps)])


@pytest.mark.parametrize("mode", ["fp32", "bf16", "int8", "int4"])
@pytest.mark.parametrize("rows", [1, 9])
def test_every_thread_count_gives_one_threads_numbers_bit_for_bit(mode, rows):
    model = _model(mode)
    with torch_threads(1):
        want = _steps(model, rows)
    for threads in (2, 3, 5):
        with torch_threads(threads):
            assert torch.equal(_steps(model, rows), want), f"{threads} threads"


def test_steps_called_from_two_threads_at_once_each_give_their_own_numbers():
    model = _model("fp32")
    with torch_threads(1):
        want = {rows: _steps(model, rows, 8) for rows in (1, 3)}
    got = {}
    with torch_threads(2):
        workers = [threading.Thread(target=lambda r=rows: got.update({r: _steps(model, r, 8)})) for rows in (1, 3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
    assert all(torch.equal(got[rows], want[rows]) for rows in want)


def test_the_count_is_clamped_and_said():
    lib, _ = native_build.load()
    try:
        assert lib.ntp_threads(0) == 1 and lib.ntp_threads(3) == 3 and lib.ntp_threads(10_000) == 64
    finally:
        lib.ntp_threads(torch.get_num_threads())


def test_the_embedded_model_decodes_the_same_at_one_and_two_threads():
    from model_service.models.loading import load

    model, tokenizer, _ = load(precision="fp32")
    prompt = tokenizer("The capital of France is")["input_ids"]

    def greedy() -> tuple[list[int], torch.Tensor]:
        run, tokens, logits = Run(model.ntp_native), list(prompt), []
        for token in prompt[:-1]:  # the prompt, a token a step (the native step reads no prompt at once)
            step_rows([run], [token])
        for _ in range(12):
            logits.append(step_rows([run], [tokens[-1]])[0])
            tokens.append(int(logits[-1].argmax()))
        return tokens[len(prompt):], torch.stack(logits)

    with torch_threads(1):
        want = greedy()
    with torch_threads(2):
        got = greedy()
    assert got[0] == want[0] and torch.equal(got[1], want[1])


def test_a_forked_child_steps_with_threads_of_its_own():
    import os

    model = _model("fp32")
    with torch_threads(2):
        want = _steps(model, 3)  # the parent's workers are running
        pid = os.fork()
        if pid == 0:  # the child: its parent's workers are not here; it starts its own (a count of its own too)
            code = 1
            try:
                torch.set_num_threads(3)
                code = 0 if torch.equal(_steps(model, 3), want) else 3
            finally:
                os._exit(code)
        for _ in range(600):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            threading.Event().wait(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's step hung")
    assert os.waitstatus_to_exitcode(status) == 0
    assert torch.equal(_steps(model, 3), want)  # and the parent's pool still works
