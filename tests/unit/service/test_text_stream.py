"""Streaming text: never half a character, never the start of a stop string that may still complete."""

from __future__ import annotations

import pytest

from model_service.engine.text_stream import TextStream


def byte_decode(ids):
    return bytes(ids).decode("utf-8", errors="replace")


def feed(stream, text):
    shown = []
    for b in text.encode("utf-8"):
        stream.push(b)
        shown.append(stream.visible)
        if stream.stopped:
            break
    return shown


def test_plain_ascii_streams_token_by_token():
    s = TextStream(byte_decode)
    assert feed(s, "abc") == ["a", "ab", "abc"]


def test_a_split_utf8_character_is_held_back_until_complete():
    s = TextStream(byte_decode)
    shown = feed(s, "a€b")  # € is 3 bytes
    assert shown == ["a", "a", "a", "a€", "a€b"]
    assert all("\ufffd" not in v for v in shown)


def test_flush_releases_an_unfinished_character_as_replacement():
    s = TextStream(byte_decode)
    s.push(ord("x"))
    s.push(0xE2)
    assert s.visible == "x"
    s.flush()
    assert s.visible == "x\ufffd"


def test_stop_string_split_across_tokens_is_caught_and_never_shown():
    s = TextStream(byte_decode, stop=["END"])
    shown = feed(s, "ok EN")
    assert shown[-2:] == ["ok ", "ok "]  # "E", "EN" could still become "END": held back
    s.push(ord("D"))
    assert s.stopped and s.visible == "ok "


def test_a_false_start_of_a_stop_string_is_released():
    s = TextStream(byte_decode, stop=["END"])
    assert feed(s, "ENx") == ["", "", "ENx"]
    assert not s.stopped


def test_earliest_of_several_stop_strings_wins():
    s = TextStream(byte_decode, stop=["world", "lo w"])
    feed(s, "hello world")
    assert s.stopped and s.text == "hel"


def test_stop_string_inside_one_token_cuts_the_text_before_it():
    pieces = {1: "abc", 2: "d\nxyz"}
    s = TextStream(lambda ids: "".join(pieces[i] for i in ids), stop=["\n"])
    s.push(1)
    s.push(2)
    assert s.stopped and s.visible == "abcd"


def test_flush_releases_a_held_back_stop_prefix_at_the_end():
    s = TextStream(byte_decode, stop=["END"])
    feed(s, "fin E")
    assert s.visible == "fin "
    s.flush()
    assert s.visible == "fin E"


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_stop_strings_are_rejected(bad):
    with pytest.raises(ValueError, match="stop"):
        TextStream(byte_decode, stop=[bad])


def test_a_token_pushed_unsearched_does_not_stop_but_a_stop_ending_later_does():
    # vLLM before min_tokens: "\n" inside token 1 is not searched; a later stop string ending in new text is found
    pieces = {1: "a\nb", 2: "c", 3: "\nd"}
    s = TextStream(lambda ids: "".join(pieces[i] for i in ids), stop=["\n"])
    s.push(1, search=False)
    s.push(2)
    assert not s.stopped and s.visible == "a\nbc"
    s.push(3)
    assert s.stopped and s.visible == "a\nbc"
