"""The Intervene section's patching grid: a second prompt's stream copied in at one (position, block), one cell at a
time as the learner clicks them, or every cell at once.

    a new trace ──► blank_grid(): every (position, block) of the traced prompt, blank, each a click away
    a click on a cell ──► patch_cell(): that one cell (one forward pass), added to the cells patched so far
    Patch every cell ──► patch_every_cell(): the whole grid (32 cells a pass)

The cells patched so far are kept in the section's patch State with what they were computed for (the prompt, the
source, the candidate, the model): a click under other inputs starts a new grid. A click's cell arrives as text in a
hidden box, written by the page (common/plot_clicks.py); its handler checks it like any other input.
"""

from __future__ import annotations

from dataclasses import replace

from model_service.records import validation
from playground import limits

from ..common.errors import user_error
from ..common.i18n import PATCH_SOURCES, swapped_default, tr
from ..common.plot_clicks import click_js, clicked_value
from . import intervene_charts as charts
from . import intervene_text as text

# a click on a cell of the grid: its [hover, position, block] customdata (intervene_charts.patch_figure)
PATCH_CLICK_JS = click_js("iv-patch-grid", "iv-patch-cell", "point.customdata && point.customdata.length === 3 ? "
                          "`${point.customdata[1]},${point.customdata[2]}` : null")


def grid_cells(tokens: int, blocks: int) -> list[tuple[int, int]]:
    """Every (position, block) of a prompt, its last positions only when the whole grid is too big."""
    positions = range(max(0, tokens - limits.MAX_PATCH_CELLS // blocks), tokens)
    return [(p, b) for p in positions for b in range(1, blocks + 1)]


def blank_grid(iv, trace, lang: str = "en") -> dict:
    """The traced prompt's grid with no cell patched yet (no model work), and no cells kept."""
    grid = grid_cells(len(trace.tokens), trace.num_layers)
    return {iv.patch_md: tr(lang, "intervene.patch.click"), iv.patch_state: None,
            iv.patch_plot: charts.patch_figure(None, trace.tokens, lang, 240, grid)}


def _inputs(prompt, chat, source, lang: str):
    """The checked prompt, chat flag and source (the other language's default source read as this one's)."""
    prompt, chat = validation.text("prompt", prompt), validation.boolean("chat template", chat)
    source = validation.text("source", source)
    return prompt, chat, swapped_default(source, lang, PATCH_SOURCES) or source


def _views(iv, kept: dict, results, lang: str, picked=None) -> dict:
    """The grid's views; the result kept in the page's Shown (`results`) for the section's file."""
    result, source = kept["result"], kept["key"][2]
    line = text.patch_markdown(result, source, result.tokens, lang)
    if picked is not None:
        cell = next(c for c in result.cells if (c.position, c.block) == picked)
        line = text.patch_cell_markdown(result, cell, lang) + "\n\n" + line
    prompt, chat, source, _, model = kept["key"]
    shown = results.keep("patch", {"prompt": prompt, "chat": chat, "source": source, "model": model}, result)
    return {iv.patch_state: kept, iv.patch_md: line, iv.results: shown,
            iv.patch_plot: charts.patch_figure(result, result.tokens, lang, 240, kept["grid"], picked)}


def patch_every_cell(iv, service, prompt, chat, source, candidate, results, lang="en"):
    """Patch every cell of the grid from the source prompt into the prompt in the tab's box."""
    try:
        prompt, chat, source = _inputs(prompt, chat, source, lang)
        grid = grid_cells(len(service.encode(prompt, chat)), service.info.num_layers)
        results.ask("patch", (service.info.name, prompt, chat))
        result = service.patch(prompt, source, grid, chat, candidate_id(candidate))
    except (ValueError, RuntimeError) as e:
        results.ask("patch", None)
        raise user_error(e, lang) from None
    key = (prompt, chat, source, candidate_id(candidate), service.info.name)
    return _views(iv, {"key": key, "grid": grid, "result": result}, results, lang)


def patch_cell(iv, service, prompt, chat, source, candidate, clicked, kept, results, lang="en"):
    """A clicked cell: that one (position, block) patched, beside the cells patched before for the same inputs."""
    try:
        value = clicked_value("cell", clicked)
        if value is None:
            return {}
        position, block = _cell(value)
        prompt, chat, source = _inputs(prompt, chat, source, lang)
        key = (prompt, chat, source, candidate_id(candidate), service.info.name)
        grid = grid_cells(len(service.encode(prompt, chat)), service.info.num_layers)
        if (position, block) not in grid:
            raise ValueError(tr(lang, "intervene.patch.off_grid", position=position, block=block))
        results.ask("patch", (service.info.name, prompt, chat))
        one = service.patch(prompt, source, [(position, block)], chat, candidate_id(candidate))
    except (ValueError, RuntimeError) as e:
        results.ask("patch", None)
        raise user_error(e, lang) from None
    if kept is not None and kept["key"] == key:
        cells = [c for c in kept["result"].cells if (c.position, c.block) != (position, block)] + list(one.cells)
        one = replace(one, cells=tuple(cells), ms=round(kept["result"].ms + one.ms, 1))
    return _views(iv, {"key": key, "grid": grid, "result": one}, results, lang, (position, block))


def _cell(value: str) -> tuple[int, int]:
    """"position,block" as the page's click writes it."""
    parts = value.split(",")
    if len(parts) != 2:
        raise ValueError(f"cell must be position,block, got {value[:40]!r}")
    return (int(validation.number("position", parts[0].strip(), integer=True, low=0)),
            int(validation.number("block", parts[1].strip(), integer=True, low=1)))


def candidate_id(value):
    """A candidate box's token id as the service takes it (it checks it against the vocabulary): blank is None."""
    return None if validation.is_blank(value) else value


__all__ = ["PATCH_CLICK_JS", "blank_grid", "candidate_id", "grid_cells", "patch_cell", "patch_every_cell"]
