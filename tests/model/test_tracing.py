"""The forward-pass tracer (lesson 10) on a tiny random Llama and on the embedded SmolLM2-135M-Instruct.

Shapes must equal the config; the logit lens at the last index must equal the model's own logits
(and would not if hidden_states[-1] were normalised a second time); attention rows sum to 1 and are
zero above the diagonal, and equal what an eager model reports with output_attentions=True."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from model_service import ModelService
from model_service.forward_pass.tracing import ATTENTION_WINDOW, _Hooks, final_norm
from model_service.records.trace import Trace

from ..conftest import byte_tokenizer, tiny_llama

LESSON = "The capital of France is"
PROMPT = "hello world"  # 11 byte tokens in the tiny model


@pytest.fixture(scope="module")
def tiny():
    """A tiny Llama whose norms have learned-looking (non-unit) scales: with unit scales RMSNorm is
    idempotent and normalising twice would go unnoticed."""
    model = tiny_llama(seed=1)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand_like(p) * 2 + 0.2)
    return ModelService(model, byte_tokenizer())


def forward(model, ids, **kwargs):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids]), use_cache=False, **kwargs)


def check_attention_rows(a) -> None:
    for head, before in zip(a.weights, a.earlier):
        for i, (row, e) in enumerate(zip(head, before)):
            assert sum(row) + e == pytest.approx(1.0, abs=1e-3)
            assert all(w == 0.0 for w in row[i + 1 :]), f"row {i} looks ahead"


# ---- tiny random Llama ----------------------------------------------------------------------------


def test_shapes_equal_the_config(tiny):
    c = tiny.model.config
    trace = tiny.trace(PROMPT)
    T = len(tiny.encode(PROMPT))
    s = trace.shapes
    assert s.input_ids == (1, T) and s.embeddings == (1, T, c.hidden_size)
    assert s.num_hidden_states == c.num_hidden_layers + 1 and s.hidden_state == (1, T, c.hidden_size)
    assert s.hidden_states_same_shape and s.logits == (1, T, c.vocab_size)
    assert len(trace.residual.norms) == c.num_hidden_layers + 1 and len(trace.residual.updates) == c.num_hidden_layers
    assert [t.id for t in trace.tokens] == tiny.encode(PROMPT)
    assert trace.embedding.matrix == (c.vocab_size, c.hidden_size) and trace.embedding.scale == pytest.approx(1.0)


def test_embedding_rows_are_the_matrix_rows_of_the_ids(tiny):
    trace = tiny.trace(PROMPT)
    weight = tiny.model.get_input_embeddings().weight
    for row in trace.embedding.rows:
        assert row.token_id == trace.tokens[row.position].id
        assert row.values == pytest.approx(weight[row.token_id, : len(row.values)].tolist(), rel=1e-3, abs=1e-6)


def test_residual_norms_and_updates_read_the_stream(tiny):
    ids = tiny.encode(PROMPT)
    out = forward(tiny.model, ids, output_hidden_states=True)
    hs = out.hidden_states
    r = tiny.trace(PROMPT).residual
    assert r.last_is_normed  # transformers hands back hidden_states[-1] after the final norm
    assert r.norms[1] == pytest.approx(hs[1][0].norm(dim=-1).tolist(), rel=1e-3)
    assert r.updates[0] == pytest.approx((hs[1] - hs[0])[0].norm(dim=-1).tolist(), rel=1e-3)
    assert r.final_norms == pytest.approx(hs[-1][0].norm(dim=-1).tolist(), rel=1e-3)
    # the last block's row is the stream before the final norm, not hidden_states[-1]
    assert r.norms[-1] != pytest.approx(r.final_norms, rel=1e-2)
    assert r.first_numbers_end == pytest.approx(hs[-1][0, -1, : len(r.first_numbers_end)].tolist(), rel=1e-3, abs=1e-6)


def test_logit_lens_at_the_last_index_is_the_models_own_logits(tiny):
    ids = tiny.encode(PROMPT)
    out = forward(tiny.model, ids, output_hidden_states=True)
    probs = out.logits[0, -1].softmax(-1)
    lens = tiny.trace(PROMPT, top_n=5).lens
    last = lens.layers[-1]
    assert lens.max_abs_diff < 1e-4
    assert [c.id for c in last.top] == probs.topk(5).indices.tolist()
    assert [c.prob for c in last.top] == pytest.approx(probs.topk(5).values.tolist(), rel=1e-3)
    assert lens.target.id == int(probs.argmax()) and last.target_rank == 0


def test_hidden_states_last_is_not_normalised_twice(tiny):
    """The lens applies the final norm to indices 0..L-1 only. Normalising hidden_states[-1] again
    would move the logits far: this test would fail if the tracer did."""
    ids = tiny.encode(PROMPT)
    out = forward(tiny.model, ids, output_hidden_states=True)
    model = tiny.model
    norm = final_norm(model)
    with torch.inference_mode():
        twice = model.lm_head(norm(out.hidden_states[-1][0, -1])).float()
        once = model.lm_head(norm(out.hidden_states[1][0, -1])).softmax(-1)
    own = out.logits[0, -1].float()
    assert float((twice - own).abs().max()) > 0.05  # the mistake is visible in this model...
    lens = tiny.trace(PROMPT).lens
    assert lens.max_abs_diff < 1e-4  # ...and the tracer does not make it
    assert lens.layers[1].top[0].id == int(once.argmax())  # indices < L do get the final norm
    assert lens.layers[1].top[0].prob == pytest.approx(float(once.max()), rel=1e-3)


def test_attention_rows_sum_to_one_zero_above_the_diagonal_and_equal_eager(tiny):
    import copy

    from transformers import LlamaForCausalLM

    ids = tiny.encode(PROMPT)
    eager = LlamaForCausalLM._from_config(copy.deepcopy(tiny.model.config), attn_implementation="eager").eval()
    eager.load_state_dict(tiny.model.state_dict())
    reference = forward(eager, ids, output_attentions=True).attentions  # L × (1, H, T, T)
    assert tiny.model.config._attn_implementation == "sdpa"
    for block in (1, 2):
        a = tiny.trace(PROMPT, block=block).attention
        assert (a.block, a.num_heads, a.num_kv_heads) == (block, 4, 2) and a.positions == tuple(range(len(ids)))
        check_attention_rows(a)
        assert a.max_abs_diff < 1e-5
        assert torch.tensor(a.weights) == pytest.approx(reference[block - 1][0], abs=1e-4)
    assert tiny.model.config._attn_implementation == "sdpa"  # the shared config was never switched


def test_trace_attention_gives_another_block_of_the_same_prompt(tiny):
    a = tiny.trace_attention(PROMPT, block=1)
    b = tiny.trace(PROMPT, block=1).attention
    assert a.weights == b.weights and a.earlier == b.earlier


def test_long_prompts_keep_a_window_of_attention_with_the_earlier_mass(tiny):
    text = "abcdefghij" * 20
    a = tiny.trace(text).attention
    assert len(a.positions) == ATTENTION_WINDOW and a.positions[-1] == 199 and a.tokens == 200
    assert any(e > 0 for e in a.earlier[0])
    check_attention_rows(a)


def test_teacher_forcing_scores_the_prompts_own_next_tokens(tiny):
    ids = tiny.encode(PROMPT)
    logits = forward(tiny.model, ids).logits[0]
    trace = tiny.trace(PROMPT)
    t = trace.teacher
    assert len(t.probs) == len(ids) - 1
    for p in (0, 5, len(ids) - 2):
        row = logits[p]
        assert t.probs[p] == pytest.approx(float(row.softmax(-1)[ids[p + 1]]), rel=1e-3)
        assert t.ranks[p] == int((row > row[ids[p + 1]]).sum())
    last = trace.predictions[-1]
    assert last.position == len(ids) - 1 and last.next is None
    assert trace.predictions[-2].next.id == ids[-1] and trace.predictions[-2].next_rank == t.ranks[-1]


def test_cost_is_positions_times_vocabulary_times_bytes(tiny):
    c = tiny.trace(PROMPT).cost
    T, V = len(tiny.encode(PROMPT)), tiny.model.config.vocab_size
    assert c.actual_bytes == T * V * 4 and c.keep_one_fp32 == V * 4 and c.keep_one_bf16 == V * 2
    assert T in c.lengths and c.lengths[-1] == 4096
    assert all(b == n * V * 4 for n, b in zip(c.lengths, c.bytes_fp32))


def test_record_round_trips_through_json(tiny):
    trace = tiny.trace(PROMPT)
    assert Trace.from_dict(json.loads(json.dumps(trace.to_dict()))) == trace


def test_bad_requests_are_value_errors(tiny):
    with pytest.raises(ValueError, match="block must be"):
        tiny.trace(PROMPT, block=3)
    with pytest.raises(ValueError, match="block must be"):
        tiny.trace_attention(PROMPT, block=0)
    with pytest.raises(ValueError, match="top_n"):
        tiny.trace(PROMPT, top_n=0)
    with pytest.raises(ValueError, match="empty"):
        tiny.trace("")
    with pytest.raises(ValueError, match=r"prompt is 3,00\d tokens; the limit here is 1,024"):
        tiny.trace("x" * 3000)


def test_hooks_ignore_other_threads(tiny):
    """A trace must not capture (or stop) a generation running on the same modules in another thread."""
    module = tiny.model.model.layers[0].self_attn
    ids = tiny.encode(PROMPT)
    before = (len(module._forward_hooks), len(module._forward_pre_hooks))
    with _Hooks() as hooks:
        hooks.before(module, "in")
        hooks.after(module, "out", stop=True)
        worker = threading.Thread(target=forward, args=(tiny.model, ids))
        worker.start()
        worker.join()
        assert hooks.seen == {}
    assert (len(module._forward_hooks), len(module._forward_pre_hooks)) == before  # removed on exit


def tiny_other(name: str):
    from transformers import (
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        GPT2Config,
        GPT2LMHeadModel,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    torch.manual_seed(0)
    small = dict(vocab_size=258, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    if name == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=258, n_embd=32, n_layer=2, n_head=4, n_positions=128, bos_token_id=1, eos_token_id=0)).eval()
    if name == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**small, num_key_value_heads=2)).eval()
    # Gemma 3: scaled embeddings, (1 + w) norms, and a sliding window shorter than the prompt
    return Gemma3ForCausalLM(Gemma3TextConfig(**small, num_key_value_heads=1, head_dim=8, sliding_window=8,
                                              layer_types=["sliding_attention", "full_attention"])).eval()


@pytest.mark.parametrize("name", ["gpt2", "qwen2", "gemma3"])
def test_other_architectures_trace_with_real_attention_and_an_exact_lens(name):
    service = ModelService(tiny_other(name), byte_tokenizer())
    for block in (1, 2):
        trace = service.trace("hello world, a longer prompt", block=block)
        assert trace.shapes.num_hidden_states == 3 and trace.residual.last_is_normed
        assert trace.lens.max_abs_diff < 1e-4 and trace.attention.max_abs_diff < 1e-5, trace.attention_note
        check_attention_rows(trace.attention)
    if name == "gemma3":
        a = service.trace("hello world, a longer prompt", block=1).attention
        assert a.sliding_window == 8 and a.weights[0][-1][: len(a.positions) - 8] == (0.0,) * (len(a.positions) - 8)
        assert trace.embedding.scale == pytest.approx(32**0.5, rel=1e-3)


# ---- the embedded model ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lesson(embedded):
    return embedded.trace(LESSON)


def test_embedded_lesson_shapes(lesson):
    s = lesson.shapes
    assert s.input_ids == (1, 5) and s.embeddings == (1, 5, 576)
    assert s.num_hidden_states == 31 and s.hidden_state == (1, 5, 576) and s.hidden_states_same_shape
    assert s.logits == (1, 5, 49152)
    assert not lesson.starts_with_bos and [t.piece for t in lesson.tokens] == ["The", " capital", " of", " France", " is"]
    assert lesson.residual.last_is_normed and lesson.residual.final_norm == "LlamaRMSNorm"


def test_embedded_output_and_lens_end_at_paris(embedded, lesson):
    last = lesson.predictions[-1]
    assert last.top[0].piece == " Paris" and last.top[0].prob == pytest.approx(0.77, abs=0.02)
    lens = lesson.lens
    assert lens.target.piece == " Paris" and lens.layers[-1].target_rank == 0 and lens.max_abs_diff < 1e-3
    assert lens.layers[-1].target_prob == pytest.approx(last.top[0].prob, rel=1e-3)
    # hidden_states[-1] normalised a second time gives other numbers with this model's real norm weights
    ids = embedded.encode(LESSON)
    out = forward(embedded.model, ids, output_hidden_states=True)
    with torch.inference_mode():
        twice = embedded.model.lm_head(embedded.model.model.norm(out.hidden_states[-1][0, -1]))
    assert float((twice - out.logits[0, -1]).abs().max()) > 1.0


def test_embedded_attention_is_real_and_causal(embedded, lesson):
    a = lesson.attention
    assert (a.num_blocks, a.num_heads, a.num_kv_heads) == (30, 9, 3) and a.max_abs_diff < 1e-4
    check_attention_rows(a)
    first = embedded.trace_attention(LESSON, block=1)
    assert first.block == 1 and first.max_abs_diff < 1e-4
    check_attention_rows(first)


def test_embedded_1024_token_trace_stays_under_a_megabyte(embedded):
    ids = embedded.encode(" ".join(["The history of the city goes back many centuries, and its people built walls."] * 80))
    prompt = embedded.decode(ids[:1024])
    assert len(embedded.encode(prompt)) == 1024
    trace = embedded.trace(prompt)
    assert trace.shapes.logits == (1, 1024, 49152)
    assert len(json.dumps(trace.to_dict())) < 1_000_000
    check_attention_rows(trace.attention)


def test_embedded_chat_template_shows_its_special_tokens(embedded):
    trace = embedded.trace(LESSON, chat=True)
    assert trace.chat and "<|im_start|>" in [t.piece for t in trace.tokens if t.special]
    assert trace.shapes.input_ids == (1, len(embedded.encode(LESSON, chat=True)))
