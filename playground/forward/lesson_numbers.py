"""The lessons' numbers next to ours: the lessons quote Llama-3.1-8B (6 ids with the begin marker,
33 hidden states of 4096, logits (1, 6, 128256), an LM head of about 1 GB at bf16); the room runs a
smaller model. Both columns are arithmetic on configs: Llama's from assets/llama-3.1-8b.json (its public
config.json values, no weights), ours from the live model's ModelInfo. Pure: a record in, Markdown out,
in the page's language (the forward.numbers.* keys).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from ..common.i18n import tr
from ..common.text import escape_markdown_cell, nbytes

ASSET = Path(__file__).resolve().parents[2] / "assets" / "llama-3.1-8b.json"
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}


@cache
def lesson_model() -> dict:
    """The asset as shipped: {"name", "config": {...}, "lesson": {"prompt", "pieces", ...}}."""
    return json.loads(ASSET.read_text(encoding="utf-8"))


def _column(vocab: int, d: int, layers: int, ids: int | None, dtype: str, bos: bool, lang: str) -> list[str]:
    size = DTYPE_BYTES.get(dtype)
    head = f"{vocab:,} × {d:,}" + (", " + tr(lang, "forward.numbers.head_size", size=nbytes(vocab * d * size), dtype=dtype)
                                  if size else "")
    return [
        "—" if ids is None else tr(lang, "forward.numbers.ids.bos" if bos else "forward.numbers.ids.no_bos", ids=ids),
        tr(lang, "forward.numbers.hidden", states=layers + 1, d=d, layers=layers),
        "—" if ids is None else f"(1, {ids}, {vocab:,})",
        head,
        "—" if ids is None else nbytes(ids * vocab * 4),
    ]


def lesson_markdown(info, lesson_ids: int | None, lang: str = "en") -> str:
    """A table: the live model (ModelInfo) beside the lessons' Llama-3.1-8B, for the lesson's prompt.
    lesson_ids: how many ids the live model's tokenizer gives that prompt (None: unknown yet)."""
    llama = lesson_model()
    c, lesson = llama["config"], llama["lesson"]
    ours = _column(info.vocab_size, info.hidden_size, info.num_layers, lesson_ids, info.dtype, info.adds_bos, lang)
    theirs = _column(c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], len(lesson["pieces"]),
                     c["torch_dtype"], lesson["adds_bos"], lang)
    rows = [tr(lang, "forward.numbers.row.ids", prompt=escape_markdown_cell(lesson["prompt"])),
            tr(lang, "forward.numbers.row.hidden"), tr(lang, "forward.numbers.row.logits"),
            tr(lang, "forward.numbers.row.head"), tr(lang, "forward.numbers.row.cost")]
    room = tr(lang, "forward.numbers.room", model=escape_markdown_cell(info.name))
    lessons = tr(lang, "forward.numbers.lessons", model=escape_markdown_cell(llama["name"]))
    lines = [tr(lang, "forward.numbers.intro"), "", f"| | {room} | {lessons} |", "|:--|--:|--:|"]
    lines += [f"| {row} | {a} | {b} |" for row, a, b in zip(rows, ours, theirs)]
    return "\n".join(lines)


__all__ = ["ASSET", "lesson_markdown", "lesson_model"]
