"""Byte pieces read as characters (model_service/records/utf8.py): hand-made pieces with known bytes, and an
oracle from Python's own UTF-8 codec for every way of cutting a mixed text into pieces."""

from __future__ import annotations

import random

import pytest

from model_service.records.utf8 import (
    REPLACEMENT,
    char_length,
    code_point_range,
    incomplete_tail,
    possible_characters,
    read_piece,
    read_sequence,
)

# How SmolLM2's byte-level BPE cuts "Thủ đô" (ủ = e1 bb a7, đ = c4 91), 北京 and 🤗 (f0 9f a4 97).
VIETNAMESE = [b"Th", b"\xe1\xbb", b"\xa7", b" \xc4", b"\x91", "ô".encode()]
CHINESE = [b"\xe5\x8c", b"\x97", b"\xe4\xba", b"\xac", "是".encode()]
EMOJI = [b"I", b" love", b" \xf0\x9f", b"\xa4", b"\x97"]


def texts(pieces, **kw):
    return [r.text for r in read_sequence(pieces, **kw)]


def test_vietnamese_in_sequence_reads_as_its_characters():
    readings = read_sequence(VIETNAMESE)
    assert [r.text for r in readings] == ["Th", "ủ", "ủ", " đ", "đ", "ô"]
    assert [r.mark for r in readings] == ["", "1–2/3", "3/3", "1/2", "2/2", ""]
    assert readings[1].words == "bytes 1–2 of 3 of ủ"
    assert readings[1].detail == "bytes 1–2 of 3 of ủ: \\xe1\\xbb"  # the "ủ (1/2: \xe1\xbb)", counted in bytes
    assert readings[2].detail == "byte 3 of 3 of ủ: \\xa7"
    assert not readings[0].partial and readings[0].detail == "" and readings[5].detail == ""


def test_chinese_and_emoji():
    assert texts(CHINESE) == ["北", "北", "京", "京", "是"]
    readings = read_sequence(EMOJI)
    assert [r.text for r in readings] == ["I", " love", " 🤗", "🤗", "🤗"]
    assert [r.mark for r in readings[2:]] == ["1–2/4", "3/4", "4/4"]
    # a skin-tone modifier is a character of its own: 👍 then 🏽
    assert texts([b"\xf0\x9f\x91", b"\x8d\xf0\x9f", b"\x8f\xbd"]) == ["👍", "👍🏽", "🏽"]


def test_a_lone_continuation_byte_says_it_continues_nothing():
    reading = read_piece(b"\x83")
    assert reading.text == REPLACEMENT
    assert reading.words == "a byte that continues no character" and reading.raw == "\\x83"
    assert read_piece(b"\xff").words == "a byte that is not UTF-8"


def test_a_piece_that_ends_one_character_and_goes_on():
    reading = read_piece(b"\xa7 th", before=b"Th\xe1\xbb")
    assert (reading.text, reading.mark, reading.detail) == ("ủ th", "3/3", "byte 3 of 3 of ủ: \\xa7 th")
    # ... and one that also starts the next character: "ủ" ends, "đ" starts
    reading = read_piece(b"\xa7 \xc4", before=b"\xe1\xbb", after=b"\x91")
    assert (reading.text, reading.mark) == ("ủ đ", "3/3 1/2")
    assert reading.words == "byte 3 of 3 of ủ; byte 1 of 2 of đ"


def test_a_candidate_completes_the_character_the_text_so_far_left_half_written():
    # after "th" + e1 bb, the candidates 83 / 89 / a9 finish three different letters
    assert [read_piece(bytes([b]), before=b" th\xe1\xbb").text for b in (0x83, 0x89, 0xA9)] == ["ể", "ỉ", "ứ"]
    assert read_piece(b"\x83", before=b" th\xe1\xbb").words == "byte 3 of 3 of ể"
    # a whole character after a half-written one: the half is abandoned, the candidate reads alone
    assert read_piece("ô".encode(), before=b"\xe1\xbb").text == "ô"


def test_a_start_whose_end_is_not_known_reads_as_the_first_character_it_can_become():
    reading = read_piece(b"\xe1\xbb")  # a candidate: nothing after it yet
    assert reading.text == "Ề…"  # U+1EC0 … U+1EFF
    assert reading.words == "bytes 1–2 of 3 of a character in U+1EC0–U+1EFF"
    assert code_point_range(b"\xe1\xbb") == (0x1EC0, 0x1EFF) and code_point_range(b"\xf0\x9f\x98") == (0x1F600, 0x1F63F)
    assert read_piece(b" \xc4").text == " Ā…"  # U+0100 … U+013F
    assert read_piece(b"\xf0\x9f").text.startswith("🀀…")
    # the end of the sequence so far is not an end of the text: the newest token stays open
    assert texts(VIETNAMESE[:2]) == ["Th", "Ề…"]
    assert texts(VIETNAMESE[:2], after=b"\xa7") == ["Th", "ủ"]


def test_a_middle_byte_is_read_from_both_sides():
    pieces = [b"\xe1", b"\xbb", b"\xa7"]  # one byte per token, as a byte tokenizer gives
    readings = read_sequence(pieces)
    assert [r.text for r in readings] == ["ủ"] * 3
    assert [r.mark for r in readings] == ["1/3", "2/3", "3/3"]


def test_incomplete_tail():
    assert incomplete_tail(b"Th\xe1\xbb") == b"\xe1\xbb"
    assert incomplete_tail(b"Th\xe1\xbb\xa7") == b""
    assert incomplete_tail(b"\xf0\x9f\xa4") == b"\xf0\x9f\xa4"
    assert incomplete_tail(b"abc") == incomplete_tail(b"") == b""
    assert incomplete_tail(b"\x83\x83") == b""  # continuation bytes with no lead: nothing to complete
    assert incomplete_tail(b"\xe0\x80") == b""  # an overlong start can never become a character


@pytest.mark.parametrize("byte, n", [(0x41, 1), (0xC4, 2), (0xE1, 3), (0xF0, 4), (0x83, 0), (0xC0, 0), (0xF5, 0)])
def test_char_length(byte, n):
    assert char_length(byte) == n


def test_possible_characters_has_a_fallback_for_unassigned_ranges():
    assert possible_characters(b"\xf1") == REPLACEMENT  # plane 4-7: nothing assigned


TEXT = "Thủ đô của Pháp là Paris. 北京是首都 🤗👍🏽 ok"


def _oracle(text: str, start: int, end: int) -> str:
    """The characters of `text` whose bytes overlap bytes [start, end) of its UTF-8 encoding."""
    out, pos = [], 0
    for ch in text:
        size = len(ch.encode())
        if pos < end and pos + size > start:
            out.append(ch)
        pos += size
    return "".join(out)


def test_every_cut_of_a_mixed_text_reads_as_the_characters_each_piece_touches():
    data = TEXT.encode()
    rng = random.Random(0)
    cuts_tried = 0
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(data)), rng.randint(1, 30)))
        bounds = list(zip([0, *cuts], [*cuts, len(data)]))
        pieces = [data[a:b] for a, b in bounds]
        for (a, b), reading in zip(bounds, read_sequence(pieces)):
            assert reading.text == _oracle(TEXT, a, b)
            assert "\\x" not in reading.text + reading.mark + reading.words
            cuts_tried += 1
    assert cuts_tried > 1000


def test_every_two_way_cut_of_each_character():
    for ch in "ủđ北🤗":
        data = ch.encode()
        for cut in range(1, len(data)):
            first, second = read_sequence([data[:cut], data[cut:]])
            assert first.text == second.text == ch
            assert first.mark.endswith(f"/{len(data)}") and second.mark.endswith(f"/{len(data)}")
