"""The lab's server-built text (status line, waiting line, order note, placeholders) in both languages."""

from __future__ import annotations

from dataclasses import replace

from model_service.records.step import Waiting
from playground.lab.request import ORDER_NOTES
from playground.lab.run import Run, order_note_text, placeholder_figures, status_markdown, waiting_markdown

from .test_charts import make_record


def run_of(*records, **kw) -> Run:
    return Run(records=list(records), **kw)


def test_the_status_line_in_english_reads_as_before():
    last = make_record(step=1, u=0.3)
    last = replace(last, stop_reason="max_tokens")
    line = status_markdown(run_of(make_record(), last), rate=12.34)
    assert line == (
        "**Step 2** of 2 · token <code>␣Paris</code> (id 100) · rank 1, p = 0.750 after the pipeline"
        " · drawn with u = 0.300 · seed 1 · forward 1 ms · sampling 0.1 ms · 12.3 tokens/s"
        " · **stopped: reached max new tokens**"
    )


def test_the_status_line_in_vietnamese():
    greedy = make_record(u=None)
    line = status_markdown(run_of(greedy, stop_requested=True), lang="vi")
    assert line == (
        "**Bước 1** / 1 · token <code>␣Paris</code> (ID 100) · hạng 1, p = 0.750 sau pipeline"
        " · greedy: lấy argmax · không rút ngẫu nhiên · forward pass 1 ms · lấy mẫu 0.1 ms · **bạn đã dừng ở bước 1**"
    )
    stopped = replace(greedy, stop_reason="eos", batch_size=3)
    assert status_markdown(run_of(stopped), lang="vi").endswith(
        "batch gồm 3 request ở bước này · **đã dừng: token kết thúc văn bản**")
    assert status_markdown(Run(), lang="vi").startswith("Bấm **Sinh văn bản**")
    assert status_markdown(Run()) == "Press **Generate** to stream a run, or **Step** to take one token at a time."


def test_a_greedy_stopped_run_says_no_draw_and_where_it_stopped():
    greedy = [make_record(u=None, step=i) for i in range(3)]
    line = status_markdown(run_of(*greedy, stop_requested=True))
    assert line.startswith("**Step 3** of 3") and "greedy: argmax · no draw" in line and "seed" not in line
    assert line.endswith("**stopped by you at step 3**")
    assert "**stopped by you at step 3**" in status_markdown(run_of(*greedy, stop_requested=True), index=0)


def test_a_tiny_probability_is_never_zero_in_the_status_line():
    tiny = make_record(probs={"raw": [0.9, 0.0004], "final": [0.9, 0.0004]}, chosen=1, pieces=[" a", " b"])
    assert "p = <0.001 after the pipeline" in status_markdown(run_of(tiny))


def test_the_piece_in_the_status_line_stays_escaped_in_both_languages():
    record = make_record(pieces=["<img src=x onerror=alert(1)>"])
    for lang in ("en", "vi"):
        line = status_markdown(run_of(record), lang=lang)
        assert "<img" not in line and "&lt;img src=x" in line


def test_waiting_line_one_and_many():
    assert waiting_markdown(Waiting(position=2, ahead=1, queue_length=2)).startswith("⏳ **waiting: 1 request ahead of you** — ")
    assert waiting_markdown(Waiting(position=4, ahead=3, queue_length=4)).startswith("⏳ **waiting: 3 requests ahead of you** — ")
    assert waiting_markdown(Waiting(position=4, ahead=3, queue_length=4), "vi").startswith("⏳ **đang chờ: còn 3 request trước bạn** — ")


def test_order_notes_and_placeholders_follow_the_language():
    for order in ORDER_NOTES:
        assert order_note_text(order) != order_note_text(order, "vi") != ""
    assert order_note_text("hf").startswith("The lesson's order")
    assert order_note_text("nonsense", "vi") == ""
    english, vietnamese = placeholder_figures(), placeholder_figures("vi")
    assert [f.layout.annotations[0].text for f in english] == [
        "The distributions of each step appear here.", "The random draw appears here.",
        "Entropy, chosen-token probability and kept count over the run."]
    assert [f.layout.annotations[0].text for f in vietnamese] == [
        "Phân phối ở từng bước sẽ hiện ở đây.", "Lần rút ngẫu nhiên sẽ hiện ở đây.",
        "Entropy, xác suất của token được chọn và số token được giữ lại, qua cả lượt chạy."]


def test_a_split_characters_token_says_which_bytes_it_holds_in_both_languages():
    first = replace(make_record(pieces=["\\xe1\\xbb"]), bytes_hex="e1bb")
    second = replace(make_record(step=1, pieces=["\\xa7"]), bytes_hex="a7", pending_hex="e1bb")
    run = run_of(first, second)
    assert "token <code>ủ</code> (id 100, bytes 1–2 of 3 of ủ) · rank 1" in status_markdown(run, 0)
    assert "token <code>ủ</code> (ID 100, byte thứ 3 trong 3 byte của ủ) · hạng 1" in status_markdown(run, lang="vi")
    assert "\\x" not in status_markdown(run, 0) + status_markdown(run, lang="vi")
