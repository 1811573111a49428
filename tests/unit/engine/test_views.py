"""The Engine tab's views and its table parsing: hand-made batch steps in, figure/HTML structure out."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from model_service.records.settings import SamplingSettings
from model_service.records.step import BatchStep, DrawInfo, Room, RoomRow, Stage, StepRecord, Token, Waiting
from playground.engine.views import (
    batch_heatmap,
    batch_sizes_summary,
    empty_params_html,
    params_html,
    room_html,
    rows_html,
    settings_label,
    status_markdown,
    waiting_markdown,
)

ROOT = Path(__file__).resolve().parents[3]
TOP = 4


def record(step=0, probs=(0.6, 0.3, 0.05, 0.05), chosen=0, pieces=(" Paris", " the", "<b>", "\n"), stop=None,
           text="", raw=None):
    """A StepRecord whose candidates are ids 100.. ; chosen >= len(probs) means drawn from the tail."""
    candidates = tuple(Token(100 + i, p) for i, p in enumerate(pieces))
    inside = chosen < len(probs)
    stages = (
        Stage("raw", tuple(raw or probs), 49152, 1.0, 3.0, 0.1),
        Stage("final", tuple(probs), 10, 1.0, 1.0, probs[chosen] if inside else 0.001),
    )
    return StepRecord(
        step=step, token_id=100 + chosen if inside else 999, piece=pieces[chosen] if inside else " far",
        special=False, text=text, candidates=candidates, stages=stages, chosen_rank=chosen if inside else 41,
        draw=DrawInfo(0.5, chosen, 0.0, 1.0), seed=1, forward_ms=80.0, sampling_ms=3.0, stop_reason=stop,
    )


def batch(rows, step=3, params=None):
    active = tuple(i for i, r in enumerate(rows) if r is not None)
    params = params or {
        "temperature": [1.0] * len(active), "top_k": [0] * len(active), "top_p": [1.0] * len(active),
        "min_p": [0.0] * len(active), "greedy": [False] * len(active),
    }
    return BatchStep(step=step, rows=tuple(rows), active=active, logits_shape=(len(active), 49152), params=params,
                     forward_ms=81.5, sampling_ms=4.25)


# ---- heatmap ------------------------------------------------------------------------------------------


def test_heatmap_is_requests_by_rank_with_a_rest_column_and_the_chosen_cell_outlined():
    rows = [record(chosen=1), record(probs=(1.0, 0.0, 0.0, 0.0)), record(probs=(0.5, 0.2, 0.1, 0.1), chosen=7)]
    fig = batch_heatmap(batch(rows), ["1 · a", "2 · greedy", "3 · hot"], top=TOP)
    (heat,) = fig.data
    assert len(heat.z) == 3 and all(len(r) == TOP + 1 for r in heat.z)
    assert list(heat.z[0][:TOP]) == [0.6, 0.3, 0.05, 0.05]
    assert heat.z[0][TOP] == pytest.approx(0.0, abs=1e-9)
    assert heat.z[2][TOP] == pytest.approx(0.1)  # mass outside the shown ranks
    assert heat.zmin == 0 and heat.zmax == 1
    assert list(heat.text[0][:TOP]) == ["␣Paris", "␣the", "&lt;b&gt;", "↵"]  # pieces visible and escaped
    assert heat.text[2][TOP] == "␣far #42"  # drawn from the tail: named in the rest cell with its raw rank
    outlines = [(s.x0 + 0.5, s.y0 + 0.5) for s in fig.layout.shapes]
    assert outlines == [(1, 0), (0, 1), (TOP, 2)]
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "3", "4", "rest"]
    assert list(fig.layout.yaxis.ticktext) == ["1 · a", "2 · greedy", "3 · hot"]
    lo, hi = fig.layout.yaxis.range
    assert lo > hi  # request 1 at the top
    assert fig.layout.template.layout.to_plotly_json() == {}  # template "none": small to stream
    assert "final 30.0%" in heat.hovertext[0][1] and "raw" in heat.hovertext[0][1]


def test_finished_rows_keep_their_line_with_their_stop_reason():
    last = record(step=4, stop="eos")
    fig = batch_heatmap(batch([None, record()]), finished=[last, None], top=TOP)
    assert all(v is None for v in fig.data[0].z[0])
    notes = [a.text for a in fig.layout.annotations]
    assert notes == ["finished at step 5: end-of-text token"]
    assert fig.layout.height == 70 + 34 * 2  # height follows the number of requests, not the live batch


def test_a_full_batch_figure_stays_small():
    fig = batch_heatmap(batch([record() for _ in range(8)]), top=TOP)
    assert len(json.dumps(fig.to_plotly_json(), default=str)) < 15_000


# ---- parameter tensors, texts, status ---------------------------------------------------------------------


def test_params_html_shows_one_column_per_live_batch_row_and_the_chosen_tokens():
    rows = [record(), None, record(chosen=2)]
    params = {"temperature": [1.0, 0.8], "top_k": [0, 40], "top_p": [1.0, 0.95], "min_p": [0.0, 0.1],
              "greedy": [True, False]}
    out = params_html(batch(rows, params=params), numbers=[2, 5, 7])
    assert out.count("<br><small>row") == 2 and "<th>b0<br><small>row 2</small>" in out and "<th>b1<br><small>row 7</small>" in out
    assert "logits <code>(2, 49,152)</code>" in out and "(2,)</code> tensor" in out
    for value in ("0.95", "40", "0.1", "True", "False", "<td>100</td>", "<td>102</td>"):
        assert value in out
    assert "&lt;b&gt;" in out and "<b></td>" not in out  # a token that looks like markup stays text


def test_a_row_half_way_through_a_character_reads_its_candidates_after_it():
    """Row 1 has written e1 bb (half of a Vietnamese letter): its byte candidates show the letters
    they finish, in the heatmap and in the "as text" line; the bytes stay in the hover and title."""
    candidates = (Token(100, "\\x83", bytes_hex="83"), Token(101, "\\xa7", bytes_hex="a7"),
                  Token(102, "\\xe1\\xba", bytes_hex="e1ba"), Token(103, "ô"))
    row = replace(record(), candidates=candidates, piece="\\x83", bytes_hex="83", pending_hex="e1bb")
    (heat,) = batch_heatmap(batch([row, record()]), top=TOP).data
    assert list(heat.text[0][:TOP]) == ["ể<sub>3/3</sub>", "ủ<sub>3/3</sub>", "Ẁ…<sub>1–2/3</sub>", "ô"]
    assert "byte 3 of 3 of ể: \\x83" in heat.hovertext[0][0]
    out = params_html(batch([row, record()]))
    assert '<sub class="ntp-part">3/3</sub>' in out and ">ể<sub" in out and 'title="&#x27;ể&#x27; · byte 3 of 3' in out


def test_rows_html_streams_each_text_with_its_state():
    latest = [record(step=2, text=" Paris <3"), record(step=9, stop="stop_string", text=" and")]
    out = rows_html([1, 3], ["greedy", "T 0.8"], ["The capital", "Once"], latest)
    assert "Row 1" in out and "Row 3" in out and "T 0.8" in out
    assert " Paris &lt;3" in out and "generating · 3 tokens" in out
    assert "stopped</b> after 10 tokens: stop string" in out
    assert '<span class="ntp-prompt">The capital</span>' in out


def test_settings_labels_name_only_the_knobs_that_are_on():
    assert settings_label(SamplingSettings(temperature=0)) == "greedy"
    assert settings_label(SamplingSettings(temperature=0.8, top_p=0.95)) == "T 0.8 · top-p 0.95"
    assert settings_label(SamplingSettings(min_p=0.1)) == "min-p 0.1"
    assert settings_label(SamplingSettings(temperature=0.6, top_k=40, order="vllm")) == "T 0.6 · top-k 40 · vllm"
    assert settings_label(SamplingSettings()) == "T 1 (plain sampling)"
    assert settings_label(SamplingSettings(repetition_penalty=1.2)) == "rep 1.2"  # a penalty alone is not plain
    assert settings_label(SamplingSettings(temperature=0, frequency_penalty=0.5, presence_penalty=-0.5, order="vllm")) == (
        "greedy · freq 0.5 · pres -0.5 · vllm")


def test_params_html_shows_the_penalties_from_the_requests_settings_only_when_a_row_has_one():
    rows = [record(), None, record(chosen=2)]
    settings = [SamplingSettings(repetition_penalty=1.3), SamplingSettings(), SamplingSettings(order="vllm", frequency_penalty=0.5)]
    out = params_html(batch(rows), numbers=[2, 5, 7], settings=settings)
    for name, values in (("repetition_penalty", ("1.3", "1")), ("frequency_penalty", ("0", "0.5")),
                         ("presence_penalty", ("0", "0"))):
        line = out.split(f"<code>{name}</code>")[1].split("</tr>")[0]
        assert "float32" in line and [c.split("</td>")[0] for c in line.split("<td>")[1:]] == list(values)
    assert "1 = off" in out and "0 = off" in out
    plain = [SamplingSettings(), SamplingSettings(repetition_penalty=1.3), SamplingSettings()]  # the penalised row has left
    for shown in (params_html(batch(rows), settings=plain), params_html(batch(rows))):
        assert "penalty" not in shown


def test_batch_sizes_and_status():
    assert batch_sizes_summary([6, 6, 5, 5, 5, 2]) == "6 rows for steps 1–2 · 5 for steps 3–5 · 2 for step 6"
    assert batch_sizes_summary([1]) == "1 row for step 1"
    st = batch([record(), None, record()])
    line = status_markdown(st, [3, 2], tokens=5, seconds=0.5)
    assert "**Step 4**" in line and "batch of **2** of 3 rows" in line and "10.0 tokens/s" in line
    assert "All rows finished" in status_markdown(st, [3, 2], 5, 0.5, done=True)
    assert "Run" in status_markdown(None)


def test_engine_views_import_neither_torch_nor_gradio_and_the_tab_no_torch():
    code = ("import sys, playground.engine.views, playground.engine.replay; "
            "print(sorted({'torch', 'gradio'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
    code = "import sys, playground.engine.table; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


# ---- in Vietnamese ------------------------------------------------------------------------------------------


def test_the_heatmap_in_vietnamese_titles_ticks_hovers_and_notes():
    rows = [record(chosen=1), None, record(probs=(0.5, 0.2, 0.1, 0.1), chosen=7)]
    fig = batch_heatmap(batch(rows), finished=[None, record(step=4, stop="max_tokens"), None], top=TOP, lang="vi")
    (heat,) = fig.data
    assert fig.layout.xaxis.title.text == "hạng theo logits thô"
    assert heat.colorbar.title.text == "p cuối"
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "3", "4", "còn lại"]
    assert list(fig.layout.yaxis.ticktext) == ["hàng 1", "hàng 2", "hàng 3"]  # default labels
    assert heat.hovertext[0][1] == "hạng 2 · ' the' · cuối 30.0% · thô 30.0%"
    assert heat.hovertext[0][TOP] == "mọi token còn lại · cuối 0%"
    assert heat.hovertext[2][TOP] == "ngoài top 4: đã chọn ' far', hạng thô 42"
    assert [a.text for a in fig.layout.annotations] == ["xong ở bước 5: đạt số token mới tối đa"]
    assert heat.text[2][TOP] == "␣far #42"  # numbers and pieces read the same in both languages
    not_in = batch_heatmap(batch([None, record()]), top=TOP, lang="vi")
    assert [a.text for a in not_in.layout.annotations] == ["không nằm trong batch của bước này"]
    assert batch_heatmap(batch([]), lang="vi").layout.annotations[0].text == "Không có request nào."


def test_the_heatmap_in_english_is_as_before_by_default():
    fig = batch_heatmap(batch([record(chosen=1), None]), finished=[None, record(step=4, stop="eos")], top=TOP)
    assert fig.layout.xaxis.title.text == "rank under the raw logits" and fig.data[0].colorbar.title.text == "p final"
    assert list(fig.layout.yaxis.ticktext) == ["row 1", "row 2"]
    assert fig.data[0].hovertext[0][1] == "rank 2 · ' the' · final 30.0% · raw 30.0%"
    assert fig.data[0].hovertext[0][TOP] == "all other tokens · final 0%"
    assert [a.text for a in fig.layout.annotations] == ["finished at step 5: end-of-text token"]


def test_params_in_vietnamese():
    params = {"temperature": [1.0], "top_k": [0], "top_p": [1.0], "min_p": [0.0], "greedy": [True]}
    out = params_html(batch([None, record()], params=params), numbers=[3, 6], lang="vi")
    assert "<th>hàng batch</th>" in out and "<th>b0<br><small>hàng 6</small></th>" in out
    assert "Bước 4: logits <code>(1, 49,152)</code> · mỗi dòng là một tensor <code>(1,)</code>" in out
    for words in ("hàng greedy mang 1", "0 = tắt", "1 = tắt", "argmax, không rút ngẫu nhiên", "→ dạng văn bản"):
        assert words in out
    assert "row" not in out and "off" not in out and "as text" not in out
    assert "Các tensor theo từng hàng" in empty_params_html("vi") and "per-row tensors" in empty_params_html()


def test_cards_in_vietnamese_still_escape_what_the_visitor_typed():
    latest = [record(step=2, text=" Paris <3"), record(step=9, stop="stop_string", text=" and"), None]
    out = rows_html([1, 3, 4], ["greedy", "T 0.8", "<i>x</i>"], ["<b>Thủ đô", "Once", "x"], latest, lang="vi")
    assert "<b>Hàng 1</b>" in out and "<b>Hàng 3</b>" in out and "đang sinh · 3 token" in out
    assert "<b>đã dừng</b> sau 10 token: gặp stop string" in out and "đang chờ…" in out
    assert '<span class="ntp-prompt">&lt;b&gt;Thủ đô</span>' in out and "&lt;i&gt;x&lt;/i&gt;" in out
    assert "chưa chạy" in rows_html([1], ["greedy"], ["x"], [None], running=False, lang="vi")


def test_status_batch_sizes_and_the_waiting_line_in_vietnamese():
    assert batch_sizes_summary([6, 6, 5, 5, 5, 2], "vi") == "6 hàng ở bước 1–2 · 5 ở bước 3–5 · 2 ở bước 6"
    assert batch_sizes_summary([1], "vi") == "1 hàng ở bước 1"
    st = batch([record(), None, record()])
    line = status_markdown(st, [3, 2], tokens=5, seconds=0.5, lang="vi")
    assert line.startswith("**Bước 4** · batch **2** trên 3 hàng · logits (2, 49,152) · forward pass 82 ms")
    assert "sampler 4.2 ms" in line and "tổng cộng 10.0 token/s" in line
    done = status_markdown(st, [3, 2], 5, 0.5, done=True, lang="vi")
    assert "**Mọi hàng đã xong** sau 4 bước, 5 token. Kích thước batch: 3 hàng ở bước 1 · 2 ở bước 2." in done
    assert "**Chạy batch**" in status_markdown(None, lang="vi")
    assert "còn 2 request trước bạn** (tổng cộng 5 đang chờ)" in waiting_markdown(Waiting(3, 2, 5), "vi")
    assert "1 request ahead of you** (1 waiting in all)" in waiting_markdown(Waiting(2, 1, 1))
    assert "2 requests ahead of you** (5 waiting in all)" in waiting_markdown(Waiting(3, 2, 5))


def test_the_live_room_in_both_languages():
    rows = (RoomRow({"temperature": 0.8, "top_p": 0.95}, True, 3, 32, 6, False),
            RoomRow({"temperature": 1.0}, False, 0, 16, 900, True))
    room = Room(rows=rows, waiting=2, step=12345, max_rows=8, queue_size=64)
    vi = room_html(room, "vi")
    assert "<b>Cả phòng, trực tiếp</b>: 2/8 hàng đang dùng · 2 đang chờ · bước 12,345 kể từ khi khởi động" in vi
    for words in ("<th>cấu hình</th>", "T 0.8 · top-p 0.95 · có seed", "token 3/32",
                  "T 1 (lấy mẫu thường)", "đang đọc prompt", "<td>900 token</td>"):
        assert words in vi
    en = room_html(room)
    for words in ("<b>The live room</b>: 2 of 8 rows in use · 2 waiting · step 12,345 since start", " · seeded",
                  "token 3 of 32", "reading its prompt", "900 prompt tokens", "<th>progress</th>"):
        assert words in en
    empty = Room(rows=(), waiting=0, step=1, max_rows=8, queue_size=64)
    assert "Lúc này không ai đang sinh văn bản." in room_html(empty, "vi")
    assert "Nobody is generating right now." in room_html(empty)


def test_settings_labels_in_vietnamese_keep_the_knobs_names():
    assert settings_label(SamplingSettings(), "vi") == "T 1 (lấy mẫu thường)"
    assert settings_label(SamplingSettings(temperature=0), "vi") == "greedy"  # the knobs keep their names
    assert settings_label(SamplingSettings(temperature=0.6, top_k=40, order="vllm"), "vi") == "T 0.6 · top-k 40 · vllm"


def test_the_live_room_says_which_arithmetic_it_runs():
    plain = Room(rows=(), waiting=0, step=1, max_rows=8, queue_size=64)
    invariant = Room(rows=(), waiting=0, step=1, max_rows=8, queue_size=64, batch_invariant=True)
    assert "Default arithmetic" in room_html(plain) and "knife-edge draw can turn" in room_html(plain)
    assert "Batch-invariant: a seeded request draws its solo tokens here" in room_html(invariant)
    assert "Bất biến theo batch" in room_html(invariant, "vi") and "Số học mặc định" in room_html(plain, "vi")
