"""The Intervene section's results as one file, and back: the "Intervention files" accordion at its end.

What the section shows (an attribution, a knock-out, a patching grid, a steered run: the latest of each) is kept in
the section's State (a Shown of intervene_shown.py, its results folded in by `remember`) and Export writes them as JSON
with no model work. Import reads an uploaded file, checks every field against the records' shape (playground/lab/
export.py's checks for tokens and step records, renamed to this file) before the records' from_dict rebuilds them,
and draws each saved result in its views with the section's own text and charts: no model, and a bad file gets an
InputError that names the field ("patch.result.cells[3].block"). The file round-trips: export, import, export gives
the same text.
"""

from __future__ import annotations

import json
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr

from model_service.records.intervention import KINDS as PARTS
from model_service.records.intervention import MODES, Attribution, KnockoutResult, PatchResult, SteerResult
from playground import limits

from ..common.errors import user_error
from ..common.figures import empty_figure
from ..common.i18n import T, tr
from ..common.page_errors import PageInputError
from ..common.text import escape_markdown_cell
from ..lab import export
from ..lab.view import View, stage_chart
from . import intervene_charts as charts
from . import intervene_text as text

if TYPE_CHECKING:  # intervene.py wires `remember` into its handlers: importing it here would make a cycle
    from .intervene import InterveneComponents

FORMAT, VERSION = "next-token-playground/interventions", 1
KINDS = ("attribution", "knockout", "patch", "steer")
PROMPTED = ("attribution", "knockout", "patch")  # made on the tab's prompt (the file's "prompt" and "chat")
MAX_MODEL_CHARS = 200
MAX_PARTS = limits.MAX_PROMPT_TOKENS  # blocks of a model, heads of a block: a bound, far past any model served
_NUM, _OPT_NUM = export._NUM, export._OPT_NUM
# field -> kind, every field required (to_dict writes them all); a kind named here is an object of that schema
SCHEMAS = {
    "file": {"kind": "format", "version": "version", "model": "model", "prompt": "text", "chat": "bool",
             "attribution": "attribution?", "knockout": "knockout?", "patch": "patch_shown?", "steer": "steer_shown?"},
    "attribution": {"candidate": "token", "rival": "token", "logit_diff": _NUM, "scale": _NUM, "embedding": _NUM,
                    "attention": "blocks", "mlp": "blocks", "lens": "blocks", "bias": _NUM, "residual_error": _NUM,
                    "head_block": "block", "heads": "heads", "head_note": "str", "softcap": _OPT_NUM, "tokens": "int",
                    "ms": _NUM},
    "knockout": {"target": "target", "before": "step", "after": "step", "candidate": "token", "prob_before": "p",
                 "prob_after": "p", "rank_before": "rank", "rank_after": "rank", "max_abs_dlogit": _NUM,
                 "forward_ms": _NUM, "ms": _NUM},
    "target": {"kind": "part", "block": "block", "head": "head", "mode": "mode"},
    "patch_shown": {"source": "text", "result": "patch"},
    "patch": {"candidate": "token", "source_answer": "token", "tokens": "prompt_tokens", "clean": "pair",
              "source": "pair", "cells": "cells", "ms": _NUM},
    "cell": {"position": "position", "block": "block", "candidate": "p", "source_answer": "p", "top": "token",
             "top_prob": "p"},
    "steer_shown": {"prompt": "text", "towards": "text", "away": "text", "result": "steer"},
    "steer": {"block": "block", "scale": _NUM, "direction_norm": _NUM, "stream_norm": _NUM, "plain": "steps",
              "steered": "steps", "parted_at": "position", "seed": "int", "ms": _NUM},
}
# a list kind -> (the kind of its items, the fewest, the most)
LISTS = {"blocks": (_NUM, 1, MAX_PARTS), "heads": (_NUM, 0, MAX_PARTS), "pair": ("p", 2, 2),
         "prompt_tokens": ("token", 0, limits.MAX_PROMPT_TOKENS), "cells": ("cell", 1, limits.MAX_PATCH_CELLS),
         "steps": ("step", 0, limits.MAX_STEER_TOKENS)}


@dataclass(frozen=True)
class SavedInterventions:
    """What an intervention file holds, checked and rebuilt: the model it was made on, the tab's prompt, and the
    latest result of each kind (None: the section showed none)."""

    model: str
    prompt: str = ""
    chat: bool = False
    attribution: Attribution | None = None
    knockout: KnockoutResult | None = None
    patch: PatchResult | None = None
    source: str = ""  # the patch's second prompt
    steer: SteerResult | None = None
    steer_prompts: tuple[str, str, str] = ("", "", "")  # the steered run's prompt, towards and away


# ---- the kept results (a State's dict) and the file ---------------------------------------------------------


def empty_results(model: str = "") -> dict:
    return {"model": model, "prompt": "", "chat": False, **dict.fromkeys(KINDS)}


def remember(results: dict | None, kind: str, inputs: dict, record) -> dict:
    """The kept results with `record` as the section's latest of `kind` (None: that kind's views were cleared).
    inputs: "model" (the model it was made on; another model's results are let go), and per kind: attribution and
    knockout "prompt" and "chat"; patch those and "source"; steer "prompt", "towards", "away". A result made on
    another prompt than the kept ones lets them go: the file holds one prompt."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    out = dict(results or empty_results())
    model = str(inputs.get("model", out["model"]))
    if model != out["model"]:
        out = empty_results(model)
    if record is not None and kind in PROMPTED:
        prompt, chat = str(inputs["prompt"]), bool(inputs["chat"])
        if (prompt, chat) != (out["prompt"], out["chat"]):
            out |= {"prompt": prompt, "chat": chat, **dict.fromkeys(PROMPTED)}
    if record is None or kind in ("attribution", "knockout"):
        out[kind] = record
    elif kind == "patch":
        out[kind] = {"source": str(inputs["source"]), "result": record}
    else:
        out[kind] = {**{k: str(inputs[k]) for k in ("prompt", "towards", "away")}, "result": record}
    return out


def has_results(results: dict | None) -> bool:
    return bool(results) and any(results.get(k) is not None for k in KINDS)


def exported_json(results: dict | None, model: str | None = None) -> str:
    """The kept results as the file's JSON text; `model` names the model (default: the one they were made on)."""
    r = results or empty_results()
    shown = lambda entry: None if entry is None else {**entry, "result": entry["result"].to_dict()}
    return json.dumps({
        "kind": FORMAT, "version": VERSION, "model": r["model"] if model is None else model, "prompt": r["prompt"],
        "chat": r["chat"], **{k: None if r[k] is None else r[k].to_dict() for k in ("attribution", "knockout")},
        "patch": shown(r["patch"]), "steer": shown(r["steer"]),
    }, ensure_ascii=False, separators=(",", ":"))


def results_of(saved: SavedInterventions) -> dict:
    """A loaded file as the kept results: exported again, it gives the same text."""
    out = empty_results(saved.model) | {"prompt": saved.prompt, "chat": saved.chat, "attribution": saved.attribution,
                                        "knockout": saved.knockout}
    if saved.patch is not None:
        out["patch"] = {"source": saved.source, "result": saved.patch}
    if saved.steer is not None:
        out["steer"] = dict(zip(("prompt", "towards", "away"), saved.steer_prompts)) | {"result": saved.steer}
    return out


# ---- in: every field checked, named -------------------------------------------------------------------------


@contextmanager
def _as_ours(old: str = "", new: str = ""):
    """The lab's checks raise the run file's errors: said again as this file's, field `old…` named `new…`."""
    try:
        yield
    except PageInputError as e:
        if not e.key.startswith("run_"):
            raise
        values = dict(e.values)
        if old and values.get("field", "").startswith(old):
            values["field"] = new + values["field"][len(old):]
        raise PageInputError("iv_file_" + e.key[4:], **values) from None


def _bad(field: str, expected: str, got) -> PageInputError:
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return PageInputError("iv_file_field", field=field, expected=expected, got=shown[:60])


WHOLE = {"block": (1, MAX_PARTS), "head": (1, MAX_PARTS), "position": (0, limits.MAX_PROMPT_TOKENS),
         "rank": (1, 2**31)}  # a whole number's kind -> its range (a rank: among the vocabulary)


def _whole(field: str, kind: str, value) -> None:
    low, high = WHOLE[kind]
    if kind in ("head", "position") and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        null = "null or " if kind in ("head", "position") else ""
        raise _bad(field, f"{null}a whole number from {low} to {high}", value)


def _check(field: str, kind: str, value) -> None:
    """One field, by kind; raises naming it."""
    if kind.endswith("?"):
        if value is not None:
            _check(field, kind[:-1], value)
    elif kind in SCHEMAS:
        _object(field, value, SCHEMAS[kind])
    elif kind in LISTS:
        item, low, high = LISTS[kind]
        if not isinstance(value, list) or not low <= len(value) <= high:
            raise _bad(field, f"a list of {low} to {high} items" if low != high else f"a list of {low} items", value)
        for i, v in enumerate(value):
            if item == "step":
                _step(f"{field}[{i}]", i, v)
            else:
                _check(f"{field}[{i}]", item, v)
    elif kind == "step":
        _step(field, 0, value)
    elif kind == "token":
        with _as_ours():
            export._fields(field, value, export.TOKEN)
    elif kind in WHOLE:
        _whole(field, kind, value)
    elif kind in ("text", "model"):  # (a lone surrogate was refused with the JSON)
        if not isinstance(value, str):
            raise _bad(field, "text", value)
        if kind == "model" and len(value) > MAX_MODEL_CHARS:
            raise _bad(field, f"a name of at most {MAX_MODEL_CHARS} characters", value)
    elif kind in ("format", "version", "part", "mode"):
        allowed = {"format": (FORMAT,), "version": (VERSION,), "part": PARTS, "mode": MODES}[kind]
        if isinstance(value, bool) or value not in allowed:
            raise _bad(field, " or ".join(map(repr, allowed)), value)
    else:  # the lab's scalars: int, str, bool, p, number, number or null
        with _as_ours():
            export._check(field, kind, value)


def _step(field: str, step: int, value) -> None:
    """A step record (a knock-out's before and after: step 0; a steered run's: 0, 1, ...), checked as a run's is."""
    with _as_ours(f"records[{step}]", field):
        export._record(step, value)


def _object(field: str, value, schema: dict) -> None:
    if not isinstance(value, dict):
        raise _bad(field or "the file", "an object", value)
    at = f"{field}." if field else ""
    for name in value:
        if name not in schema:
            raise PageInputError("iv_file_unknown", field=f"{at}{name}"[:80], known=", ".join(schema))
    for name, kind in schema.items():
        if name not in value:
            raise PageInputError("iv_file_missing", field=f"{at}{name}")
        _check(f"{at}{name}", kind, value[name])


def _agrees(d: dict) -> None:
    """What the schema cannot say: the parts' lists as long as each other, a head where a head is knocked out, the
    stages the charts read, where the steered run parted."""
    a = d["attribution"]
    if a is not None:
        if not len(a["attention"]) == len(a["mlp"]) == len(a["lens"]):
            raise _bad("attribution.mlp", f"{len(a['attention'])} numbers (one per block, as attention)", len(a["mlp"]))
        if a["head_block"] > len(a["attention"]):
            raise _bad("attribution.head_block", f"a block from 1 to {len(a['attention'])}", a["head_block"])
    k = d["knockout"]
    if k is not None:
        if (k["target"]["kind"] == "head") != (k["target"]["head"] is not None):
            raise _bad("knockout.target.head", "a head for kind head, null for the others", k["target"]["head"])
        for side in ("before", "after"):
            if not k[side]["candidates"] or "raw" not in [s["name"] for s in k[side]["stages"]]:
                raise _bad(f"knockout.{side}", "a step with candidates and its stages from raw", "none")
    s = d["steer"] and d["steer"]["result"]
    if s and s["parted_at"] is not None and s["parted_at"] >= min(len(s["plain"]), len(s["steered"])):
        raise _bad("steer.result.parted_at", "null or a step both runs have", s["parted_at"])


def parse_interventions(data: bytes | str) -> SavedInterventions:
    """An intervention file's bytes -> the checked results. Raises InputError (a ValueError) naming the field."""
    if len(data) > limits.MAX_RUN_FILE_BYTES:  # the upload route's limit (page.py) and a run file's
        raise PageInputError("iv_file_size", size=len(data), limit=limits.MAX_RUN_FILE_BYTES)
    try:
        d = json.loads(data)
        json.dumps(d, ensure_ascii=False).encode("utf-8")  # a lone surrogate ("\ud800") is not text
    except (ValueError, UnicodeError, RecursionError) as e:  # (RecursionError: lists nested thousands deep)
        raise PageInputError("iv_file_json", error=str(e)[:80]) from None
    if isinstance(d, dict) and d.get("kind") == FORMAT and "version" in d:
        _check("version", "version", d["version"])  # a newer file says so before its fields do
    _object("", d, SCHEMAS["file"])
    _agrees(d)
    patch, steer = d["patch"] or {}, d["steer"] or {}
    return SavedInterventions(
        model=d["model"], prompt=d["prompt"], chat=d["chat"],
        attribution=Attribution.from_dict(d["attribution"]) if d["attribution"] else None,
        knockout=KnockoutResult.from_dict(d["knockout"]) if d["knockout"] else None,
        patch=PatchResult.from_dict(patch["result"]) if patch else None, source=patch.get("source", ""),
        steer=SteerResult.from_dict(steer["result"]) if steer else None,
        steer_prompts=tuple(steer.get(k, "") for k in ("prompt", "towards", "away")))


# ---- the views: the section's own text and charts, no model ---------------------------------------------------


def loaded_line(model: str, lang: str = "en") -> str:
    """The line under each loaded result: the model the file was made on (a visitor's text: escaped)."""
    name = escape_markdown_cell(model[:MAX_MODEL_CHARS]) if model.strip() else "?"
    return tr(lang, "intervene.files.loaded", model=f"<code>{name}</code>")


def views_of(saved: SavedInterventions, lang: str = "en", view: View | None = None) -> dict:
    """The section's views of a loaded file, by InterveneComponents' field names (as its handlers draw them; a kind
    the file lacks: its empty view), the boxes the results were made from, and the section's State."""
    note = loaded_line(saved.model, lang)
    said = lambda markdown: f"{markdown}\n\n{note}"
    a, k, p, s = saved.attribution, saved.knockout, saved.patch, saved.steer
    out = {
        "state": {"key": (saved.prompt, saved.chat, saved.model), "attribution": a} if a else None,
        "attribution_md": said(text.attribution_markdown(a, lang)) if a else "",
        "attribution_plot": charts.attribution_figure(a, lang),
        "knockout_md": said(text.knockout_markdown(k, lang)) if k else "",
        "knockout_plot": charts.knockout_figure(k, lang),
        "stages_plot": stage_chart(k.after, view or View(), lang) if k else empty_figure(
            tr(lang, "intervene.empty.stages"), 200),
        "patch_md": said(text.patch_markdown(p, saved.source, p.tokens, lang)) if p else "",
        "patch_plot": charts.patch_figure(p, p.tokens if p else (), lang, 240),
        "steer_md": said(text.steer_markdown(s, lang)) if s else "",
    }
    if not (a or k or p or s):
        out["attribution_md"] = note
    if p:
        out["source"] = saved.source
    if s:
        out |= dict(zip(("steer_prompt", "towards", "away"), saved.steer_prompts))
    return out


# ---- the accordion ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilesComponents:
    results: gr.State  # the page's Shown: its results (remember's dict) are what Export writes
    export_btn: gr.Button
    json_file: gr.File
    upload: gr.File


def build_files(results: gr.State) -> FilesComponents:
    """The accordion, closed, in the current Blocks context (at the end of the Intervene section); `results`: the
    section's State its handlers keep their results in (intervene_shown.Shown)."""
    with gr.Accordion(T("intervene.files.title"), open=False, elem_id="iv-files"):
        gr.Markdown(T("intervene.files.note"), elem_classes=["ntp-note"])
        with gr.Row():
            export_btn = gr.Button(T("intervene.files.export"), size="sm", scale=0, elem_id="iv-export")
            json_file = gr.File(label=T("intervene.files.json"), interactive=False, elem_id="iv-json")
        upload = gr.File(label=T("intervene.files.import"), file_types=[".json"], type="binary", elem_id="iv-import")
    return FilesComponents(results, export_btn, json_file, upload)


def export_file(results: dict | None, lang: str = "en") -> str:
    """The path of the kept results' JSON, written to a fresh temporary folder Gradio serves."""
    if not has_results(results):
        raise gr.Error(tr(lang, "intervene.files.nothing"), print_exception=False)
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", results["model"] or "model")[:40]
    path = Path(tempfile.mkdtemp(prefix="ntp-interventions-")) / f"interventions-{model}.json"
    path.write_text(exported_json(results), encoding="utf-8")
    return str(path)


def wire_files(iv: InterveneComponents, files: FilesComponents, language: gr.Radio | None = None,
               view: gr.State | None = None) -> None:
    """Export writes the kept results; Import checks a file and draws it in the section's views (and keeps it)."""
    lang = [language] if language is not None else [gr.State("en")]
    names = ("state", "attribution_md", "attribution_plot", "knockout_md", "knockout_plot", "stages_plot", "patch_md",
             "patch_plot", "steer_md", "source", "steer_prompt", "towards", "away")

    def do_export(kept, lang_value):
        return {files.json_file: export_file(kept.results, lang_value)}

    def do_import(data, kept, lang_value, shown=None):
        if not data:  # the file was cleared
            return {files.results: gr.skip()}
        try:
            saved = parse_interventions(data)
        except ValueError as e:
            raise user_error(e, lang_value) from None
        views = views_of(saved, lang_value, shown if isinstance(shown, View) else None)
        return {files.results: kept.loaded(results_of(saved)),
                **{getattr(iv, name): value for name, value in views.items()}}

    hidden = dict(api_visibility="private", show_progress="hidden")
    files.export_btn.click(do_export, [files.results, *lang], [files.json_file], **hidden)
    files.upload.upload(do_import, [files.upload, files.results, *lang, *([view] if view is not None else [])],
                        [files.results, *(getattr(iv, name) for name in names)], **hidden)


__all__ = ["FORMAT", "VERSION", "FilesComponents", "SavedInterventions", "build_files", "exported_json",
           "has_results", "parse_interventions", "remember", "results_of", "views_of", "wire_files"]
