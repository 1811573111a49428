"""Token ids in, safe-to-show text out: incremental detokenisation, UTF-8 hold-back and stop strings.

Two things must never reach a viewer: half a UTF-8 character (a token can end mid-character; the
tokenizer then decodes it as U+FFFD) and the beginning of a stop string that may still complete on
the next token. Both are held back until they resolve. A stop string is searched in the whole
decoded text, so one split across several tokens is caught.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..records.validation import stop_strings

REPLACEMENT = "\ufffd"


class TextStream:
    """Feed generated token ids one at a time; read `.visible` (safe to show) and `.stopped`.

    decode: ids -> text. Uses the prefix/read offsets of vLLM's detokenizer: decoding a short window
    of recent ids keeps each step O(1) and lets tokenizers that strip or merge spaces at the start of
    a sequence (SentencePiece) produce the right delta.
    """

    def __init__(self, decode: Callable[[Sequence[int]], str], stop: Sequence[str] = ()):
        self._decode = decode
        self.stop = stop_strings("stop", stop)
        self._ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0
        self.text = ""  # everything decoded so far (cut at a stop string once found)
        self.stopped = False
        self._flushed = False

    def push(self, token_id: int, search: bool = True) -> str:
        """Add one token; return the text it completed (may be "" while a character is incomplete). search: look
        for the stop strings in what it added (vLLM does not before min_tokens; a later search still finds one
        that ends in its text)."""
        if self.stopped:
            raise RuntimeError("stream already hit a stop string")
        self._ids.append(token_id)
        prefix = self._decode(self._ids[self._prefix_offset : self._read_offset])
        full = self._decode(self._ids[self._prefix_offset :])
        if len(full) <= len(prefix) or full.endswith(REPLACEMENT):
            return ""  # incomplete UTF-8 sequence: wait for the next token
        delta = full[len(prefix) :]
        self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
        self._append(delta, search)
        return delta

    def _append(self, delta: str, search: bool = True) -> None:
        start = max(0, len(self.text) - max((len(s) for s in self.stop), default=0) + 1)
        self.text += delta
        if not search:
            return
        hits = [i for i in (self.text.find(s, start) for s in self.stop) if i >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            self.stopped = True

    def flush(self) -> None:
        """Generation ended: release whatever was held back (an unfinished character decodes as U+FFFD)."""
        if not self.stopped and self._read_offset < len(self._ids):
            prefix = self._decode(self._ids[self._prefix_offset : self._read_offset])
            full = self._decode(self._ids[self._prefix_offset :])
            self._read_offset = len(self._ids)
            self._append(full[len(prefix) :])
        self._flushed = True

    @property
    def visible(self) -> str:
        """The text that can be shown now: minus any tail that could still grow into a stop string."""
        if self.stopped or self._flushed:
            return self.text
        return self.text[: len(self.text) - self._held_back()]

    def _held_back(self) -> int:
        longest = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(self.text)), longest, -1):
                if self.text.endswith(s[:n]):
                    longest = n
                    break
        return longest
