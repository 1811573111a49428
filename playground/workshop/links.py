"""The whole page as a link: the tab and every tab's inputs <-> query parameters, and the absolute URL
the room can open from slides or chat.

    https://huggingface.co/spaces/owner/name?tab=softmax&toy_temperature=0.5&lang=vi
    http://host:7860/?tab=compare&compare_seed=42&compare_b=1.5,0,0.9,0,hf

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
from urllib.parse import urlencode

from model_service.records import validation
from model_service.records.intervention import KINDS, MODES
from model_service.records.settings import SamplingSettings
from playground import limits

from ..common.errors import in_language
from ..common.i18n import DEFAULT, LESSON_PROMPTS, language, tr
from ..common.lab_link import LINK_DEFAULTS
from ..common.tables import TAIL_COLUMNS, padded, tail_cells, trimmed
from ..compare import columns as compare
from ..engine.table import EXAMPLE_ROWS, parse_table, table_rows
from ..lab import deep_link
from ..softmax.toy import load_toy, parse_logits, show_piece

TABS = ("lab", "softmax", "engine", "compare", "forward")  # the page's tab ids, in order (page.py)
PAGE_PARAMS = ("lang", "scene", "view")  # read by the page itself, not by a control
MAX_BLOCK = limits.LINK_MAX_BLOCK
MAX_ENGINE_JSON = limits.LINK_MAX_ENGINE_JSON
WHOLE = ("fw_block", "fw_head", "iv_block", "iv_head", "iv_steer_block", "top_k", "max_new_tokens", "compare_max_new")  # a slider's 3.0 is written 3


class LinkError(ValueError):
    """A link's field that no validator covers: `key` (a catalogue key) and its values, said in the page's
    language by parse_query (English as str()). `cause`: a validator's error, its {error} (said again in the
    page's language by parse_query)."""

    def __init__(self, key: str, cause: Exception | None = None, **values):
        self.key, self.cause, self.values = key, cause, {k: str(v) for k, v in values.items()}
        if cause is not None:
            self.values.setdefault("error", str(cause))
        super().__init__(tr(DEFAULT, key, **self.values))

    def said(self, lang) -> str:
        values = self.values if self.cause is None else {**self.values, "error": in_language(self.cause, lang)}
        return tr(lang, self.key, **values)


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


# ----------------------------------------------------------------------------- the Compare tab
# Its table travels as compare_columns (how many, 2-4; 2 is left out) and one parameter per column,
# compare_a .. compare_d = "temperature,top-k,top-p,min-p,order[,repetition,frequency,presence penalty]", the
# table's columns in order, a blank cell being the default as in the table. The penalties came later: a link
# leaves them out where they are off, and one without them (5 cells, as older links are) has them off.
# parse_query hands them on as one field, compare_table (the rows).
COMPARE_COLUMNS = tuple(f"compare_{letter.lower()}" for letter in compare.LETTERS)
COMPARE_CELLS = (len(compare.COLUMNS) - len(TAIL_COLUMNS), len(compare.COLUMNS))  # fewest, most


def settings_row(settings: SamplingSettings) -> list:
    """A column's settings as the Compare table's cells (and a link's compare_a..d)."""
    return [settings.temperature, settings.top_k, settings.top_p, settings.min_p, settings.order_text,
            *tail_cells(settings)]


def _column_row(name: str, cells) -> list:
    """One column's cells -> its settings as cells, checked as Run checks them (columns.parse_comparison)."""
    try:
        return settings_row(compare.column_settings(cells))
    except ValueError as e:
        raise LinkError("link.error.compare_column", cause=e, name=name) from None


def _compare_seed(raw) -> str:
    seed = validation.seed("compare_seed", raw)
    return "" if seed is None else str(seed)  # blank: every Run draws a fresh one, as the box says


def _compare_column(name: str):
    def parse(raw) -> list:
        cells = str(raw).split(",")
        if not COMPARE_CELLS[0] <= len(cells) <= COMPARE_CELLS[1]:
            raise LinkError("link.error.compare_cells", name=name, low=COMPARE_CELLS[0], high=COMPARE_CELLS[1],
                            got=len(cells))
        return _column_row(name, cells)
    return parse


COMPARE_ROWS = [_column_row("compare", row) for row in compare.EXAMPLE_ROWS]  # the tab's own
NEW_COLUMN = settings_row(SamplingSettings())  # a third or fourth column a link leaves out: every filter off


def compare_default(index: int) -> list:
    return COMPARE_ROWS[index] if index < len(COMPARE_ROWS) else NEW_COLUMN


def compare_rows(table) -> list[list] | None:
    """The Compare table's raw value (what gr.Dataframe sends) as a link's rows; None when Run would refuse
    it (a bad cell, too few or too many columns): a link does not carry what the tab cannot run."""
    try:
        rows = compare.table_rows(table)
        if not compare.MIN_COLUMNS <= len(rows) <= compare.MAX_COLUMNS:
            return None
        return [_column_row(name, cells) for name, cells in zip(COMPARE_COLUMNS, rows)]
    except ValueError:
        return None


def _compare_table(values: dict, refused: set[str], lang) -> list[str]:
    """Folds compare_columns and compare_a..d of parsed `values` into compare_table; the problems (a column
    beyond the count). One refused part (`refused`: the parameters that had a problem) leaves the whole table
    as it is: half a link's columns over the host's would be a comparison nobody asked for."""
    given = {name: values.pop(name) for name in COMPARE_COLUMNS if name in values}
    count = values.pop("compare_columns", None)
    if (count is None and not given) or refused & {"compare_columns", *COMPARE_COLUMNS}:
        return []
    if count is None:
        count = max(compare.MIN_COLUMNS, *(COMPARE_COLUMNS.index(name) + 1 for name in given))
    values["compare_table"] = [given.get(name, compare_default(i)) for i, name in enumerate(COMPARE_COLUMNS[:count])]
    return [tr(lang, "link.error.compare_beyond", name=name, count=count)
            for name in given if COMPARE_COLUMNS.index(name) >= count]


def _compare_query(rows) -> dict[str, str]:
    """compare_table's rows as compare_columns and compare_a..d, defaults left out."""
    if rows is None:
        return {}
    rows = [padded(list(row), len(compare.COLUMNS)) for row in rows]  # an old row's penalties: off
    out = {} if len(rows) == compare.MIN_COLUMNS else {"compare_columns": str(len(rows))}
    for i, (name, row) in enumerate(zip(COMPARE_COLUMNS, rows)):
        if row != compare_default(i):
            out[name] = ",".join(_number(cell) if isinstance(cell, (int, float)) else str(cell) for cell in trimmed(row))
    return out


def _number(value) -> str:
    """A number as short as it is exact: 1, 0.5, 0.123456789 (repr round-trips a float)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


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
    "iv_kind": lambda v: validation.choice("iv_kind", v, KINDS),
    "iv_block": lambda v: validation.number("iv_block", v, integer=True, low=1, high=MAX_BLOCK),
    "iv_head": lambda v: validation.number("iv_head", v, integer=True, low=1, high=MAX_BLOCK),
    "iv_mode": lambda v: validation.choice("iv_mode", v, MODES),
    "iv_source": lambda v: validation.text("iv_source", v),
    "iv_steer_prompt": lambda v: validation.text("iv_steer_prompt", v),
    "iv_towards": lambda v: validation.text("iv_towards", v),
    "iv_away": lambda v: validation.text("iv_away", v),
    "iv_steer_block": lambda v: validation.number("iv_steer_block", v, integer=True, low=1, high=MAX_BLOCK),
    "iv_scale": lambda v: validation.number("iv_scale", v, low=-limits.STEER_SLIDER, high=limits.STEER_SLIDER),
    "compare_prompt": lambda v: validation.text("compare_prompt", v),
    "compare_seed": _compare_seed,
    "compare_max_new": lambda v: validation.number("compare_max_new", v, integer=True, low=1, high=limits.MAX_NEW_TOKENS),
    "compare_columns": lambda v: validation.number("compare_columns", v, integer=True, low=compare.MIN_COLUMNS,
                                                   high=compare.MAX_COLUMNS),
    **{name: _compare_column(name) for name in COMPARE_COLUMNS},
}
DEFAULTS = {
    **LINK_DEFAULTS, "tab": "lab", "toy_logits": toy_defaults()[1], "toy_shift": 0.0,
    "toy_temperature": 1.0, "engine": [list(r) for r in EXAMPLE_ROWS], "fw_chat": False, "fw_head": -1,
    "iv_kind": "mlp", "iv_head": 1, "iv_mode": "zero", "iv_source": limits.PATCH_SOURCE,
    "iv_steer_prompt": limits.STEER_PROMPT, "iv_towards": limits.STEER_TOWARDS, "iv_away": limits.STEER_AWAY,
    "iv_steer_block": limits.STEER_BLOCK, "iv_scale": 1.0,
    "compare_seed": compare.EXAMPLE_SEED, "compare_max_new": compare.DEFAULT_MAX_NEW_TOKENS, "compare_table": COMPARE_ROWS,
}


def ignored(name: str) -> bool:
    """Parameters that are no control's: the page's own, and Gradio's / Hugging Face's (`__theme`, `__sign`)."""
    return name in PAGE_PARAMS or name in deep_link.IGNORED or name.startswith("__")


def parse_query(params: Mapping[str, str]) -> tuple[dict, list[str]]:
    """(field -> value, problems). Each problem names the parameter and says why, in the link's language."""
    lang = params.get("lang")
    values, problems, refused = {}, [], set()
    for name, raw in params.items():
        if name not in FIELDS:
            if not ignored(name):
                problems.append(tr(lang, "lab.link.unknown", name=repr(name), known=", ".join(FIELDS)))
            continue
        try:
            values[name] = FIELDS[name](raw)
        except LinkError as e:
            problems.append(tr(lang, "lab.link.kept", error=e.said(lang)))
            refused.add(name)
        except ValueError as e:
            problems.append(tr(lang, "lab.link.kept", error=in_language(e, lang)))
            refused.add(name)
    return values, problems + _compare_table(values, refused, lang)


def _text(name: str, value) -> str | None:
    """A field's value as query text, or None where it is the default (or no value)."""
    if value is None:
        return None
    if name in ("fw_prompt", "compare_prompt"):
        return None if value in LESSON_PROMPTS.values() else str(value)  # the page's language picks the lesson's
    if name == "prompt":
        return str(value)
    if name == "toy_logits":
        logits = [float(x) for x in value]
        return None if logits == DEFAULTS[name] else ",".join(f"{x:g}" for x in logits)
    if name == "engine":
        rows = table_rows(value)
        if rows == table_rows(DEFAULTS[name]):
            return None
        return json.dumps([trimmed(row) for row in rows], ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, float) and value.is_integer() and name in WHOLE:
        value = int(value)
    if value == DEFAULTS.get(name, object()):
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def make_query(values: Mapping, lang: str | None = None, host_lang: str | None = None, scene: str | None = None) -> str:
    """The query for the page's values (field -> control value; missing fields are left out), the scene
    being shown, and the page's language (left out for English unless the host's pages open in another)."""
    out = {"scene": scene} if scene else {}
    for name in FIELDS:
        if name == "compare_columns":
            out |= _compare_query(values.get("compare_table"))
        text = _text(name, values.get(name))
        if text is not None:
            out[name] = text
    if lang is not None and not language(lang) == language(host_lang) == "en":
        out["lang"] = language(lang)
    return urlencode(out, safe=",")  # commas stay readable: toy_logits=5,3.2,... compare_b=1.5,0,0.9,0,hf


def toy_rows_of(logits) -> list[list]:
    """The toy table's rows for a link's logits (the toy vocabulary's tokens, spaces shown as ␣)."""
    tokens, _ = toy_defaults()
    return [[show_piece(t), x] for t, x in zip(tokens, logits)]


__all__ = ["DEFAULTS", "FIELDS", "LinkError", "TABS", "compare_rows", "make_query", "parse_query", "toy_rows_of"]
