"""The app through its API, as scripts and notebooks use it (gradio_client against the launched app)."""

from __future__ import annotations

import json
import re

import pytest
from gradio_client.exceptions import AppError

from playground import limits

from .lab_args import KNOBS_OFF, KNOBS_OFF_BY_NAME, untagged

LESSON = "The capital of France is"
# /generate takes the lab's controls in order: prompt, chat, temperature, top-k, top-p, min-p, seed,
# max new tokens, stop strings, order, then the page's language ("en" when left out).
RUN_PLACEHOLDER = "Entropy, chosen-token probability and kept count over the run."  # the run chart before a run ends
UI_ARGS = dict(chat=False, temperature=0.8, top_k=0, top_p=0.95, min_p=0.0, seed="3", max_new=6, stop="", order="hf", **KNOBS_OFF_BY_NAME)


def test_every_event_has_a_named_endpoint(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/generate", "/step", "/stop", "/scrub", "/stream_records", "/greedy_loop", "/toy_softmax"} <= names


def test_stream_records_yields_every_step_and_a_stop_reason(client):
    job = client.submit(LESSON, 0.0, 0, 1.0, 0.0, None, "hf", 5, api_name="/stream_records")
    records = list(job)
    assert len(records) == 5
    assert records[0]["piece"] == " Paris" and records[0]["chosen_rank"] == 0
    assert [r["stop_reason"] for r in records] == [None] * 4 + ["max_tokens"]
    assert [s["name"] for s in records[0]["stages"]] == ["raw", "temperature", "top_k", "top_p", "min_p", "final"]


def test_a_seeded_run_replays_identically_through_the_api(client):
    run = lambda: [r["token_id"] for r in client.submit(LESSON, 1.0, 0, 0.9, 0.0, 42, "vllm", 10, api_name="/stream_records")]
    first = run()
    assert len(first) >= 1 and run() == first


def test_invalid_settings_come_back_as_a_clear_error_and_the_app_keeps_serving(client):
    job = client.submit(LESSON, 1.0, 0, 2.0, 0.0, None, "hf", 5, api_name="/stream_records")
    assert list(job) == []
    with pytest.raises(AppError, match=r"top_p must be a number between 0 and 1 \(0 excluded\), got 2.0"):
        job.result()
    with pytest.raises(AppError, match="prompt is empty"):
        client.predict("  ", *UI_ARGS.values(), api_name="/generate")
    with pytest.raises(AppError, match="seed"):
        client.predict(LESSON, *{**UI_ARGS, "seed": "abc"}.values(), api_name="/generate")
    records = list(client.submit(LESSON, 0.0, 0, 1.0, 0.0, None, "hf", 2, api_name="/stream_records"))
    assert len(records) == 2


def test_the_penalties_reach_the_lab_and_the_api_and_a_bad_one_is_named(client):
    loop = "The cat sat on the mat. The cat sat on the"
    penalised = {**UI_ARGS, "temperature": 0.0, "max_new": 2, "repetition_penalty": 1.3}
    chips, status, stage, *_ = client.predict(loop, *penalised.values(), api_name="/generate")
    titles = [a["text"] for a in json.loads(stage["plot"])["layout"]["annotations"]]
    assert any(t.startswith("after penalties") for t in titles) and not any("logit bias" in t for t in titles)
    records = list(client.submit(loop, 0.0, 0, 1.0, 0.0, None, "vllm", 1, None, False, 5, False, {"7042": 5}, 1.3, 0.5,
                                 api_name="/stream_records"))
    assert records[0]["piece"] != " mat" and [s["name"] for s in records[0]["stages"]][1:3] == ["logit_bias", "penalties"]
    with pytest.raises(AppError, match="logit bias: the bias of token 13 must be a number between -100 and 100"):
        client.predict(loop, *{**penalised, "logit_bias": "13:-500"}.values(), api_name="/generate")
    with pytest.raises(AppError, match="frequency penalty is not part of the hf order"):
        client.predict(loop, *{**penalised, "frequency_penalty": 0.5}.values(), api_name="/generate")


def test_top_h_reaches_the_lab_and_both_apis_and_another_order_refuses_it(client):
    # the lab's /generate takes it last (a knob added after the others); /stream_records by name
    stage = client.predict(LESSON, *{**UI_ARGS, "max_new": 2, "top_h": 0.3}.values(), api_name="/generate")[2]
    titles = [a["text"] for a in json.loads(stage["plot"])["layout"]["annotations"]]
    assert any(t.startswith("after top-H") for t in titles)
    records = list(client.submit(LESSON, 0.8, 0, 1.0, 0.0, 1, "hf", 2, top_h=0.3, api_name="/stream_records"))
    names = [s["name"] for s in records[0]["stages"]]
    assert names == ["raw", "temperature", "top_h", "top_k", "top_p", "min_p", "final"]
    assert 1 <= records[0]["stages"][2]["kept_count"] <= 100  # Top-H reads the 100 most probable tokens only
    with pytest.raises(AppError, match="top-H is not part of the vllm order"):
        client.predict(LESSON, *{**UI_ARGS, "order": "vllm", "top_h": 0.3}.values(), api_name="/generate")


def test_the_lab_streams_text_and_ends_with_the_stop_reason(client):
    job = client.submit(LESSON, *UI_ARGS.values(), api_name="/generate")
    outputs = list(job)
    assert len(outputs) == 7  # the last run's views cleared at once, then one update per token
    assert outputs[0][1] == "Starting a new run…" and outputs[0][4]["visible"] is False  # no old scrubber
    assert RUN_PLACEHOLDER in outputs[0][5]["plot"] and RUN_PLACEHOLDER not in outputs[-1][5]["plot"]  # no old run chart
    chips, status = outputs[-1][0], outputs[-1][1]
    assert "stopped: reached max new tokens" in status and "seed 3" in status
    assert chips.count("title=") >= 6
    stage_plot = outputs[-1][2]
    assert stage_plot["type"] == "plotly"  # the last step's charts are always drawn


def test_step_advances_one_token_and_replays_generate(client):
    full = client.predict(LESSON, *{**UI_ARGS, "max_new": 3}.values(), api_name="/generate")
    for i in range(3):
        out = client.predict(LESSON, *{**UI_ARGS, "max_new": 3}.values(), api_name="/step")
        assert f"**Step {i + 1}**" in out[1]
    assert out[0] == untagged(full[0])  # the same chips: stepping replays the seeded run


def test_greedy_loop_demo_repeats_where_sampling_does_not(client):
    greedy, sampled = client.predict("Write whatever comes to mind:", api_name="/greedy_loop")
    pct = lambda html: int(html.split("% of its")[0].rsplit("· ", 1)[-1])
    assert pct(greedy) > 40 > pct(sampled)


def test_lm_head_panel_explains_the_top_logits(client):
    summary, plot = client.predict(LESSON, False, api_name="/lm_head")
    assert "49,152 × 576" in summary and "Paris" in summary
    assert plot["type"] == "plotly"


def test_make_link_encodes_the_controls(client):
    link = client.predict(LESSON, True, 0.5, 40, 0.9, 0.05, "7", 30, "", "vllm", api_name="/make_link")
    assert link.endswith("?prompt=The+capital+of+France+is&chat=true&temperature=0.5&top_k=40&top_p=0.9&min_p=0.05&seed=7&max_new_tokens=30&order=vllm")


def test_scrub_over_the_api_reaches_every_step(client):
    client.predict(LESSON, *{**UI_ARGS, "temperature": 0.0, "max_new": 6}.values(), api_name="/generate")
    chips, status, *_ = client.predict(6, api_name="/scrub")  # steps count from 1, as the status line says
    assert status.startswith("**Step 6** of 6")
    chips, status, *_ = client.predict(1, api_name="/scrub")
    assert status.startswith("**Step 1** of 6") and "no draw" in status  # greedy: no seed to speak of
    with pytest.raises(AppError, match="scrub step must be a whole number between 1 and 6, got 0"):
        client.predict(0, api_name="/scrub")
    with pytest.raises(AppError, match="scrub step must be a whole number between 1 and 6, got 9"):
        client.predict(9, api_name="/scrub")


def test_uploads_bigger_than_a_run_file_are_refused(app_url):
    import httpx

    files = {"files": ("big.json", b"x" * (limits.MAX_RUN_FILE_BYTES + 1), "application/json")}
    r = httpx.post(app_url + "gradio_api/upload", files=files, timeout=60)
    assert r.status_code >= 400  # max_file_size: the one file input takes a run file, nothing bigger


def test_the_lab_answers_in_vietnamese_when_asked_and_in_english_by_default(client):
    args = (limits.LESSON_PROMPT_VI, *{**UI_ARGS, "max_new": 3}.values())
    chips, status, stage, *_ = client.predict(*args, "vi", api_name="/generate")
    assert status.startswith("**Bước 3** / 3 · ") and "**đã dừng: đạt số token mới tối đa**" in status
    assert "xác suất model gán cho token được chọn" in chips and "hạng" in chips
    titles = [a["text"] for a in json.loads(stage["plot"])["layout"]["annotations"]]
    assert titles[0].startswith("softmax gốc<br>") and any(t.startswith("cuối (lấy mẫu từ đây)") for t in titles)
    english = client.predict(*args, api_name="/generate")[1]
    assert english.startswith("**Step 3** of 3 · ")


def test_a_link_made_on_a_vietnamese_page_carries_the_language(client):
    link = client.predict(limits.LESSON_PROMPT_VI, False, 1.0, 0, 1.0, 0.0, "", 48, "", "hf", *KNOBS_OFF, "vi",
                          api_name="/make_link")
    assert link.endswith("?prompt=Th%E1%BB%A7+%C4%91%C3%B4+c%E1%BB%A7a+Ph%C3%A1p+l%C3%A0&lang=vi")


def test_the_greedy_loop_in_vietnamese(client):
    greedy, sampled = client.predict("Write whatever comes to mind:", "vi", api_name="/greedy_loop")
    assert "Greedy (temperature bằng 0)" in greedy and "cụm 4 từ của nó lặp lại" in greedy
    assert "Lấy mẫu (T 0.8, top-p 0.95, seed 0)" in sampled


def test_a_bad_value_is_refused_in_the_pages_language_naming_the_control(client):
    with pytest.raises(AppError, match="Số token mới tối đa phải là một số nguyên từ 1 đến 512, nhận được 0"):
        client.predict(LESSON, *{**UI_ARGS, "max_new": 0}.values(), "vi", api_name="/generate")
    with pytest.raises(AppError, match="max new tokens must be a whole number between 1 and 512, got 0"):
        client.predict(LESSON, *{**UI_ARGS, "max_new": 0}.values(), api_name="/generate")
    client.predict(LESSON, *{**UI_ARGS, "temperature": 0.0, "max_new": 3}.values(), api_name="/generate")
    with pytest.raises(AppError, match="Bước tua tới phải là một số nguyên từ 1 đến 3, nhận được 9"):
        client.predict(9, "vi", api_name="/scrub")


# A few-shot prompt whose greedy continuation on SmolLM2 starts "Thủ đô của": letters its byte-level
# BPE cuts into byte pieces (ủ = e1 bb | a7, đ = c4 | 91).
VIETNAMESE = "Thủ đô của Pháp là Paris.\nThủ đô của Đức là Berlin.\nThủ đô của Ý là Rome.\n"


def test_a_vietnamese_run_shows_letters_not_byte_escapes(client):
    chips, status, stage_plot, *_ = client.predict(
        VIETNAMESE, *{**UI_ARGS, "temperature": 0.0, "max_new": 8}.values(), api_name="/generate")
    texts = re.findall(r'class="ntp-chip[^"]*"[^>]*>(.*?)</span>(?=<span class="ntp-chip|$)', chips)
    letters = [re.sub(r"<sub.*?</sub>|<[^>]+>", "", t) for t in texts]
    assert letters[:6] == ["Th", "ủ", "ủ", "␣đ", "đ", "ô"]
    assert "Thủ" in "".join(letters) and "đô" in "".join(letters)
    assert "\\x" not in re.sub(r'title="[^"]*"', "", chips)  # the bytes are in the titles (hover) only
    assert "\\xe1\\xbb" in chips
    assert "\\x" not in status
    layout = json.loads(stage_plot["plot"])["layout"]
    assert "\\x" not in "".join(layout["yaxis"]["ticktext"])  # the stage bars' labels
    vi_chips = client.predict(VIETNAMESE, *{**UI_ARGS, "temperature": 0.0, "max_new": 8}.values(), "vi",
                              api_name="/generate")[0]
    assert "byte thứ 1–2 trong 3 byte của ủ: \\xe1\\xbb" in vi_chips and "bytes 1–2 of 3" not in vi_chips
