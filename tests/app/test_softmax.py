"""The Softmax & LM head tab through its API: its two endpoints take the page's language as their last
input (English when a script leaves it out) and answer in it, with the same numbers."""

from __future__ import annotations

LESSON = "The capital of France is"
ROWS = {"headers": ["token", "logit"], "data": [["␣Paris", 5.0], ["␣the", 3.2], ["␣a", 2.7]]}


def test_toy_softmax_answers_in_the_language_asked(client):
    md_en, _, table_en = client.predict(ROWS, 0, 0.5, api_name="/toy_softmax")
    md_vi, _, table_vi = client.predict(ROWS, 0, 0.5, "vi", api_name="/toy_softmax")
    assert "| probability |" in md_en and "| xác suất |" in md_vi
    assert table_en["note"].startswith("T = 0.5 < 1 stretches") and table_vi["note"].startswith("T = 0.5 < 1 kéo giãn")
    assert [r["prob"] for r in table_en["rows"]] == [r["prob"] for r in table_vi["rows"]]


def test_lm_head_answers_in_the_language_asked(client):
    summary_en, _ = client.predict(LESSON, False, 0, api_name="/lm_head")
    summary_vi, plot_vi = client.predict(LESSON, False, 0, "vi", api_name="/lm_head")
    assert "a 49,152 × 576 matrix" in summary_en
    assert summary_vi.startswith("Ở cuối prompt của lab:") and "một ma trận 49,152 × 576" in summary_vi
    assert "| ␣Paris |" in summary_vi and plot_vi["type"] == "plotly"
