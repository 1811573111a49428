"""Tokens and numbers as a learner reads them, and text made safe for the markup it lands in.

One helper per job: every tab formats a probability, a byte count or a token piece with these.
Escaping uses the library (`html.escape`): Plotly labels are pseudo-HTML, gr.HTML is HTML, and
gr.Markdown / toasts render HTML too, so any visitor's text goes through `escape_html`.
"""

from __future__ import annotations

import html

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


def visible_piece(piece: str, special: bool = False) -> str:
    """A token as a label: edge spaces '␣', newline '↵', tab '⇥', empty '∅', specials '⟨…⟩'.

    Byte escapes such as '\\xe2' (a split UTF-8 character) are kept as they are.
    """
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
    if c in _CONTROL:
        return _CONTROL[c]
    return f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c


def quoted_piece(piece: str) -> str:
    """The piece in quotes for hover text: "' Paris'", newlines as \\n."""
    return "'" + piece.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "'"


def piece_label(piece: str, special: bool = False, limit: int = LABEL_CHARS) -> str:
    """A token on a Plotly axis or cell: visible, shortened, escaped."""
    return escape_plotly(shorten(visible_piece(piece, special), limit))


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
