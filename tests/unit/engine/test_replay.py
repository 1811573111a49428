"""A run as the Engine tab keeps it, redrawn in either language from the records alone."""

from __future__ import annotations

from model_service.records.settings import Request, SamplingSettings
from model_service.records.step import Waiting
from playground.engine import replay
from playground.engine.replay import EngineRun

from .test_views import batch, record

TOP = 4


def a_run():
    requests = [Request("The capital", SamplingSettings(temperature=0), 8), Request("<b>Once", SamplingSettings(), 8)]
    return EngineRun.start([1, 3], requests)


def test_a_run_keeps_each_rows_latest_record_and_the_batch_sizes():
    run = a_run()
    assert run.latest == (None, None) and not run.done and run.step is None
    first = batch([record(step=0, text=" Paris"), record(step=0, text=" upon")], step=0)
    run = run.stepped(first, 0.5)
    second = batch([None, record(step=1, stop="eos", text=" upon a")], step=1)
    run = run.stepped(second, 1.0)
    assert run.latest[0].text == " Paris"  # a row that left the batch keeps its last record
    assert run.sizes == (2, 1) and run.tokens == 3 and run.seconds == 1.0 and not run.done
    last = batch([record(step=1, stop="max_tokens", text=" Paris."), None], step=2)
    assert run.stepped(last, 1.5).done


def test_nothing_run_yet_gives_the_placeholders_in_either_language():
    assert "Văn bản của từng hàng" in replay.texts_html(None, "vi")
    assert "Each row's text streams here" in replay.texts_html(None)
    assert "**Chạy batch**" in replay.status_markdown(None, "vi")
    assert replay.heatmap(None, TOP, "vi").layout.annotations[0].text.startswith("Batch sẽ hiện ở đây")
    assert replay.heatmap(None, TOP).layout.annotations[0].text.startswith("The batch appears here")
    assert "sampler nhận" in replay.params_html(None, "vi")


def test_a_waiting_run_shows_its_place_in_the_queue():
    run = a_run().waited(Waiting(position=2, ahead=1, queue_length=3))
    assert "còn 1 request trước bạn" in replay.status_markdown(run, "vi")
    assert "1 request ahead of you" in replay.status_markdown(run, "en")
    assert replay.texts_html(run, "vi").count("đang chờ…") == 2


def test_one_run_redrawn_in_each_language_says_the_same_numbers():
    run = a_run().stepped(batch([record(step=2, text=" Paris"), record(step=2, text=" upon")], step=2), 0.5)
    vi = [replay.texts_html(run, "vi"), replay.status_markdown(run, "vi"), replay.params_html(run, "vi")]
    en = [replay.texts_html(run, "en"), replay.status_markdown(run, "en"), replay.params_html(run, "en")]
    assert "Hàng 3" in vi[0] and "&lt;b&gt;Once" in vi[0] and "T 1 (lấy mẫu thường)" in vi[0]
    assert "Row 3" in en[0] and "T 1 (plain sampling)" in en[0]
    assert "**Bước 3**" in vi[1] and "**Step 3**" in en[1] and "tổng cộng 4.0 token/s" in vi[1]  # 2 tokens in 0.5 s
    assert "hàng 3" in vi[2] and "row 3" in en[2]
    fig_vi, fig_en = replay.heatmap(run, TOP, "vi"), replay.heatmap(run, TOP, "en")
    assert list(fig_vi.layout.yaxis.ticktext) == ["1 · greedy", "3 · T 1 (lấy mẫu thường)"]
    assert list(fig_en.layout.yaxis.ticktext) == ["1 · greedy", "3 · T 1 (plain sampling)"]
    assert fig_vi.data[0].z == fig_en.data[0].z and fig_vi.data[0].text == fig_en.data[0].text
