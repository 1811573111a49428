"""The LM head breakdown: logit = ‖h‖·‖w‖·cos, equal to the model's own logit, on a tiny random
Llama (with and without a bias), a tiny soft-capping Gemma 2, and the embedded SmolLM2."""

from __future__ import annotations

import json
import math

import pytest
import torch

from model_service.forward_pass.lm_head import LmHeadView, _final_hidden, lm_head_breakdown
from playground.softmax.lm_head_view import lm_head_figure, lm_head_markdown

from ..conftest import byte_tokenizer, tiny_llama

PROMPT = "The capital of France is"


def close(a: float, b: float, rel: float = 1e-4) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=rel)


def last_logits(model, ids) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0, -1].float()


def check_identity(view: LmHeadView, logits: torch.Tensor) -> None:
    assert view.matches_model and view.final_norm_in_last_hidden_state
    for c in view.candidates:
        assert close(c.recomputed, c.logit), c
        assert close(c.logit, float(logits[c.id])), c
        assert c.model_logit == pytest.approx(float(logits[c.id]), rel=1e-5, abs=1e-5)
        assert -1.0 <= c.cos <= 1.0 and c.norm_h == pytest.approx(view.hidden_norm)


def test_tiny_llama_logit_is_norms_times_cos():
    model, tok = tiny_llama(), byte_tokenizer()
    ids = tok(PROMPT)["input_ids"]
    logits = last_logits(model, ids)
    view = lm_head_breakdown(model, ids, [5, 17, 200])
    assert [c.id for c in view.candidates] == [5, 17, 200]
    check_identity(view, logits)
    assert (view.vocab_size, view.hidden_size) == (258, 32)
    assert view.head_parameters == 258 * 32 and view.bytes_bf16 == 258 * 32 * 2
    assert view.bytes_model_dtype == 258 * 32 * 4 and view.dtype == "float32"
    assert not view.tied and not view.has_bias and view.softcap is None
    assert view.position == len(ids) - 1


def test_default_candidates_are_the_top_k_in_order():
    model, tok = tiny_llama(), byte_tokenizer()
    ids = tok(PROMPT)["input_ids"]
    logits = last_logits(model, ids)
    view = lm_head_breakdown(model, ids, top_k=5)
    assert [c.id for c in view.candidates] == logits.topk(5).indices.tolist()
    assert [c.rank for c in view.candidates] == [0, 1, 2, 3, 4]
    assert sum(c.prob for c in view.candidates) < 1.0


def test_record_is_json_able_and_round_trips():
    model, tok = tiny_llama(), byte_tokenizer()
    view = lm_head_breakdown(model, tok("abc")["input_ids"], [3, 4])
    again = LmHeadView.from_dict(json.loads(json.dumps(view.to_dict())))
    assert again == view


def test_head_with_a_bias_is_added_and_reported():
    model, tok = tiny_llama(), byte_tokenizer()
    old = model.lm_head
    new = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        new.weight.copy_(old.weight)
        new.bias.copy_(torch.linspace(-1, 1, old.out_features))
    model.lm_head = new
    ids = tok(PROMPT)["input_ids"]
    view = lm_head_breakdown(model, ids, [0, 100, 257])
    assert view.has_bias
    check_identity(view, last_logits(model, ids))
    assert [c.bias for c in view.candidates] == pytest.approx([-1.0, 100 / 257 * 2 - 1, 1.0], abs=1e-6)
    assert "bias" in lm_head_markdown(view)


def test_soft_capped_logits_are_shown_before_capping():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=128, final_logit_softcapping=0.5,
    )
    model = Gemma2ForCausalLM(config).eval()
    ids = [2, 10, 20, 30]
    logits = last_logits(model, ids)  # capped
    view = lm_head_breakdown(model, ids, top_k=3)
    assert view.softcap == 0.5 and view.matches_model and view.tied
    for c in view.candidates:
        assert close(c.recomputed, c.logit)
        assert c.model_logit == pytest.approx(float(logits[c.id]), abs=1e-6)
        assert c.model_logit == pytest.approx(0.5 * math.tanh(c.logit / 0.5), abs=1e-5)
    assert [c.id for c in view.candidates] == logits.topk(3).indices.tolist()
    assert "before** capping" in lm_head_markdown(view)


def test_final_norm_is_applied_when_the_last_hidden_state_lacks_it():
    model, tok = tiny_llama(), byte_tokenizer()
    ids = tok(PROMPT)["input_ids"]
    seen = []
    hook = model.model.norm.register_forward_hook(lambda m, i, o: seen.append(i[0]))
    try:
        logits = last_logits(model, ids)
    finally:
        hook.remove()
    pre_norm = seen[-1][:, -1:]  # what a library without the final norm would return
    with torch.inference_mode():
        h, in_last, diff = _final_hidden(model, model.lm_head, pre_norm, logits, None)
    assert not in_last and diff < 1e-4


def test_bad_ids_are_value_errors():
    model = tiny_llama()
    with pytest.raises(ValueError, match="input_ids is empty"):
        lm_head_breakdown(model, [], [1])
    with pytest.raises(ValueError, match="candidate_ids"):
        lm_head_breakdown(model, [1, 2], [258])
    with pytest.raises(ValueError, match="input_ids"):
        lm_head_breakdown(model, [1, -1], [1])


def test_embedded_model_paris_tops_the_head(embedded):
    ids = embedded.encode(PROMPT)
    logits = last_logits(embedded.model, ids)
    view = lm_head_breakdown(embedded.model, ids)
    check_identity(view, logits)
    assert embedded.pieces(view.candidates[0].id).piece == " Paris"
    assert view.candidates[0].id == int(logits.argmax())
    assert (view.vocab_size, view.hidden_size) == (49152, 576)
    assert view.head_parameters == 49152 * 576
    assert view.bytes_bf16 == 49152 * 576 * 2
    assert view.tied  # SmolLM2 shares the head with the embedding

    pieces = embedded.pieces_of([c.id for c in view.candidates])
    md = lm_head_markdown(view, pieces)
    assert "49,152 × 576" in md and "56.6 MB at bf16" in md and "read at every decode step" in md
    assert "128,256 × 4,096 ≈ 525 M weights ≈ 1 GB" in md and "␣Paris" in md
    fig = lm_head_figure(view.to_dict(), {str(k): v.to_dict() for k, v in pieces.items()})  # as JSON gives them
    assert list(fig.data[0].x)[0] == "␣Paris" and len(fig.data) == 2
    assert "‖h‖" in fig.data[0].hovertext[0]


def test_lm_head_candidates_after_a_half_written_character(embedded):
    """After "Th" + e1 bb (the first half of "ủ"), the head's top tokens are the bytes that finish a
    letter; the table and the bars show the letters, the bytes only in the hover."""
    ids = embedded.encode("Thủ")[:2]  # "Th", then e1 bb
    assert embedded.pieces(ids[-1]).bytes_hex == "e1bb"
    view = lm_head_breakdown(embedded.model, ids)
    pieces = embedded.pieces_of([c.id for c in view.candidates])
    before = b"Th\xe1\xbb"
    labels = list(lm_head_figure(view, pieces, before=before).data[0].x)
    assert all("\\x" not in label for label in labels)
    assert any(label.startswith("ủ<sub>3/3</sub>") for label in labels)  # "ủ", finished by a7
    md = lm_head_markdown(view, pieces, before=before)
    assert "\\x" not in md and "ủ<sub>3/3</sub>" in md
