"""Tokens and numbers as a learner reads them, and text made safe for the markup it lands in.

One helper per job: every tab formats a probability, a byte count or a token piece with these.
Escaping uses the library (`html.escape`): Plotly labels are pseudo-HTML, gr.HTML is HTML, and
gr.Markdown / toasts render HTML too, so any visitor's text goes through `escape_html`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from model_service.records.utf8 import PieceNote, PieceText, piece_bytes, read_piece, read_sequence

from .i18n import tr

LABEL_CHARS = 14  # chart labels longer than this are cut with an ellipsis
_CONTROL = {"\n": "↵", "\r": "␍", "\t": "⇥"}
WHITESPACE_MARKS = ("␣", "↵", "⇥")


# ---- escaping -----------------------------------------------------------------------------------------


def escape_html(text) -> str:
    """Any visitor's text for HTML, Markdown or a toast: tags become inert text."""
    return html.escape(str(text), quote=True)


def escape_plotly(text: str) -> str:
    """Plotly reads labels as pseudo-HTML: a piece like '<br>' must not become markup."""
    return html.escape(text, quote=False)


def escape_markdown_cell(text: str) -> str:
    """Text inside a Markdown table cell: pipes, backticks, emphasis and tags stay literal."""
    text = escape_html(text)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("*", "\\*") or " "


# ---- token pieces --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """A token as every view shows it. A piece that holds part of a character shows the character
    ("ủ"), never a byte escape; which bytes it holds is in `mark` (a subscript) and `hover`."""

    text: str  # visible, not escaped: "␣Paris", "ủ", "⟨eos⟩"
    mark: str = ""  # "1–2/3": bytes 1-2 of a 3-byte character ("" for whole characters)
    words: str = ""  # "bytes 1–2 of 3 of ủ" in the view's language: no escapes, fine in visible text
    hover: str = ""  # "'ủ' · bytes 1–2 of 3 of ủ: \\xe1\\xbb": for a title or a hover, not escaped


def token_bytes(token) -> bytes:
    """The bytes of a Token, Candidate or StepRecord (its chosen token)."""
    return piece_bytes(token.piece, getattr(token, "bytes_hex", ""))


def show_token(token, before: bytes = b"", after: bytes = b"", lang="en") -> Shown:
    """The one reading of a token for every view (chips, bars, heatmaps, tables, status lines).

    token: a Token, Candidate or StepRecord; before: the bytes written before it (a candidate for the
    next token is read after the text so far, which may have left a character half-written); after:
    the bytes that follow it, b"" when unknown; lang: the language of its words (which bytes it holds)."""
    return _shown(token, read_piece(token_bytes(token), before, after), lang)


def show_tokens(tokens: Sequence, before: bytes = b"", after: bytes = b"", lang="en") -> list[Shown]:
    """Tokens that follow one another (a prompt, a run): each is completed by its neighbours."""
    readings = read_sequence([token_bytes(t) for t in tokens], before, after)
    return [_shown(t, r, lang) for t, r in zip(tokens, readings)]


def show_steps(records: Sequence, start: int = 0, end: int | None = None, lang="en") -> list[Shown]:
    """A run's StepRecords records[start:end], each read in place: after the bytes still pending
    before the first (its pending_hex), and completed by the tokens after the last."""
    end = len(records) if end is None else end
    before = bytes.fromhex(getattr(records[start], "pending_hex", "")) if start < end else b""
    after = b"".join(token_bytes(r) for r in records[end : end + 3])
    return show_tokens(records[start:end], before, after, lang)


def piece_note(note: PieceNote, lang="en") -> str:
    """Which bytes of a character a piece holds, in `lang`: "bytes 1–2 of 3 of ủ"."""
    if note.kind == "stray":
        return tr(lang, "common.piece.stray")
    if note.kind == "invalid":
        return tr(lang, "common.piece.invalid")
    char = note.char or tr(lang, "common.piece.range", low=f"{note.low:04X}", high=f"{note.high:04X}")
    if note.first == note.last:
        return tr(lang, "common.piece.byte", first=note.first, length=note.length, char=char)
    return tr(lang, "common.piece.bytes", first=note.first, last=note.last, length=note.length, char=char)


def _shown(token, reading: PieceText, lang="en") -> Shown:
    if token.special:
        return Shown(visible_piece(token.piece, True), hover=quoted_piece(token.piece))
    words = "; ".join(piece_note(note, lang) for note in reading.notes)
    hover = quoted_piece(reading.text) + (f" · {words}: {reading.raw}" if words else "")
    return Shown(visible_piece(reading.text), reading.mark, words, hover)


def visible_piece(piece: str, special: bool = False) -> str:
    """A token's text as a label: edge spaces '␣', newline '↵', tab '⇥', empty '∅', specials '⟨…⟩'."""
    if special:
        inner = piece[1:-1] if len(piece) > 2 and piece.startswith("<") and piece.endswith(">") else piece
        return f"⟨{_visible(inner)}⟩"
    return _visible(piece)


def _visible(piece: str) -> str:
    if not piece:
        return "∅"
    core = piece.strip(" ")
    if not core:
        return "␣" * len(piece)
    lead = len(piece) - len(piece.lstrip(" "))
    trail = len(piece) - len(piece.rstrip(" "))
    return "␣" * lead + "".join(_control(c) for c in core) + "␣" * trail


def _control(c: str) -> str:
    """Newline and tab as arrows; other control characters as their Unicode pictures (U+2400 block)."""
    if c in _CONTROL:
        return _CONTROL[c]
    return chr(0x2400 + ord(c)) if ord(c) < 32 else "␡" if ord(c) == 127 else c


def quoted_piece(piece: str) -> str:
    """The piece in quotes for hover text: "' Paris'", newlines as \\n."""
    return "'" + piece.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "'"


def piece_label(shown: Shown, limit: int = LABEL_CHARS) -> str:
    """A token on a Plotly axis, bar or cell: visible, shortened, escaped; which bytes of a split
    character it holds as a subscript."""
    text = escape_plotly(shorten(shown.text, limit))
    return f"{text}<sub>{shown.mark}</sub>" if shown.mark else text


def piece_hover(shown: Shown) -> str:
    """A token in a Plotly hover: quoted, with the bytes of a split character."""
    return escape_plotly(shown.hover)


def piece_html(shown: Shown, limit: int | None = None) -> str:
    """A token in HTML: visible, escaped, the split-character subscript in <sub>."""
    text = escape_html(shorten(shown.text, limit) if limit else shown.text)
    return f'{text}<sub class="ntp-part">{escape_html(shown.mark)}</sub>' if shown.mark else text


def piece_markdown(shown: Shown) -> str:
    """A token in Markdown (a table cell, a sentence): HTML and Markdown escaped, the subscript in <sub>."""
    text = escape_markdown_cell(shown.text)
    return f"{text}<sub>{escape_html(shown.mark)}</sub>" if shown.mark else text


def shorten(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unique_labels(labels: list[str]) -> list[str]:
    """Bars are placed by label: two equal labels would share one bar, so number the repeats."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


# ---- numbers ---------------------------------------------------------------------------------------------


def pct(p: float) -> str:
    """A probability on a chart: 77.0%, 100%, 0.05%, 2.1e-05."""
    if p >= 0.995 or p == 0:
        return f"{p:.0%}"
    return f"{p:.1%}" if p >= 0.001 else f"{p:.2g}"


def prob_text(p: float) -> str:
    """A probability in a sentence (a status line, a hover): 0.770, 0.004, <0.001 (never a drawn token at
    "0.000"), 0 for a token a filter removed."""
    if p <= 0:
        return "0"
    return f"{p:.3f}" if p >= 0.001 else "<0.001"


def prob(p: float) -> str:
    """A probability as a decimal, for hover lines: 0.77, 0.0031."""
    return f"{p:.2f}" if p >= 0.01 else f"{p:.2g}"


def tick_count(n: int) -> str:
    """A count on a log axis: 1, 10, 100, 1k, 10k."""
    return f"{n // 1000}k" if n >= 1000 else str(n)


def big_count(n: int) -> str:
    """Parameters and vocabulary sizes: 49,152, 28.3 M, 1.05 B."""
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def nbytes(n: float) -> str:
    """A memory size: 113 MB, 1.05 GB, 512 B."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


# ---- words ------------------------------------------------------------------------------------------------

STOP_REASON_KEYS = {  # why a run ended (a record's stop_reason) -> its words in the catalogues
    "eos": "common.stop.eos",
    "max_tokens": "common.stop.max_tokens",
    "stop_string": "common.stop.stop_string",
}


def stop_reason(code, lang="en") -> str:
    """Why a run ended, as every tab says it, in `lang`; a code we have no words for is shown as it is."""
    key = STOP_REASON_KEYS.get(code)
    return tr(lang, key) if key else str(code)


STOP_REASONS = {code: stop_reason(code) for code in STOP_REASON_KEYS}  # English, for callers without a language
