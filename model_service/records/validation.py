"""One validator per kind of input, shared by the service, the UI, the links, the API and the CLI.

Every error is an InputError (a ValueError) whose message names the field, repeats the value and says
what is allowed ("temperature must be a number between 0 and 100, got 'abc'"), so a learner knows what
to fix and a script's author sees it in `AppError`. It also carries a key and its values, so the page
can say the same in the learner's language (playground/common/errors.py). Values arrive as Python
numbers (the API, the service), as text (the seed box, deep links, table cells) or as whatever a
fuzzer sends.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping

from .. import limits

# key -> the English message; the page's catalogues have "error.<key>" with the same {placeholders}
MESSAGES = {
    "number": "{field} must be a number, got {got}",
    "number_between": "{field} must be a number between {low} and {high}, got {got}",
    "number_between_open": "{field} must be a number between {low} and {high} ({low} excluded), got {got}",
    "number_min": "{field} must be a number of at least {low}, got {got}",
    "number_max": "{field} must be a number of at most {high}, got {got}",
    "whole": "{field} must be a whole number, got {got}",
    "whole_between": "{field} must be a whole number between {low} and {high}, got {got}",
    "whole_min": "{field} must be a whole number of at least {low}, got {got}",
    "whole_max": "{field} must be a whole number of at most {high}, got {got}",
    "boolean": "{field} must be true or false (also 1/0, yes/no, on/off), got {got}",
    "text": "{field} must be text, got {got}",
    "surrogate": "{field} contains characters that are not valid Unicode (a lone surrogate)",
    "empty": "{field} is empty: type some text for the model to continue",
    "prompt_empty": "the prompt is empty: type some text for the model to continue",
    "prompt_ids": "{field} must be text, or a non-empty list of token ids (whole numbers from 0), got {got}",
    "choice": "{field} must be one of {choices}, got {got}",
    "stop_list": "{field} must be a list of strings, got {got}",
    "stop_count": "{field}: at most {limit} stop strings, got {count}",
    "stop_item": "{field}: each stop string must be non-empty text, got {got}",
    "stop_length": "{field}: a stop string may have at most {limit} characters, got {count}",
    "stop_text": "{field} must be text (stop strings separated by |), got {got}",
    "prompt_too_long": "prompt is {count} tokens; the limit here is {limit}",
    "no_chat_template": "{model} has no chat template; turn the chat toggle off",
    "messages": "{field} must be a non-empty list of messages, each with a role and a content, got {got}",
    "message": "{field} must be a message: an object with a role and a content, got {got}",
    "message_field": "{field} is not supported here: a message has a role and a content only",
    "message_tool": "{field}: tool messages are not supported here (the playground gives its models no tools)",
    "message_part": "{field}: only text parts are supported here, got {got}",
    "messages_last": "{field} must end with a user message, which the model answers; the last one here is {role}",
    "chat_refused": "{field}: the chat template of {model} refused this conversation: {error}",
    "room_full": "the room is full: {waiting} requests are waiting for the model (the limit here is {limit}); try again in a minute",
    "loading": "The model is still loading ({percent}: {message}). Try again in a moment.",
    "load_failed": "The model failed to load: {error}",
    "service_away": "the model service at {url} is not answering; try again in a moment",
    "service_lost": "the model service stopped during this run (a replica restarted); run it again",
    "switching": "The host is switching the model ({percent}: {message}). Try again in a moment.",
    "switched": "The host switched the model to {model}; press the button again in a moment.",
    "switch_busy": "a model is loading already; wait until it is ready",
    "bias_map": "{field} must map token ids to biases (an object, or text like 1234:-100, 42:5), got {got}",
    "bias_id": "{field}: a token id must be a whole number between 0 and {high}, got {got}",
    "bias_value": "{field}: the bias of token {token} must be a number between -{limit} and {limit}, got {got}",
    "bias_count": "{field}: at most {limit} tokens may be biased, got {count}",
    "bias_twice": "{field}: token {token} is given twice",
    "not_in_order": "{field} is not part of the {order} order ({why}); set it to {off} or choose another order",
    "mirostat_replaces": "{field} is not applied with mirostat on: mirostat replaces llama.cpp's chain (logit bias, temperature, mirostat); set it to {off} or set mirostat to 0",
    "strings_list": "{field} must be a list of strings (or text, separated by |), got {got}",
    "strings_count": "{field}: at most {limit} strings, got {count}",
    "strings_item": "{field}: each string must be non-empty text, got {got}",
    "strings_length": "{field}: a string may have at most {limit} characters, got {count}",
    "more_cell": "{field}: {got} is not a knob=value pair it takes; the knobs are {knobs}",
    "chain_empty": "{field}: a custom chain needs at least one stage ({choices})",
    "chain_stage": "{field}: {got} is not a stage a chain can order; the stages are {choices}",
    "chain_twice": "{field}: {got} appears twice",
    "chain_missing": "{field} is {value} but the chain has no {stage} stage: add {stage} to the chain or set {field} to {off}",
    "chain_without_custom": "{field} orders the stages of a custom order only: choose the custom order, or leave {field} empty",
    "keep_key": "{field} must be up to {limit} letters, digits and - _ . : (a page's name for its run), got {got}",
    "model_choice": "{field} must be one of the host's models ({choices}), got {got}",
    "precision_too_large": "the precision check keeps a float32 copy of the model beside it; this model has {parameters} parameters, above the {limit} such a copy is kept for",
    "precision_no_source": "the precision check loads a copy of the model, and this model was not loaded from a name or a directory",
}


class _Keyed:
    """A learner-facing error: `key` names the message, `values` fill it (already formatted as text). The page
    keys its own messages (follow rooms, the host key, run files) in subclasses with a larger MESSAGES
    (playground/common/page_errors.py)."""

    MESSAGES = MESSAGES

    def __init__(self, key: str, **values):
        self.key, self.values = key, {name: str(value) for name, value in values.items()}
        super().__init__(self.MESSAGES[key].format(**self.values))


def again(error: Exception) -> Exception:
    """A fresh copy of an error to raise once more (the same instance raised in many threads would share
    one traceback)."""
    if isinstance(error, _Keyed):
        return type(error)(error.key, **error.values)
    return type(error)(*error.args)


class InputError(_Keyed, ValueError):
    """Bad input: the message names the field and the value."""


class Unavailable(_Keyed, RuntimeError):
    """Good input the service cannot take now (the room is full, the model is loading)."""


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


def number(field: str, value, *, integer: bool = False, low=None, high=None, low_open: bool = False,
           blank=...):
    """A finite real number (or whole number) in [low, high] ((low, high] with low_open).

    Text is parsed ("0.8", " 3 "); whole numbers are parsed from text with int(), so a 17-digit seed
    keeps every digit. bools, NaN, inf, lists, None are refused, unless `blank` is given: then None,
    NaN and empty text return it."""
    if blank is not ... and is_blank(value):
        return blank
    both_whole = isinstance(low, int) and isinstance(high, int)  # "between 0 and 1,000,000", not "1e+06"
    bounds = {name: (f"{v:,}" if both_whole else f"{v:g}") for name, v in (("low", low), ("high", high)) if v is not None}
    key = ("whole" if integer else "number") + (
        "_between" if low is not None and high is not None else "_min" if low is not None else "_max" if high is not None else ""
    ) + ("_open" if low_open and low is not None and high is not None and not integer else "")

    def refuse():
        return InputError(key, field=field, got=_show(value), **bounds)

    parsed = value
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = int(text) if integer and text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise refuse() from None
    if isinstance(parsed, bool) or not isinstance(parsed, numbers.Real):
        raise refuse()
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise refuse()
    if integer:
        if parsed != int(parsed):
            raise refuse()
        parsed = int(parsed)
    else:
        parsed = float(parsed)
    too_low = low is not None and (parsed <= low if low_open else parsed < low)
    if too_low or (high is not None and parsed > high):
        raise refuse()
    return parsed


def boolean(field: str, value) -> bool:
    """True/False, or text: true/1/yes/on, false/0/no/off (any case). Anything else is an error."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise InputError("boolean", field=field, got=_show(value))


def text(field: str, value, *, required: bool = True) -> str:
    """A string that encodes to UTF-8 (a lone surrogate from a JSON caller does not)."""
    if not isinstance(value, str):
        raise InputError("text", field=field, got=_show(value))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("surrogate", field=field) from None
    if required and not value.strip():
        raise InputError("empty", field=field)
    return value


def token_ids(field: str, value) -> tuple[int, ...]:
    """A prompt already tokenised, as OpenAI's and vLLM's completions take it: a non-empty list of whole numbers from
    0, at most limits.MAX_PROMPT_TOKENS (the service checks each against its vocabulary)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value or any(
            isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in value):
        raise InputError("prompt_ids", field=field, got=_show(value))
    if len(value) > limits.MAX_PROMPT_TOKENS:
        raise InputError("prompt_too_long", count=f"{len(value):,}", limit=f"{limits.MAX_PROMPT_TOKENS:,}")
    return tuple(value)


def prompt(field: str, value, chat: bool) -> str | tuple:
    """A prompt as every path reads it: text; with chat, a conversation (messages' (role, content) pairs); without,
    the token ids of a prompt already tokenised (token_ids: what the model reads, chat template included)."""
    if isinstance(value, (list, tuple)):
        return messages("messages", value) if chat else token_ids(field, value)
    return text(field, value)


_KEY = re.compile(r"[A-Za-z0-9_.:-]*")


def key(field: str, value) -> str:
    """A page's name for what the service keeps for it (a run's logits): blank = none ("")."""
    if is_blank(value):
        return ""
    if not isinstance(value, str) or len(value) > limits.MAX_KEEP_KEY_CHARS or not _KEY.fullmatch(value):
        raise InputError("keep_key", field=field, limit=limits.MAX_KEEP_KEY_CHARS, got=_show(value))
    return value


def choice(field: str, value, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InputError("choice", field=field, choices=", ".join(choices), got=_show(value))
    return value


def seed(field: str, value) -> int | None:
    """Blank = fresh randomness; else a whole number in [0, MAX_SEED] (exact in a JavaScript number)."""
    return number(field, value, integer=True, low=0, high=limits.MAX_SEED, blank=None)


def logit_bias(field: str, value) -> tuple[tuple[int, float], ...]:
    """Token id -> bias, as OpenAI and vLLM take it: an object ({"1234": -100}: JSON's keys are text), pairs,
    or text as the page and links write it ("1234:-100, 42:5"). Blank: none. Returns (id, bias) pairs sorted by
    id; each id a whole number >= 0 (the service checks it against the model's vocabulary), each bias in
    [-MAX_LOGIT_BIAS, MAX_LOGIT_BIAS]."""
    if is_blank(value):
        return ()
    if isinstance(value, str):
        pairs = []
        for part in value.replace(";", ",").split(","):
            if not part.strip():
                continue
            token, sep, bias = part.partition(":")
            if not sep:
                raise InputError("bias_map", field=field, got=_show(value))
            pairs.append((token, bias))
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        pairs = [tuple(p) for p in value]
    else:
        raise InputError("bias_map", field=field, got=_show(value))
    if len(pairs) > limits.MAX_LOGIT_BIAS_TOKENS:
        raise InputError("bias_count", field=field, limit=limits.MAX_LOGIT_BIAS_TOKENS, count=len(pairs))
    out: dict[int, float] = {}
    for token, bias in pairs:
        try:
            token_id = number(field, token, integer=True, low=0, high=limits.MAX_TOP_K)
        except InputError:
            raise InputError("bias_id", field=field, high=f"{limits.MAX_TOP_K:,}", got=_show(token)) from None
        try:
            out_bias = number(field, bias, low=-limits.MAX_LOGIT_BIAS, high=limits.MAX_LOGIT_BIAS)
        except InputError:
            raise InputError("bias_value", field=field, token=token_id, limit=f"{limits.MAX_LOGIT_BIAS:g}",
                             got=_show(bias)) from None
        if token_id in out:
            raise InputError("bias_twice", field=field, token=token_id)
        out[token_id] = out_bias
    return tuple(sorted(out.items()))


def format_logit_bias(pairs) -> str:
    """The text form validation.logit_bias reads: "1234:-100, 42:5" (the page's box, links)."""
    return ", ".join(f"{token}:{bias:g}" for token, bias in pairs)


class Stops(tuple):
    """Stop strings as stop_strings checked them: every later reader (the service, the scheduler process) takes
    them as they are. A plain tuple or list (JSON's) is checked again."""


def stop_strings(field: str, value) -> Stops:
    """A list of stop strings, each kept exactly as given (newlines included). A single string is
    one stop string, never split into characters."""
    if isinstance(value, Stops):
        return value
    if isinstance(value, str):
        value = [value]
    return Stops(_string_list(field, value, "stop", limits.MAX_STOP_STRINGS, limits.MAX_STOP_CHARS))


def _string_list(field: str, value, kind: str, limit: int, chars: int) -> tuple[str, ...]:
    """At most `limit` non-empty strings of at most `chars` characters each; the messages are kind's (stop_*,
    strings_*). None: none."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise InputError(f"{kind}_list", field=field, got=_show(value))
    if len(value) > limit:
        raise InputError(f"{kind}_count", field=field, limit=limit, count=len(value))
    for s in value:
        if not isinstance(s, str) or s == "":
            raise InputError(f"{kind}_item", field=field, got=_show(s))
        text(field, s, required=False)
        if len(s) > chars:
            raise InputError(f"{kind}_length", field=field, limit=chars, count=len(s))
    return tuple(value)


CHAT_ROLES = ("system", "developer", "user", "assistant")  # developer: OpenAI's newer name for system


def messages(field: str, value) -> tuple[tuple[str, str], ...]:
    """A chat: a non-empty list of {role, content} messages ending with a user message (the model writes the next
    assistant turn). Roles: system, developer (read as system), user, assistant; content: text, or OpenAI's text
    parts (joined). A user message must say something; a system or assistant one may be empty. Returns (role,
    content) pairs: hashable, picklable, and JSON as lists of two, which this validator reads back (every path
    that carries a chat, remote or ZeroGPU, checks it again with the same rules)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
        raise InputError("messages", field=field, got=_show(value))
    out = []
    for i, message in enumerate(value):
        at = f"{field}[{i}]"
        if isinstance(message, Mapping):
            extra = sorted(str(k) for k in message if k not in ("role", "content"))
            if extra:
                raise InputError("message_field", field=f"{at}.{extra[0]}")
            role, content = message.get("role"), message.get("content")
        elif isinstance(message, (list, tuple)) and len(message) == 2:
            role, content = message
        else:
            raise InputError("message", field=at, got=_show(message))
        if role == "tool":
            raise InputError("message_tool", field=f"{at}.role")
        choice(f"{at}.role", role, CHAT_ROLES)
        out.append(("system" if role == "developer" else role, _content(f"{at}.content", content, role == "user")))
    if out[-1][0] != "user":
        raise InputError("messages_last", field=field, role=out[-1][0])
    return tuple(out)


def _content(field: str, content, required: bool) -> str:
    if isinstance(content, (list, tuple)):  # OpenAI's content parts: text ones only
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                raise InputError("message_part", field=field, got=_show(part))
            texts.append(text(field, part.get("text"), required=False))
        content = "".join(texts)
    return text(field, content, required=required)


def split_bar_text(value: str) -> list[str]:
    """One line of strings separated by "|": "\\|" is a bar, "\\n" a newline, "\\t" a tab, "\\\\" a backslash;
    spaces count; empty parts are dropped (the stop strings' box, DRY's sequence breakers)."""
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
    return [p for p in parts if p]


def parse_stop_text(field: str, value) -> Stops:
    """Stop strings typed in one line (the lab's box, an engine cell, a link): split_bar_text's form. Blank = none."""
    if is_blank(value):
        return Stops()
    if not isinstance(value, str):
        raise InputError("stop_text", field=field, got=_show(value))
    return stop_strings(field, split_bar_text(value))


def strings(field: str, value, *, limit: int, chars: int) -> tuple[str, ...]:
    """A short list of non-empty strings (DRY's sequence breakers): a list, or one line in split_bar_text's form.
    Blank: none."""
    if is_blank(value):
        return ()
    return _string_list(field, split_bar_text(value) if isinstance(value, str) else value, "strings", limit, chars)


def format_stop_text(stops) -> str:
    """The inverse of parse_stop_text: what the box shows for these stop strings."""
    def one(s: str) -> str:
        return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n").replace("\t", "\\t")

    return "|".join(one(s) for s in stops)
