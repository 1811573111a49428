"""A token's bytes read as characters, in context (UTF-8 rules): pure text, no tensors, no tokenizer.

Byte-level BPE cuts text into byte pieces, not characters: SmolLM2 writes "ủ" (e1 bb a7) as two
tokens, e1 bb then a7. On its own neither piece is text. Read in its place, each is part of "ủ":
the bytes written before it (still pending: a character left half-written) and the bytes after it
(when they are known) complete the character. UTF-8's rule makes that mechanical: the lead byte
says how long its character is (0xxxxxxx: 1 byte, 110xxxxx: 2, 1110xxxx: 3, 11110xxx: 4), and every
other byte of the character is a continuation byte 10xxxxxx.

`read_piece` is the one reading: every view of a token (chips, bars, heatmaps, tables) goes through
it (via playground/common/text.py), so a piece reads the same everywhere.
"""

from __future__ import annotations

import codecs
import functools
import unicodedata
from dataclasses import dataclass

REPLACEMENT = "\ufffd"  # what a byte that belongs to no character shows as
_FIRST_CODE_POINT = {2: 0x80, 3: 0x800, 4: 0x10000}  # below these, a longer form would be an overlong one
_SEARCH = 0x10000  # code points tried from the start of a range for a printable one (cached per prefix)


@dataclass(frozen=True)
class PieceNote:
    """One character of a piece that is not whole, as data, so that a view can say it in its language.

    kind: "split" (bytes first..last of a character of `length` bytes: `char` when the bytes around
    complete it, else the code points low..high it can still become), "stray" (a byte that continues
    no character) or "invalid" (a byte that is not UTF-8)."""

    kind: str
    first: int = 0
    last: int = 0
    length: int = 0
    char: str = ""
    low: int = 0
    high: int = 0

    def english(self) -> str:
        """The note in English words: "bytes 1–2 of 3 of ủ", "a byte that continues no character"."""
        if self.kind == "stray":
            return "a byte that continues no character"
        if self.kind == "invalid":
            return "a byte that is not UTF-8"
        held = f"byte {self.first}" if self.first == self.last else f"bytes {self.first}–{self.last}"
        known = self.char or f"a character in U+{self.low:04X}–U+{self.high:04X}"
        return f"{held} of {self.length} of {known}"


@dataclass(frozen=True)
class PieceText:
    """How one piece reads. `text` is what every view shows; the rest says which bytes it holds."""

    text: str  # the characters it writes; a split one completed from its context ("ủ"), or what it
    #            may still become ("Ề…") when the rest is not known; "�" for a byte that continues nothing
    mark: str = ""  # which bytes of a split character it holds, short: "1–2/3" ("" for whole characters)
    words: str = ""  # the same in words, with no byte escapes: "bytes 1–2 of 3 of ủ"
    raw: str = ""  # its own bytes, non-ASCII as \xNN ("\xe1\xbb"); set only when it is not whole characters
    notes: tuple[PieceNote, ...] = ()  # what `words` says, as data (one note per character not whole)

    @property
    def partial(self) -> bool:
        return bool(self.words)

    @property
    def detail(self) -> str:
        """The bytes behind the display, for a hover or a title: "bytes 1–2 of 3 of ủ: \\xe1\\xbb"."""
        return f"{self.words}: {self.raw}" if self.words else ""


def char_length(byte: int) -> int:
    """Bytes in the character this byte starts: 1-4; 0 for a continuation byte (10xxxxxx) or a byte
    that starts none in valid UTF-8 (C0, C1: overlong forms; F5-FF: beyond U+10FFFF)."""
    if byte < 0x80:
        return 1
    if 0xC2 <= byte <= 0xDF:
        return 2
    if 0xE0 <= byte <= 0xEF:
        return 3
    if 0xF0 <= byte <= 0xF4:
        return 4
    return 0


def is_continuation(byte: int) -> bool:
    return 0x80 <= byte <= 0xBF


def _valid_prefix(data: bytes) -> bool:
    """The start of some valid character (E0 80, an overlong start, is not; neither is ED A0, a surrogate)."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=False) == ""
    except UnicodeDecodeError:
        return False


def incomplete_tail(data: bytes) -> bytes:
    """The bytes at the end of `data` that start a character not finished yet ("" when it ends whole).

    What a later piece may complete: b"Th\\xe1\\xbb" -> b"\\xe1\\xbb"; b"Th\\xe1\\xbb\\xa7" -> b""."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if is_continuation(byte):
            continue
        n = char_length(byte)
        tail = data[-back:]
        return tail if n > back and _valid_prefix(tail) else b""
    return b""


def piece_bytes(piece: str, bytes_hex: str = "") -> bytes:
    """A record's token as bytes: its hex when it holds part of a character, else its text as UTF-8."""
    return bytes.fromhex(bytes_hex) if bytes_hex else piece.encode("utf-8")


def escaped(data: bytes) -> str:
    """Bytes as the tokenizer's own debug form: whole characters as text, the rest as \\xNN."""
    return data.decode("utf-8", errors="backslashreplace")


def read_piece(data: bytes, before: bytes = b"", after: bytes = b"") -> PieceText:
    """Read one piece's bytes where it stands.

    before: bytes written before it (only an unfinished character at their end matters);
    after: bytes that follow it, b"" when not known (a candidate for the next token, the newest
    token of a stream) or when nothing follows. A character this piece starts but `after` does not
    finish reads as the first character it can still become, then "…" ("Ề…")."""
    parts: list[tuple[str, str, PieceNote | None]] = []  # (text, mark, note) per character this piece touches
    pos = 0
    pending = incomplete_tail(before)
    if pending:
        n = char_length(pending[0])
        take = 0
        while take < min(n - len(pending), len(data)) and is_continuation(data[take]):
            take += 1
        if take:  # it continues the character left unfinished before it
            have = pending + data[:take]
            parts.append(_split(have, n, len(pending) + 1, len(have), after if take == len(data) else b""))
            pos = take
    while pos < len(data):
        n = char_length(data[pos])
        chunk = data[pos : pos + n] if n else b""
        if n and len(chunk) == n and _decodes(chunk):
            parts.append((chunk.decode("utf-8"), "", None))
            pos += n
        elif n and len(chunk) < n and _valid_prefix(chunk):  # it starts a character the next bytes finish
            parts.append(_split(chunk, n, 1, len(chunk), after))
            pos = len(data)
        else:  # a continuation byte with nothing to continue, or not UTF-8 at all
            parts.append((REPLACEMENT, "", PieceNote("stray" if is_continuation(data[pos]) else "invalid")))
            pos += 1
    text = "".join(p[0] for p in parts)
    notes = tuple(p[2] for p in parts if p[2])
    if not notes:
        return PieceText(text)
    words = "; ".join(note.english() for note in notes)
    return PieceText(text, " ".join(p[1] for p in parts if p[1]), words, escaped(data), notes)


def _decodes(chunk: bytes) -> bool:
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _split(have: bytes, n: int, first: int, last: int, after: bytes) -> tuple[str, str, PieceNote]:
    """A character of n bytes of which this piece holds bytes first..last (1-based); `have` is every
    byte of it known up to this piece's last. `after` may finish it."""
    rest = n - len(have)
    follow = after[:rest]
    mark = f"{first}/{n}" if first == last else f"{first}–{last}/{n}"
    if len(follow) == rest and all(is_continuation(b) for b in follow) and _decodes(have + follow):
        char = (have + follow).decode("utf-8")
        return char, mark, PieceNote("split", first, last, n, char=char)
    low, high = code_point_range(have)
    return possible_characters(have), mark, PieceNote("split", first, last, n, low=low, high=high)


def code_point_range(prefix: bytes) -> tuple[int, int]:
    """The code points an unfinished character can still become: b"\\xe1\\xbb" -> (0x1EC0, 0x1EFF)."""
    n = char_length(prefix[0])
    missing = n - len(prefix)
    value = prefix[0] & (0xFF >> (n + 1))
    for byte in prefix[1:]:
        value = value << 6 | (byte & 0x3F)
    low = max(value << 6 * missing, _FIRST_CODE_POINT[n])
    return low, min((value << 6 * missing) | ((1 << 6 * missing) - 1), 0x10FFFF)


@functools.lru_cache(maxsize=4096)
def possible_characters(prefix: bytes) -> str:
    """An unfinished character as a label: the first printable character it can become, then "…"
    (b"\\xe1\\xbb" -> "Ề…": one of U+1EC0-U+1EFF); "�" if none of them is printable. The first of a
    range is a common one (the block's start), so the label stays readable in ordinary fonts."""
    low, high = code_point_range(prefix)
    first = next((c for c in range(low, min(high, low + _SEARCH) + 1) if _printable(c)), None)
    return REPLACEMENT if first is None else f"{chr(first)}…"


def _printable(code: int) -> bool:
    """A letter, digit, punctuation or symbol: something a label can show on its own."""
    return unicodedata.category(chr(code))[0] in "LNPS"


def read_sequence(pieces: list[bytes], before: bytes = b"", after: bytes = b"") -> list[PieceText]:
    """Read pieces that follow one another (a prompt's tokens, a run's generated tokens): each is read
    after the bytes of the ones before it and completed by the ones after it. before: bytes written
    before the first piece; after: bytes known to follow the last (b"" if none are known)."""
    out = []
    pending = incomplete_tail(before)
    for i, data in enumerate(pieces):
        following = b"".join(pieces[i + 1 : i + 4]) + after  # a character has at most 3 more bytes
        out.append(read_piece(data, pending, following[:3]))
        pending = incomplete_tail(pending + data)
    return out


__all__ = [
    "PieceNote", "PieceText", "REPLACEMENT", "char_length", "code_point_range", "escaped", "incomplete_tail", "is_continuation", "piece_bytes",
    "possible_characters", "read_piece", "read_sequence",
]
