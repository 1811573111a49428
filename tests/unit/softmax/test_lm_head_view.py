"""The LM head's Markdown and figure from a hand-made record (no model): English by default, Vietnamese
with lang="vi", the same numbers in both; and the panel's redraw of what it showed."""

from __future__ import annotations

import pytest

from playground.softmax.lm_head_panel import lm_head_views
from playground.softmax.lm_head_view import lm_head_figure, lm_head_markdown


def candidate(i: int, **extra) -> dict:
    c = dict(id=i, logit=10.0 - i, norm_h=5.0, norm_w=1.25, cos=0.5 - 0.1 * i, bias=0.0, model_logit=10.0 - i,
             prob=0.5 / (i + 1), rank=i, recomputed=10.0 - i)
    return {**c, **extra}


def view(**extra) -> dict:
    # SmolLM2-135M's head: 49,152 × 576, tied with the embedding
    v = dict(vocab_size=49152, hidden_size=576, head_parameters=49152 * 576, model_parameters=134_515_008,
             bytes_bf16=49152 * 576 * 2, bytes_model_dtype=49152 * 576 * 4, dtype="bfloat16", tied=True,
             softcap=None, has_bias=False, matches_model=True, max_abs_diff=0.0, hidden_norm=12.5,
             candidates=[candidate(0), candidate(1), candidate(2)])
    return {**v, **extra}


PIECES = {0: " Paris", 1: "<b>", 2: " the"}


def test_english_is_the_default():
    md = lm_head_markdown(view(), PIECES)
    assert md.startswith("**LM head**: a 49,152 × 576 matrix — one row per vocabulary token")
    assert "≈ **56.6 MB at bf16**, read at every decode step." in md
    assert "That is 21% of this model's 134.5 M parameters — shared with the input embedding (tied)" in md
    assert "For comparison, Llama-3.1-8B: 128,256 × 4,096 ≈ 525 M weights ≈ 1 GB at bf16 (19× this head)." in md
    assert "| token | ‖w‖ | cos | ‖h‖·‖w‖·cos | model's logit | p |" in md
    fig = lm_head_figure(view(), PIECES)
    assert [a.text for a in fig.layout.annotations] == ["logit = h · w_row", "cos(h, w_row)   (‖h‖ = 12.50 for every token)"]
    assert fig.data[0].hovertext[0] == ("' Paris'<br>logit 10.000 = ‖h‖ 5.00 × ‖w‖ 1.250 × cos 0.5000"
                                        "<br>model's logit 10.000 · p 50.0% · rank 1")


def test_vietnamese_text_with_the_same_numbers():
    md = lm_head_markdown(view(), PIECES, lang="vi")
    assert md.startswith("**LM head**: một ma trận 49,152 × 576 — mỗi token trong vocabulary một hàng")
    assert "không gian 576 chiều" in md and "≈ **56.6 MB ở bf16**, bị đọc lại ở mọi bước decode." in md
    assert "Tức là 21% trong 134.5 M tham số của mô hình này — dùng chung với embedding đầu vào (tied)" in md
    assert "Để so sánh, Llama-3.1-8B: 128,256 × 4,096 ≈ 525 triệu trọng số ≈ 1 GB ở bf16 (gấp 19 lần head này)." in md
    assert "| token | ‖w‖ | cos | ‖h‖·‖w‖·cos | logit của mô hình | p |" in md
    assert "với ‖h‖ = 12.50 cho mọi token:" in md
    assert "| ␣Paris | 1.250 | 0.5000 | 10.000 | 10.000 | 50.0% |" in md  # rows: numbers only, as in English
    for english in ("matrix", "parameters", "For comparison", "model's logit", "read at every"):
        assert english not in md
    fig = lm_head_figure(view(), PIECES, lang="vi")
    assert [a.text for a in fig.layout.annotations] == ["logit = h · w_hàng", "cos(h, w_hàng)   (‖h‖ = 12.50 cho mọi token)"]
    assert fig.data[1].hovertext[2].endswith("<br>logit của mô hình 8.000 · p 16.7% · hạng 3")


def test_vietnamese_for_an_untied_soft_capped_head_with_a_bias():
    v = view(dtype="float32", tied=False, softcap=30.0, has_bias=True, matches_model=False, max_abs_diff=0.0123,
             candidates=[candidate(0, bias=0.25)])
    md = lm_head_markdown(v, PIECES, lang="vi")
    assert "**56.6 MB ở bf16** (113 MB ở float32, kiểu đang tải)" in md
    assert "(một ma trận riêng, không dùng chung với embedding đầu vào)" in md
    assert "đầu ra là 30 · tanh(logit / 30)" in md and "**trước** khi giới hạn" in md
    assert "Head này có bias" in md and "lệch khỏi logits của mô hình tới 0.0123" in md
    assert "+ bias 0.250<br>" in lm_head_figure(v, PIECES, lang="vi").data[0].hovertext[0]
    en = lm_head_markdown(v, PIECES)
    assert "(113 MB at float32, as loaded)" in en and "The logits below are **before** capping." in en


def test_a_visitors_piece_stays_escaped_in_both_languages():
    for lang in ("en", "vi"):
        assert "&lt;b&gt;" in lm_head_markdown(view(), PIECES, lang=lang)
        fig = lm_head_figure(view(), PIECES, lang=lang)
        assert list(fig.data[0].x)[1] == "&lt;b&gt;" and fig.data[0].hovertext[1].startswith("'&lt;b&gt;'<br>")


@pytest.mark.parametrize("lang, empty, where", [
    ("en", "The top tokens' logits as ‖h‖·‖w‖·cos appear here.", "At step 3 of the lab's run:"),
    ("vi", "Logit của các token đứng đầu, tách thành ‖h‖·‖w‖·cos, sẽ hiện ở đây.", "Ở bước 3 trong lần chạy của lab:"),
])
def test_the_panel_redraws_what_it_showed(lang, empty, where):
    summary, fig = lm_head_views(None, lang)
    assert summary == "" and fig.layout.annotations[0].text == empty
    summary, fig = lm_head_views({"view": view(), "pieces": PIECES, "step": 3}, lang)
    assert summary.startswith(where + "\n\n**LM head**") and len(fig.data) == 2
    summary, _ = lm_head_views({"view": view(), "pieces": PIECES, "step": None}, lang)
    assert summary.startswith({"en": "At the end of the lab's prompt:", "vi": "Ở cuối prompt của lab:"}[lang])
