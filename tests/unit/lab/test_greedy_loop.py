"""Greedy's repetition loop: the panels' words in both languages, the visitor's text escaped."""

from __future__ import annotations

from playground.common.i18n import swapped_default
from playground.lab.greedy_loop import LOOP_PROMPTS, RUNS, panel_html, repeated_fraction


def test_repeated_fraction_counts_repeated_four_word_sequences():
    assert repeated_fraction("a b c d a b c d") == 1 / 5  # abcd, bcda, cdab, dabc, abcd again
    assert repeated_fraction("one two three") == 0.0


def test_a_panel_in_english_reads_as_before():
    html = panel_html(RUNS[0][0], "a b c d a b c d", True)
    assert "<b>Greedy (temperature 0)</b> · 20% of its 4-word sequences repeat earlier ones" in html
    assert "generating…" in panel_html(RUNS[1][0], "", False)
    assert "Sampled (T 0.8, top-p 0.95, seed 0)" in panel_html(RUNS[1][0], "", False)


def test_a_panel_in_vietnamese_and_the_text_escaped():
    html = panel_html(RUNS[0][0], "<script>x</script> a b c d a b c d", True, "vi")
    assert "<b>Greedy (temperature bằng 0)</b> · 17% cụm 4 từ của nó lặp lại cụm đã xuất hiện trước đó" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "Lấy mẫu (T 0.8, top-p 0.95, seed 0)" in panel_html(RUNS[1][0], "", False, "vi")
    assert "đang sinh…" in panel_html(RUNS[1][0], "", False, "vi")


def test_the_default_free_writing_prompt_follows_the_language_but_typed_text_stays():
    assert swapped_default(LOOP_PROMPTS["en"], "vi", LOOP_PROMPTS) == LOOP_PROMPTS["vi"]
    assert swapped_default("my own words", "vi", LOOP_PROMPTS) is None
