"""The batch-invariant mode (model_service/engine/invariant.py): a row's logits are bit-identical (torch.equal)
alone and among 1, 3, 7 and 15 others, left-padded, joined at step 0 or mid-flight, in both schedulers; seeded
requests draw exactly their solo tokens in a staggered room; switched off, the model computes what it computed
before it was made switchable."""

from __future__ import annotations

import copy
import threading
import time

import pytest
import torch

from model_service import ModelService, SamplingSettings
from model_service.engine.invariant import available, is_batch_invariant, make_batch_invariant, mode, tiled_linear
from model_service.engine.runner import Decoder

from ..conftest import byte_tokenizer, tiny_llama

PROMPTS = ["The capital of France is", "Once upon a time, in a small village by the sea,", "def f(n):", "Hi",
           "Xin chào các bạn", "My favourite book is", "In the beginning", "A letter to my future self:"]


def ids_of(tokenizer, texts):
    return [tokenizer(t)["input_ids"] for t in texts]


def steps(model, rows, n=4, join_after=None, joiner=None):
    """Row 0's logits at the prefill and n decode steps (greedy tokens), its batch-mates given by `rows`;
    `joiner` rows join the batch after `join_after` steps (mid-flight)."""
    decoder = Decoder(model)
    logits = decoder.prefill(rows)
    seen = [logits[0].clone()]
    for step in range(n):
        if join_after is not None and step == join_after:
            other = Decoder(model)
            other.prefill(joiner)
            decoder.join(other)
            logits = torch.cat([logits, torch.zeros(len(joiner), logits.shape[1])])
        logits = decoder.step(logits.argmax(-1).tolist())
        seen.append(logits[0].clone())
    return seen


@pytest.fixture(scope="module")
def tiny():
    model = tiny_llama(layers=2)
    make_batch_invariant(model, on=True)
    return model, byte_tokenizer()


def test_tiled_linear_gives_a_row_the_same_numbers_wherever_it_sits():
    torch.manual_seed(0)
    weight, x = torch.randn(1536, 576), torch.randn(40, 576)
    alone = tiled_linear(x[:1], weight, None)
    for rows in (2, 4, 8, 16, 17, 33):
        for place in (0, rows - 1):
            batch = torch.randn(rows, 576)
            batch[place] = x[0]
            assert torch.equal(tiled_linear(batch, weight, None)[place], alone[0])


@pytest.mark.parametrize("others", [1, 3, 7, 15])
def test_a_row_alone_and_among_others_left_padded_is_bit_identical(tiny, others):
    model, tok = tiny
    rows = ids_of(tok, (PROMPTS * 3)[: others + 1])
    alone, batched = steps(model, rows[:1]), steps(model, rows)
    assert all(torch.equal(a, b) for a, b in zip(alone, batched))
    assert torch.equal(alone[0], Decoder(model).prefill(rows[1:] + rows[:1])[-1])  # the same row last in the batch


def test_a_row_keeps_its_numbers_when_others_join_mid_flight(tiny):
    model, tok = tiny
    rows = ids_of(tok, PROMPTS)
    alone = steps(model, rows[:1], n=6)
    joined = steps(model, rows[:1], n=6, join_after=2, joiner=rows[1:6])
    assert all(torch.equal(a, b) for a, b in zip(alone, joined))


def test_switched_off_the_model_computes_what_it_did_before(tiny):
    model, tok = tiny
    plain = tiny_llama(layers=2)  # same seed: the same weights, never switched
    rows = ids_of(tok, PROMPTS[:4])
    with mode(False):
        off = steps(model, rows)
    assert all(torch.equal(a, b) for a, b in zip(off, steps(plain, rows)))
    with mode(True):  # a model never made switchable ignores the mode
        asked = steps(plain, rows)
    assert all(torch.equal(a, b) for a, b in zip(asked, off))


def test_the_default_arithmetic_differs_with_the_batch_so_the_mode_is_needed(embedded):
    """Not a promise, a measurement this mode answers: on this CPU a row's logits move with its batch."""
    plain = copy.deepcopy(embedded.model)
    make_batch_invariant(plain, on=False, switchable=True)
    tok = embedded.tokenizer
    rows = ids_of(tok, PROMPTS[:4])
    alone, batched = steps(plain, rows[:1], n=2), steps(plain, rows, n=2)
    moved = max(float((a - b).abs().max()) for a, b in zip(alone, batched))
    with mode(True):
        on_alone, on_batched = steps(plain, rows[:1], n=2), steps(plain, rows, n=2)
    assert all(torch.equal(a, b) for a, b in zip(on_alone, on_batched))
    assert moved < 1e-3  # the default's difference is round-off


def seeded(service, i, tokens=8):
    settings = SamplingSettings(temperature=1.0, top_p=0.95, seed=100 + i)
    return [(r.token_id, tuple(r.logits or ())) for r in service.generate(PROMPTS[i % len(PROMPTS)], settings, tokens,
                                                                          ignore_eos=True)]


def staggered(service, k, tokens=8, gap=0.03):
    out = {}

    def one(i):
        time.sleep(i * gap)
        out[i] = seeded(service, i, tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def test_seeded_requests_draw_their_solo_tokens_and_logits_in_a_staggered_room_thread_scheduler():
    service = ModelService(tiny_llama(layers=2), byte_tokenizer(), batch_invariant=True)
    assert service.batch_invariant and service.room().batch_invariant
    alone = {i: seeded(service, i) for i in range(8)}
    assert staggered(service, 8) == alone


def test_seeded_requests_draw_their_solo_tokens_in_a_staggered_room_process_scheduler():
    service = ModelService.load(scheduler="process", batch_invariant=True)
    try:
        assert service.room().batch_invariant  # the scheduler process's own copy runs the mode
        alone = {i: seeded(service, i, 6) for i in range(6)}
        assert staggered(service, 6, 6, gap=0.1) == alone
    finally:
        service.close()


def test_the_mode_is_named_when_a_model_cannot_run_it():
    model = tiny_llama(layers=1)
    model.set_attn_implementation("eager")
    assert not available(model)
    with pytest.raises(ValueError, match="batch-invariant mode cannot serve"):
        make_batch_invariant(model, on=True)
    make_batch_invariant(model, on=False)  # the default: left as it is
    assert not is_batch_invariant(model)


def test_a_model_in_the_default_mode_is_left_exactly_as_it_was():
    model = tiny_llama(layers=1)
    service = ModelService(model, byte_tokenizer(), batch_invariant=False)
    assert not service.batch_invariant and model.config._attn_implementation == "sdpa"
    assert not hasattr(model, "ntp_batch_invariant")


def test_a_trace_still_reads_the_attention_of_a_switched_model(tiny):
    model, tok = tiny
    service = ModelService(model, tok, batch_invariant=True)
    trace = service.trace("Hello there", block=1)
    assert trace.attention.max_abs_diff < 1e-4  # the eager re-run agrees with the mode's attention
