"""The whole page as a link: the tab and every tab's inputs <-> query parameters, and the absolute URL
the room can open from slides or chat.

    https://huggingface.co/spaces/owner/name?tab=softmax&toy_temperature=0.5&lang=vi

Pure functions (no gradio). The lab's own fields and their checks stay in lab/deep_link.py; this module
adds the other tabs' (prefixed by tab) and `tab`. Every field is validated as its control would be; a bad
or unknown one is a problem that names it (the page warns, escaped) and the control keeps its value:
never fatal. Gradio's and the page's own parameters (`__theme`, Hugging Face's `__sign`, `lang`, `scene`,
`view`) are not fields. Defaults are left out of the query so links stay short.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from urllib.parse import urlencode, urlsplit

from model_service import validation
from model_service.hosting import Host

from .common.errors import in_language
from .common.i18n import DEFAULT, LESSON_PROMPTS, language, tr
from .engine.table import EXAMPLE_ROWS, parse_table, table_rows
from .lab import deep_link
from .softmax.toy import load_toy, parse_logits, show_piece

TABS = ("lab", "softmax", "engine", "compare", "forward")  # the page's tab ids, in order (page.py)
PAGE_PARAMS = ("lang", "scene", "view")  # read by the page itself, not by a control
MAX_BLOCK = 1000  # a link's block must be a whole number; the model's own depth is checked when it traces
MAX_ENGINE_JSON = 8000  # characters: the table's JSON in a link


class LinkError(ValueError):
    """A link's field that no validator covers: `key` (a catalogue key) and its values, said in the page's
    language by parse_query (English as str())."""

    def __init__(self, key: str, **values):
        self.key, self.values = key, {k: str(v) for k, v in values.items()}
        super().__init__(tr(DEFAULT, key, **self.values))


@cache
def toy_defaults() -> tuple[list[str], list[float]]:
    """(tokens, logits) of the toy vocabulary (assets/toy_vocab.json)."""
    _, tokens, logits = load_toy()
    return tokens, logits


def _toy_logits(raw) -> list[float]:
    """'5,3.2,2.7,2.2,1.4': one logit per token of the toy vocabulary, in its order."""
    tokens, _ = toy_defaults()
    parts = [p for p in str(raw).split(",")]
    if len(parts) != len(tokens):
        raise LinkError("link.error.toy_count", count=len(tokens), got=len(parts))
    return parse_logits(tokens, parts)


def _engine_rows(raw) -> list[list]:
    """The engine table as JSON rows ([[prompt, temperature, top-k, ...], ...]), checked as Run checks it."""
    if len(str(raw)) > MAX_ENGINE_JSON:
        raise LinkError("link.error.engine_long", limit=MAX_ENGINE_JSON, got=len(str(raw)))
    try:
        rows = json.loads(raw)
    except (TypeError, ValueError):
        raise LinkError("link.error.engine_json") from None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise LinkError("link.error.engine_json")
    rows = table_rows(rows)
    try:
        parse_table(rows)
    except ValueError as e:
        raise LinkError("link.error.engine_row", error=e) from None
    return rows


def _tab(raw) -> str:
    return validation.choice("tab", raw, TABS)


# query name -> parser of the raw text (raises ValueError naming the parameter); the lab's first
FIELDS = {
    "tab": _tab,
    **deep_link.FIELDS,
    "toy_logits": _toy_logits,
    "toy_shift": lambda v: validation.number("toy_shift", v, low=-10, high=10),
    "toy_temperature": lambda v: validation.number("toy_temperature", v, low=0, high=2),
    "engine": _engine_rows,
    "fw_prompt": lambda v: validation.text("fw_prompt", v),
    "fw_chat": lambda v: validation.boolean("fw_chat", v),
    "fw_block": lambda v: validation.number("fw_block", v, integer=True, low=1, high=MAX_BLOCK),
    "fw_head": lambda v: validation.number("fw_head", v, integer=True, low=-1, high=MAX_BLOCK),
}
DEFAULTS = {
    **deep_link.LINK_DEFAULTS, "tab": "lab", "toy_logits": toy_defaults()[1], "toy_shift": 0.0,
    "toy_temperature": 1.0, "engine": [list(r) for r in EXAMPLE_ROWS], "fw_chat": False, "fw_head": -1,
}


def ignored(name: str) -> bool:
    """Parameters that are no control's: the page's own, and Gradio's / Hugging Face's (`__theme`, `__sign`)."""
    return name in PAGE_PARAMS or name in deep_link.IGNORED or name.startswith("__")


def parse_query(params: Mapping[str, str]) -> tuple[dict, list[str]]:
    """(field -> value, problems). Each problem names the parameter and says why, in the link's language."""
    lang = params.get("lang")
    values, problems = {}, []
    for name, raw in params.items():
        if name not in FIELDS:
            if not ignored(name):
                problems.append(tr(lang, "lab.link.unknown", name=repr(name), known=", ".join(FIELDS)))
            continue
        try:
            values[name] = FIELDS[name](raw)
        except LinkError as e:
            problems.append(tr(lang, "lab.link.kept", error=tr(lang, e.key, **e.values)))
        except ValueError as e:
            problems.append(tr(lang, "lab.link.kept", error=in_language(e, lang)))
    return values, problems


def _text(name: str, value) -> str | None:
    """A field's value as query text, or None where it is the default (or no value)."""
    if value is None:
        return None
    if name == "fw_prompt":
        return None if value in LESSON_PROMPTS.values() else str(value)  # the page's language picks the lesson's
    if name == "prompt":
        return str(value)
    if name == "toy_logits":
        logits = [float(x) for x in value]
        return None if logits == DEFAULTS[name] else ",".join(f"{x:g}" for x in logits)
    if name == "engine":
        rows = table_rows(value)
        return None if rows == table_rows(DEFAULTS[name]) else json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, float) and value.is_integer() and name in ("fw_block", "fw_head", "top_k", "max_new_tokens"):
        value = int(value)
    if value == DEFAULTS.get(name, object()):
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def make_query(values: Mapping, lang: str | None = None, host_lang: str | None = None, scene: str | None = None) -> str:
    """The query for the page's values (field -> control value; missing fields are left out), the scene
    being shown, and the page's language (left out for English unless the host's pages open in another)."""
    out = {"scene": scene} if scene else {}
    for name in FIELDS:
        text = _text(name, values.get(name))
        if text is not None:
            out[name] = text
    if lang is not None and not language(lang) == language(host_lang) == "en":
        out["lang"] = language(lang)
    return urlencode(out)


def toy_rows_of(logits) -> list[list]:
    """The toy table's rows for a link's logits (the toy vocabulary's tokens, spaces shown as ␣)."""
    tokens, _ = toy_defaults()
    return [[show_piece(t), x] for t, x in zip(tokens, logits)]


# ----------------------------------------------------------------------------- where the page lives


def _first(headers: Mapping[str, str], name: str) -> str:
    """The first value of a header a chain of proxies may have appended to ("a.example, b.internal")."""
    value = headers.get(name) or headers.get(name.title()) or ""
    return value.split(",")[0].strip()


def page_url(headers: Mapping[str, str], url: str = "", root_path: str = "", host: Host | None = None) -> str:
    """The page's public address, no query, no trailing slash, as a visitor must open it:

    - on a Hugging Face Space, the Space's page (https://huggingface.co/spaces/owner/name): the app runs in
      its iframe, and the Space passes its query to the iframe on the first load;
    - a root_path that is a full URL (Gradio's --root-path / GRADIO_ROOT_PATH) is the address;
    - behind a proxy, X-Forwarded-Host and X-Forwarded-Proto (the first of each), then the root_path or
      X-Forwarded-Prefix (a path the proxy mounts the app under);
    - else the page the browser shows (the Referer of the page's own call), else the request's Host.

    headers: the request's (any case); url: the request's URL (for its scheme and host)."""
    headers = {k.lower(): v for k, v in headers.items()}
    if host is not None and host.on_space and host.space_id != "unknown/space":
        return f"https://huggingface.co/spaces/{host.space_id}"
    if root_path.startswith(("http://", "https://")):
        return root_path.rstrip("/")
    path = (root_path or _first(headers, "x-forwarded-prefix")).rstrip("/")
    if path and not path.startswith("/"):
        path = "/" + path
    forwarded = _first(headers, "x-forwarded-host")
    if forwarded:
        scheme = _first(headers, "x-forwarded-proto") or "http"
        return f"{scheme}://{forwarded}{path}"
    referer = urlsplit(headers.get("referer", ""))
    if referer.scheme in ("http", "https") and referer.netloc:
        return f"{referer.scheme}://{referer.netloc}{referer.path}".rstrip("/")
    parts = urlsplit(url)
    netloc = headers.get("host") or parts.netloc or "localhost"
    return f"{parts.scheme or 'http'}://{netloc}{path}"


def space_direct_url(host: Host) -> str | None:
    """A Space's own address (https://owner-name.hf.space), outside the Hugging Face page; None off a Space."""
    if host.space_host:
        return f"https://{host.space_host}"
    return None


def absolute(base: str, query: str) -> str:
    """base + query; an origin gets its "/" (http://host:7860/?q), a path does not (.../spaces/o/n?q)."""
    base = base if urlsplit(base).path else base + "/"
    return f"{base}?{query}" if query else base


__all__ = ["DEFAULTS", "FIELDS", "LinkError", "TABS", "absolute", "make_query", "page_url", "parse_query", "space_direct_url",
           "toy_rows_of"]
