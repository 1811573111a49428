"""A finished lab run as a file, and back: JSON for the whole run, CSV for its token table (pure, no gradio).

A host prepares a run on a GPU and shows it on a laptop, or keeps it for offline slides: the JSON holds the
records, the settings, the model's name and the seed, and importing it replays the run in the lab without
the model. An uploaded file is a stranger's text: every field is checked against the shape the records
have (types, ranges, hex, stage names) before the records' own `from_dict` rebuilds them, and a bad file
gets an InputError that names the field ("records[3].stages[1].probs[2]"), never a crash in a chart later.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, replace

from model_service.records.settings import CHAIN_STAGES, LESSON_STAGES, ORDERS, stage_names
from model_service.records.step import StepRecord
from model_service.records.validation import InputError
from playground import limits

from ..common.lab_link import LINK_DEFAULTS
from ..common.page_errors import PageInputError
from ..common.text import show_steps
from .branches import format_path, last_switch, parse_path
from .deep_link import FIELDS, controls_of, link_value, switched
from .request import KNOB_CONTROLS, RunRequest, parse_request

FORMAT, VERSION = "next-token-playground/run", 1
STOP_CODES = ("eos", "max_tokens", "stop_string")
_NUM, _OPT_NUM, _OPT_STR = "number", "number or null", "text or null"
# field -> (kind, required): the JSON form of each record class (model_service/records/step.py)
TOKEN = {"id": ("int", True), "piece": ("str", True), "special": ("bool", False), "bytes_hex": ("hex", False)}
STAGE = {"name": ("str", True), "probs": ("probs", True), "kept_count": ("int", True), "kept_mass": ("p", True),
         "entropy_bits": (_NUM, True), "chosen_prob": ("p", True), "applied": (_OPT_NUM, False)}
DRAW = {"u": ("p_or_null", True), "rank": ("int", True), "low": ("p", True), "high": ("p", True),
        "margin": ("p_or_null", False), "logit_gap": (_OPT_NUM, False)}
RECORD = {"step": ("int", True), "token_id": ("int", True), "piece": ("str", True), "special": ("bool", True),
          "text": ("str", True), "candidates": ("tokens", True), "stages": ("stages", True),
          "chosen_rank": ("int", True), "draw": ("draw", True), "seed": ("int", True), "forward_ms": (_NUM, True),
          "sampling_ms": (_NUM, True), "capture_ms": (_NUM, False),
          "logits": ("numbers", False), "stop_reason": ("stop", False), "order": ("order", False),
          "batch_size": ("int", False), "bytes_hex": ("hex", False), "pending_hex": ("hex", False),
          "mirostat_mu": (_OPT_NUM, False), "adjusted": ("pairs", False)}
SETTINGS = ("prompt", "chat", "temperature", "top_k", "top_p", "min_p", "seed", "max_new_tokens", "stop", "order",
            *KNOB_CONTROLS)
ADDED = KNOB_CONTROLS  # settings a run file saved before them may lack: they take their defaults


@dataclass(frozen=True)
class SavedRun:
    """What a run file holds, checked: the settings as the lab's controls show them, the run request they
    make, the model that drew the tokens, and the records."""

    controls: dict
    request: RunRequest
    model: str
    records: tuple[StepRecord, ...]
    stopped_by_you: bool
    root: RunRequest | None = None  # a branch's: the root run's request and the path from it (branches.py)
    path: tuple = ()


# ---- out ---------------------------------------------------------------------------------------------------


def run_json(records, request: RunRequest, model: str, stopped_by_you: bool = False, branch=None) -> str:
    """The run as JSON text: records as their to_dict(), the settings that made it (the lab's controls). A branch
    of the Branches panel (`branch`: its root's request and its path) writes the root's settings and the path, as
    its link does: the steps before a switch of settings were drawn with the root's."""
    root, path = branch if branch and branch[1] else (request, ())
    controls = controls_of(root)
    return json.dumps({
        "format": FORMAT, "version": VERSION, "model": model, "seed": records[0].seed if records else None,
        "stopped_by_you": bool(stopped_by_you), "settings": {k: controls.get(k) for k in SETTINGS},
        **({"branch": format_path(path)} if path else {}),
        "records": [r.to_dict() for r in records],
    }, ensure_ascii=False, separators=(",", ":"))  # compact: a 512-step run stays ~1.5 MB


def token_table_csv(records, lang: str = "en") -> str:
    """One row per step (counted from 1): the token as the page shows it, its id, rank, probabilities
    (raw and final, as plain numbers for a spreadsheet), the draw and the stop reason."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["step", "token", "token_id", "rank", "p_raw", "p_final", "entropy_bits", "kept_final", "u",
                     "stop_reason"])
    for r, shown in zip(records, show_steps(records, lang=lang) if records else []):
        stages = {s.name: s for s in r.stages}
        raw, final = stages.get("raw"), stages.get("final")
        writer.writerow([r.step + 1, shown.text, r.token_id, r.chosen_rank + 1, raw.chosen_prob if raw else "",
                         final.chosen_prob if final else "", raw.entropy_bits if raw else "",
                         final.kept_count if final else "", "" if r.draw.u is None else r.draw.u, r.stop_reason or ""])
    return out.getvalue()


# ---- in ----------------------------------------------------------------------------------------------------


def _bad(field: str, expected: str, got) -> InputError:
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return PageInputError("run_field", field=field, expected=expected, got=shown[:60])


def _number(field: str, value, low=None, high=None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(field, "a number", value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise _bad(field, f"a number between {low} and {high}", value)
    return value


def _check(field: str, kind: str, value):
    """One field of a record's JSON form, by kind; raises naming the field."""
    if kind in ("int", "order", "stop", "str", "bool", "hex"):
        if kind == "int" and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63):
            raise _bad(field, "a whole number of at least 0", value)
        if kind == "order" and value not in ORDERS:
            raise _bad(field, f"one of {', '.join(ORDERS)}", value)
        if kind == "stop" and value is not None and value not in STOP_CODES:
            raise _bad(field, f"null or one of {', '.join(STOP_CODES)}", value)
        if kind in ("str", "hex") and not isinstance(value, str):
            raise _bad(field, "text", value)
        if kind == "hex" and not _is_hex(value):
            raise _bad(field, "bytes in hex (\"e1bb\")", value)
        if kind == "bool" and not isinstance(value, bool):
            raise _bad(field, "true or false", value)
    elif kind in ("p", "p_or_null"):
        if not (kind == "p_or_null" and value is None):
            _number(field, value, 0, 1)
    elif kind == _NUM:
        _number(field, value)
    elif kind == _OPT_NUM:
        if value is not None:
            _number(field, value)
    elif kind in ("probs", "numbers"):
        _items(field, value)
        for i, p in enumerate(value):
            _number(f"{field}[{i}]", p, *((0, 1) if kind == "probs" else ()))
    elif kind == "pairs":  # (token id, logit moved; null: banned)
        for i, pair in enumerate(_items(field, value)):
            if not (isinstance(pair, list) and len(pair) == 2):
                raise _bad(f"{field}[{i}]", "a pair [token id, number or null]", pair)
            _check(f"{field}[{i}][0]", "int", pair[0])
            if pair[1] is not None:
                _number(f"{field}[{i}][1]", pair[1])
    elif kind in ("tokens", "stages"):
        for i, item in enumerate(_items(field, value)):
            _fields(f"{field}[{i}]", item, TOKEN if kind == "tokens" else STAGE)
    elif kind == "draw":
        _fields(field, value, DRAW)


def _is_hex(value: str) -> bool:
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return len(value) <= 64


def _items(field: str, value) -> list:
    if not isinstance(value, list) or len(value) > limits.MAX_TOP_N:
        raise _bad(field, f"a list of at most {limits.MAX_TOP_N} items", value)
    return value


def _fields(field: str, value, schema: dict) -> None:
    if not isinstance(value, dict):
        raise _bad(field, "an object", value)
    for name in value:
        if name not in schema:
            raise PageInputError("run_unknown", field=f"{field}.{name}"[:80], known=", ".join(schema))
    for name, (kind, required) in schema.items():
        if name in value:
            _check(f"{field}.{name}", kind, value[name])
        elif required:
            raise PageInputError("run_missing", field=f"{field}.{name}")


def _record(i: int, d) -> StepRecord:
    """records[i], checked field by field and against the record's own invariants, then rebuilt."""
    field = f"records[{i}]"
    _fields(field, d, RECORD)
    if d["step"] != i:
        raise _bad(f"{field}.step", f"{i} (steps follow one another from 0)", d["step"])
    n, names = len(d["candidates"]), [s["name"] for s in d["stages"]]
    order = d.get("order", "hf")
    # a custom chain's stages are the run's own: those a chain may order, after the adjusters
    expected = list(stage_names(order, tuple(n for n in names if n in CHAIN_STAGES) if order == "custom" else ()))
    # a run saved before some of the order's stages existed has the lesson's stages and some of the others
    older = set(LESSON_STAGES) <= set(names) and names == [n for n in expected if n in names]
    if names and names != expected and not older:
        raise _bad(f"{field}.stages", "the stages of its order: " + ", ".join(expected), ", ".join(names))
    if len(d.get("logits", ())) not in (0, n):
        raise _bad(f"{field}.logits", f"0 or {n} numbers (one per candidate)", len(d["logits"]))
    for j, stage in enumerate(d["stages"]):
        if len(stage["probs"]) != n:
            raise _bad(f"{field}.stages[{j}].probs", f"{n} probabilities (one per candidate)", len(stage["probs"]))
    return StepRecord.from_dict(d)


def parse_run(data: bytes | str) -> SavedRun:
    """A run file's bytes -> the checked run. Raises InputError naming the field."""
    if len(data) > limits.MAX_RUN_FILE_BYTES:
        raise PageInputError("run_size", size=len(data), limit=limits.MAX_RUN_FILE_BYTES)
    try:
        d = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise PageInputError("run_json", error=str(e)[:80]) from None
    if not isinstance(d, dict):
        raise _bad("the file", "a JSON object", d)
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        raise _bad("format", f"{FORMAT!r} version {VERSION}", d.get("format"))
    for name in d:
        if name not in ("format", "version", "model", "seed", "stopped_by_you", "settings", "branch", "records"):
            raise PageInputError("run_unknown", field=str(name)[:80],
                                 known="format, version, model, seed, settings, branch, records")
    model, stopped = d.get("model", ""), d.get("stopped_by_you", False)
    _check("model", "str", model)
    _check("stopped_by_you", "bool", stopped)
    settings = d.get("settings")
    if not isinstance(settings, dict) or not set(SETTINGS) - set(ADDED) <= set(settings) <= set(SETTINGS):
        raise _bad("settings", "an object with " + ", ".join(SETTINGS), settings)
    settings = {**{k: LINK_DEFAULTS[k] for k in ADDED}, **settings}
    # within the sliders' ranges, as a link's values are (the controls will show them), then as Generate reads them
    checked = {k: FIELDS[k](settings[k]) if settings[k] is not None else settings[k] for k in SETTINGS}
    root = parse_request(*(checked[k] for k in SETTINGS))
    path = parse_path(d.get("branch", ""), check=link_value)
    request = switched(root, last_switch(path))  # what the run's last steps drew with
    records = d.get("records")
    if not isinstance(records, list) or not 1 <= len(records) <= limits.MAX_NEW_TOKENS:
        raise _bad("records", f"a list of 1 to {limits.MAX_NEW_TOKENS} steps", records)
    rebuilt = tuple(_record(i, r) for i, r in enumerate(records))
    if any(r.stop_reason for r in rebuilt[:-1]):
        raise _bad("records", "a run whose stop_reason is on its last step only", "an earlier stop")
    # the seed box gets the seed the run drew with, so Generate draws the same tokens again
    controls = {**controls_of(request), "seed": str(rebuilt[0].seed)}
    if path:
        request = replace(request, settings=request.settings.with_seed(rebuilt[0].seed))
        root = replace(root, settings=root.settings.with_seed(rebuilt[0].seed))
    return SavedRun(controls, request, model, rebuilt, stopped, root if path else None, path)
