"""The Forward pass tab through its API (gradio_client against the launched app)."""

from __future__ import annotations

import json

import pytest
from gradio_client.exceptions import AppError

LESSON = "The capital of France is"


def test_trace_record_endpoint_returns_the_lesson_figures(client):
    record = client.predict(LESSON, False, None, 5, api_name="/trace_record")
    s = record["shapes"]
    assert s["input_ids"] == [1, 5] and s["num_hidden_states"] == 31 and s["hidden_state"] == [1, 5, 576]
    assert s["logits"] == [1, 5, 49152]
    assert record["predictions"][-1]["top"][0]["piece"] == " Paris"
    assert record["lens"]["target"]["piece"] == " Paris" and len(record["lens"]["layers"]) == 31
    assert record["attention"]["block"] == 15 and len(record["attention"]["weights"]) == 9
    assert len(json.dumps(record)) < 100_000


def test_trace_button_fills_every_panel(client):
    out = client.predict(LESSON, False, 2, -1, api_name="/trace")
    (status, tokens, input_md, shapes, embedding, stream, residual, block, head, attention_md, attention,
     output_md, predictions, teacher, cost_md, cost, lens_md, lens) = out
    assert "Traced **5 tokens** through 30 blocks" in status
    assert tokens.count('class="ntp-fw-tok"') == 5 and ">3575<" in tokens
    assert "len(hidden_states)  31" in shapes and "(1, 5, 49152)" in shapes
    assert "| 4 | <code>␣is</code> | 314 |" in embedding and "final norm" in stream
    assert "Block 2 of 30: 9 heads sharing 3 key/value heads" in attention_md
    assert "983 kB" in cost_md and "Paris" in output_md and "Paris" in lens_md
    for plot in (residual, attention, predictions, teacher, cost, lens):
        template = json.loads(plot["plot"])["layout"]["template"]
        assert plot["type"] == "plotly" and len(json.dumps(template)) < 100  # template "none": small to send
    assert block["value"] == 2 and block["maximum"] == 30  # an update: the slider learns the model's depth


def test_another_block_is_fetched_without_retracing(client):
    client.predict(LESSON, False, 15, -1, api_name="/trace")
    attention_md, attention = client.predict(30, -1, api_name="/trace_block")
    assert "Block 30 of 30" in attention_md
    figure = json.loads(attention["plot"])
    assert len(figure["data"]) == 9  # all heads


def test_sample_from_here_hands_the_prompt_to_the_lab(client):
    prompt, chat, *_ = client.predict("Once upon a time", True, api_name="/sample_from_here")
    assert (prompt, chat) == ("Once upon a time", True)


def test_bad_requests_are_clear_errors(client):
    with pytest.raises(AppError, match="prompt is empty"):
        client.predict("", False, 15, -1, api_name="/trace")
    with pytest.raises(AppError, match="block must be"):
        client.predict(LESSON, False, 99, 5, api_name="/trace_record")
    assert client.predict(LESSON, False, 1, 3, api_name="/trace_record")["attention"]["block"] == 1


def test_the_trace_speaks_the_language_it_is_given_and_english_by_default(client):
    out = client.predict(LESSON, False, 2, -1, "vi", api_name="/trace")
    status, tokens, input_md, shapes, *_ = out
    attention_md, residual = out[9], out[6]
    assert "Đã lần theo **5 token** qua 30 block" in status and 'title="ID 504 · ' in tokens
    assert "tokenizer này không thêm marker bắt đầu văn bản" in input_md and "đầu ra embedding" in shapes
    assert "Block 2 trong số 30: 9 head dùng chung 3 head key/value" in attention_md
    assert "‖stream‖ sau mỗi block" in residual["plot"]
    attention_md, _ = client.predict(30, -1, "vi", api_name="/trace_block")
    assert attention_md.count("Block 30 trong số 30") == 1
    attention_md, _ = client.predict(30, -1, api_name="/trace_block")  # the picker's default: English
    assert "Block 30 of 30" in attention_md


def test_bad_requests_are_told_in_the_pages_language(client):
    with pytest.raises(AppError, match="prompt đang trống"):
        client.predict("", False, 15, -1, "vi", api_name="/trace")
    with pytest.raises(AppError, match="block phải là một số nguyên từ 1 đến 30"):
        client.predict(LESSON, False, 99, -1, "vi", api_name="/trace")


def test_a_script_asks_what_the_precision_does_and_in_fp32_it_is_nothing(client):
    e = client.predict(LESSON, False, None, api_name="/precision_record")
    assert e["precision"] == e["running"] == "fp32" and e["described"] == "float32" and e["max_abs_dlogit"] == 0
    assert e["greedy"]["piece"] == e["greedy_fp32"]["piece"] == " Paris"
    assert [row["prob"] for row in e["top"]] == [row["prob_fp32"] for row in e["top"]]
    four = client.predict(LESSON, False, "int4", api_name="/precision_record")  # a copy as --precision int4 loads it
    assert (four["precision"], four["running"]) == ("int4", "fp32") and 0 < four["max_abs_dlogit"] < 1
    assert four["greedy"]["piece"] == " Paris" and four["top"][0]["prob_fp32"] == e["top"][0]["prob"]
    with pytest.raises(AppError, match="prompt is empty"):
        client.predict("", False, None, api_name="/precision_record")
    with pytest.raises(AppError, match="precision must be one of fp32, bf16, int8, int4"):
        client.predict(LESSON, False, "int3", api_name="/precision_record")


def test_a_script_asks_who_pushed_paris_up_and_knocks_out_the_last_mlp(client):
    a = client.predict(LESSON, False, None, None, None, api_name="/attribution_record")
    assert a["candidate"]["piece"] == " Paris" and a["residual_error"] < 1e-3
    total = a["embedding"] + sum(a["attention"]) + sum(a["mlp"]) + a["bias"]
    assert abs(total - a["logit_diff"]) < 1e-3 and len(a["heads"]) == 9
    r = client.predict(LESSON, "mlp", 30, None, "zero", {"temperature": 0.7, "seed": 3}, False, None,
                       api_name="/knockout_record")
    assert r["candidate"]["piece"] == " Paris" and r["prob_after"] < r["prob_before"] and r["rank_after"] > 1
    assert r["before"]["draw"]["u"] == r["after"]["draw"]["u"] and r["target"] == {"kind": "mlp", "block": 30,
                                                                                    "head": None, "mode": "zero"}
    with pytest.raises(AppError, match="head must be a whole number between 1 and 9"):
        client.predict(LESSON, "head", 3, 12, "zero", None, False, None, api_name="/knockout_record")
