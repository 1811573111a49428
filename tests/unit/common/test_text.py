"""The shared words (why a run stopped, in either language) and the one reading of a token for every
view (playground/common/text.py:show_token) and the markup it lands in: Plotly labels, HTML and
Markdown, each escaped, the byte detail only in hovers and titles."""

from __future__ import annotations

from model_service.records.step import Token
from model_service.records.trace import Candidate
from playground.common.text import (
    STOP_REASON_KEYS,
    STOP_REASONS,
    Shown,
    piece_hover,
    piece_html,
    piece_label,
    piece_markdown,
    prob_text,
    show_steps,
    show_token,
    show_tokens,
    stop_reason,
)

E1BB = Token(25275, "\\xe1\\xbb", bytes_hex="e1bb")
A7 = Token(117, "\\xa7", bytes_hex="a7")


def test_stop_reasons_in_english_are_as_every_tab_said_them():
    assert STOP_REASONS == {"eos": "end-of-text token", "max_tokens": "reached max new tokens",
                            "stop_string": "stop string"}
    assert all(stop_reason(code) == STOP_REASONS[code] for code in STOP_REASON_KEYS)


def test_stop_reasons_in_vietnamese_and_an_unknown_code():
    assert stop_reason("eos", "vi") == "token kết thúc văn bản"
    assert stop_reason("max_tokens", "vi") == "đạt số token mới tối đa"
    assert all(stop_reason(code, "vi") != STOP_REASONS[code] for code in STOP_REASON_KEYS)
    assert stop_reason("length", "vi") == "length" and stop_reason(None) == "None"


def test_a_whole_piece_reads_as_before():
    shown = show_token(Token(3575, " Paris"))
    assert shown == Shown("␣Paris", "", "", "' Paris'")


def test_a_special_token_is_never_decoded():
    shown = show_token(Token(2, "<|im_end|>", special=True), before=b"\xe1\xbb")
    assert (shown.text, shown.mark, shown.hover) == ("⟨|im_end|⟩", "", "'<|im_end|>'")


def test_split_pieces_in_sequence_and_as_candidates():
    first, second = show_tokens([E1BB, A7])
    assert (first.text, first.mark, second.text, second.mark) == ("ủ", "1–2/3", "ủ", "3/3")
    assert first.hover == "'ủ' · bytes 1–2 of 3 of ủ: \\xe1\\xbb"
    assert first.words == "bytes 1–2 of 3 of ủ"
    # the same byte as a candidate after the text so far; a Candidate record reads the same way
    assert show_token(Candidate(117, "\\xa7", 0.4, bytes_hex="a7"), before=b"Th\xe1\xbb").text == "ủ"
    assert show_token(A7).text == "�"


def test_show_steps_reads_a_slice_in_place():
    class Step:  # the StepRecord fields the reading uses
        def __init__(self, piece, bytes_hex="", pending_hex=""):
            self.piece, self.bytes_hex, self.pending_hex, self.special = piece, bytes_hex, pending_hex, False

    steps = [Step("Th"), Step("\\xe1\\xbb", "e1bb"), Step("\\xa7", "a7", "e1bb"), Step("!")]
    assert [s.text for s in show_steps(steps)] == ["Th", "ủ", "ủ", "!"]
    assert [s.text for s in show_steps(steps, 2, 3)] == ["ủ"]  # its pending bytes came before the slice
    assert [s.text for s in show_steps(steps, 1, 2)] == ["ủ"]  # completed by the record after the slice


def test_markup_is_escaped_and_the_subscript_is_markup():
    shown = Shown("<b>&", "1/2")
    assert piece_label(shown) == "&lt;b&gt;&amp;<sub>1/2</sub>"
    assert piece_html(shown) == '&lt;b&gt;&amp;<sub class="ntp-part">1/2</sub>'
    assert piece_markdown(Shown("*a*|`b`")) == "\\*a\\*\\|\\`b\\`"
    assert piece_hover(Shown("x", hover="'<br>' · bytes 1 of 2 of é: \\xc3")) == "'&lt;br&gt;' · bytes 1 of 2 of é: \\xc3"
    assert piece_label(Shown("a" * 30), 10) == "a" * 9 + "…"


def test_which_bytes_a_piece_holds_in_vietnamese():
    first, second = show_tokens([E1BB, A7], lang="vi")
    assert (first.text, first.mark) == ("ủ", "1–2/3")  # the character and its subscript need no words
    assert first.words == "byte thứ 1–2 trong 3 byte của ủ" and second.words == "byte thứ 3 trong 3 byte của ủ"
    assert first.hover == "'ủ' · byte thứ 1–2 trong 3 byte của ủ: \\xe1\\xbb"
    assert show_token(A7, lang="vi").words == "một byte không nối tiếp ký tự nào"
    assert show_token(Token(1, "\\xff", bytes_hex="ff"), lang="vi").words == "một byte không hợp lệ trong UTF-8"
    unfinished = show_token(E1BB, lang="vi")  # nothing known after it: the character it may become
    assert unfinished.words == "byte thứ 1–2 trong 3 byte của một ký tự trong khoảng U+1EC0–U+1EFF"
    assert show_token(E1BB).words == "bytes 1–2 of 3 of a character in U+1EC0–U+1EFF"


def test_a_probability_in_a_sentence_is_never_a_false_zero():
    assert [prob_text(p) for p in (0.77, 0.0042, 0.001, 0.00099, 2e-9, 0.0)] == ["0.770", "0.004", "0.001", "<0.001",
                                                                                "<0.001", "0"]
