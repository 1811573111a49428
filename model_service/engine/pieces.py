"""How a single token reads on its own: its text piece, or its raw bytes when it holds part of a
character (a byte-level BPE token cut mid-UTF-8, or a SentencePiece <0xNN> byte token).

Such a token keeps its bytes (Token.bytes_hex) so that a view can read it in context, as the
character it helps write (model_service/records/utf8.py)."""

from __future__ import annotations

import functools

from ..records.step import Token
from ..records.utf8 import escaped
from .text_stream import REPLACEMENT


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: printable stand-in character -> byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class PieceTable:
    """Token id -> Token(id, piece, special), computed once per id (cheap on the per-step path)."""

    def __init__(self, tokenizer):
        self._tok = tokenizer
        self._special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self._cache: dict[int, Token] = {}

    def __call__(self, token_id: int) -> Token:
        token = self._cache.get(token_id)
        if token is None:
            piece, data = self._piece(token_id)
            token = self._cache[token_id] = Token(token_id, piece, token_id in self._special, data.hex())
        return token

    def _piece(self, token_id: int) -> tuple[str, bytes]:
        """(piece, its bytes if it is not whole characters, else b"")."""
        text = self._tok.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if REPLACEMENT not in text:
            return text, b""
        raw = self._tok.convert_ids_to_tokens(token_id)
        if raw.startswith("<0x") and raw.endswith(">"):  # SentencePiece byte fallback
            data = bytes.fromhex(raw[3:-1])
        else:
            table = _byte_decoder()
            if not all(c in table for c in raw):
                return raw, b""
            data = bytes(table[c] for c in raw)
        return escaped(data), data
