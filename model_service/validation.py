"""One validator per kind of input, shared by the service, the UI, the links, the API and the CLI.

Every error is a ValueError whose message names the field, repeats the value and says what is
allowed ("temperature must be a number between 0 and 100, got 'abc'"), so a learner knows what to
fix and a script's author sees it in `AppError`. Values arrive as Python numbers (the API, the
service), as text (the seed box, deep links, table cells) or as whatever a fuzzer sends.
"""

from __future__ import annotations

import math
import numbers

from . import limits

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def is_blank(value) -> bool:
    """Nothing typed: None, an empty or all-space string, or a table's NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and not value.strip()
    )


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" between {low:,} and {high:,}" if isinstance(low, int) and isinstance(high, int) else f" between {low:g} and {high:g}"
    if low is not None:
        return f" of at least {low:g}"
    if high is not None:
        return f" of at most {high:g}"
    return ""


def number(field: str, value, *, integer: bool = False, low=None, high=None, low_open: bool = False,
           blank=...):
    """A finite real number (or whole number) in [low, high] ((low, high] with low_open).

    Text is parsed ("0.8", " 3 "); whole numbers are parsed from text with int(), so a 17-digit seed
    keeps every digit. bools, NaN, inf, lists, None are refused, unless `blank` is given: then None,
    NaN and empty text return it."""
    kind = "a whole number" if integer else "a number"
    allowed = f"{kind}{_range(low, high)}" + (f" ({low:g} excluded)" if low_open else "")
    if blank is not ... and is_blank(value):
        return blank
    parsed = value
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = int(text) if integer and text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise ValueError(f"{field} must be {allowed}, got {_show(value)}") from None
    if isinstance(parsed, bool) or not isinstance(parsed, numbers.Real):
        raise ValueError(f"{field} must be {allowed}, got {_show(value)}")
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise ValueError(f"{field} must be {allowed}, got {_show(value)}")
    if integer:
        if parsed != int(parsed):
            raise ValueError(f"{field} must be {allowed}, got {_show(value)}")
        parsed = int(parsed)
    else:
        parsed = float(parsed)
    too_low = low is not None and (parsed <= low if low_open else parsed < low)
    if too_low or (high is not None and parsed > high):
        raise ValueError(f"{field} must be {allowed}, got {_show(value)}")
    return parsed


def boolean(field: str, value) -> bool:
    """True/False, or text: true/1/yes/on, false/0/no/off (any case). Anything else is an error."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{field} must be true or false (also 1/0, yes/no, on/off), got {_show(value)}")


def text(field: str, value, *, required: bool = True) -> str:
    """A string that encodes to UTF-8 (a lone surrogate from a JSON caller does not)."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be text, got {_show(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field} contains characters that are not valid Unicode (a lone surrogate)") from None
    if required and not value.strip():
        raise ValueError(f"{field} is empty: type some text for the model to continue")
    return value


def choice(field: str, value, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{field} must be one of {', '.join(choices)}, got {_show(value)}")
    return value


def seed(field: str, value) -> int | None:
    """Blank = fresh randomness; else a whole number in [0, MAX_SEED] (exact in a JavaScript number)."""
    return number(field, value, integer=True, low=0, high=limits.MAX_SEED, blank=None)


def stop_strings(field: str, value) -> tuple[str, ...]:
    """A list of stop strings, each kept exactly as given (newlines included). A single string is
    one stop string, never split into characters."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{field} must be a list of strings, got {_show(value)}")
    if len(value) > limits.MAX_STOP_STRINGS:
        raise ValueError(f"{field}: at most {limits.MAX_STOP_STRINGS} stop strings, got {len(value)}")
    out = []
    for s in value:
        if not isinstance(s, str) or s == "":
            raise ValueError(f"{field}: each stop string must be non-empty text, got {_show(s)}")
        text(field, s, required=False)
        if len(s) > limits.MAX_STOP_CHARS:
            raise ValueError(f"{field}: a stop string may have at most {limits.MAX_STOP_CHARS} characters, got {len(s)}")
        out.append(s)
    return tuple(out)


def parse_stop_text(field: str, value) -> tuple[str, ...]:
    """Stop strings typed in one line (the lab's box, an engine cell, a link): separated by "|";
    "\\|" is a bar, "\\n" a newline, "\\t" a tab, "\\\\" a backslash; spaces count. Blank = none."""
    if is_blank(value):
        return ()
    if not isinstance(value, str):
        raise ValueError(f"{field} must be text (stop strings separated by |), got {_show(value)}")
    parts, current, i = [], [], 0
    escapes = {"|": "|", "n": "\n", "t": "\t", "\\": "\\"}
    while i < len(value):
        c = value[i]
        if c == "\\" and i + 1 < len(value) and value[i + 1] in escapes:
            current.append(escapes[value[i + 1]])
            i += 2
            continue
        if c == "|":
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    parts.append("".join(current))
    return stop_strings(field, [p for p in parts if p])


def format_stop_text(stops) -> str:
    """The inverse of parse_stop_text: what the box shows for these stop strings."""
    def one(s: str) -> str:
        return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n").replace("\t", "\\t")

    return "|".join(one(s) for s in stops)
