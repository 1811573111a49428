"""The batches the Engine and Compare scenes run when they open, in each language, as their tabs' Run will ask for
them: what the page keeps at start so that those scenes show at once (playground/common/kept_batches.py)."""

from __future__ import annotations

from collections.abc import Iterable

from model_service.records.settings import Request

from ..common.i18n import LESSON_PROMPTS
from ..common.kept_batches import keepable
from ..compare import columns as compare
from ..compare.handlers import TOP_N as COMPARE_TOP_N
from ..engine.tab import TOP_N as ENGINE_TOP_N
from ..engine.table import parse_table, table_value
from .links import parse_query
from .page_state import WHOLE_PAGE


def scene_batch(tab: str, query, lang: str) -> tuple[tuple[Request, ...], int] | None:
    """(the requests, the candidates kept per step) that opening a scene on `tab` runs in `lang`; None for a tab
    that runs no batch, or settings its Run would refuse."""
    values, problems = parse_query(dict(query))
    if problems or tab not in ("engine", "compare"):
        return None
    values = {**WHOLE_PAGE, **values}
    try:
        if tab == "engine":
            return tuple(parse_table(table_value(values["engine"], lang), lang)[1]), ENGINE_TOP_N
        prompt = values["compare_prompt"]
        if prompt in LESSON_PROMPTS.values():  # a lesson prompt follows the page's language (page_state.py)
            prompt = LESSON_PROMPTS[lang]
        comparison = compare.parse_comparison(prompt, compare.table_value(values["compare_table"], lang),
                                              values["compare_seed"], values["compare_max_new"], lang)
        return comparison.requests, COMPARE_TOP_N
    except ValueError:
        return None


def scene_batches(scenes, langs: Iterable[str]) -> list[tuple[tuple[Request, ...], int]]:
    """Every Engine and Compare scene's batch that can be kept (each request seeded or greedy), in each language,
    once."""
    out = []
    langs = list(langs)
    for scene in scenes:
        if not scene.run:
            continue
        for lang in langs:
            batch = scene_batch(scene.tab, scene.query, lang)
            if batch is not None and keepable(batch[0]) and batch not in out:
                out.append(batch)
    return out
