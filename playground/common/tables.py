"""Tables as a gr.Dataframe hands them over, read once for every table of the page (the engine's rows, the
Compare columns, the toy softmax's logits). An API caller can send anything where a table goes; Gradio's own
check of a Dataframe answers a malformed call with a bare error that names nothing, so the tables' events
take the raw value (`parsed_by_us`) and `table_cells` says what was wrong.

Both settings tables (the engine's rows, the Compare columns) end with the penalty columns and a "more samplers"
cell, which came after their first links and scenes: a shorter row (`padded`) takes their defaults, and a link
leaves them out where they are the defaults (`trimmed`), so old links and new ones read alike. The "more samplers"
cell holds every other knob as name=value pairs separated by spaces ("typical_p=0.9 dry_multiplier=0.8"); a custom
chain goes in the order cell ("top_k > min_p > temperature")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from model_service.records import validation
from model_service.records.knobs import BY_NAME, KNOBS
from model_service.records.settings import SamplingSettings
from model_service.records.validation import is_blank

if TYPE_CHECKING:  # the pure readers below need no Gradio
    import gradio as gr

# The penalty columns: the three penalty sliders, field -> English header (the knobs' names, as learners meet them,
# in every language)
PENALTY_NAMES = {k.name: k.text for k in KNOBS if k.stage == "penalties" and k.control == "slider"}
PENALTY_COLUMNS = tuple(PENALTY_NAMES.values())
PENALTY_DEFAULTS = tuple(int(BY_NAME[name].default) for name in PENALTY_NAMES)  # 1, 0, 0: all off
MORE_COLUMN = "more samplers"
# the knobs the "more samplers" cell takes, as the API names them: every knob beyond the lesson's but the penalty
# columns and the custom chain (which goes in the order cell), in the rows' order (records/knobs.py)
MORE_KNOBS = tuple(k.name for k in KNOBS if k.group not in ("lesson", "order") and k.name not in PENALTY_NAMES)
TAIL_COLUMNS = (*PENALTY_COLUMNS, MORE_COLUMN)  # what a settings table has after the lesson's columns
TAIL_DEFAULTS = (*PENALTY_DEFAULTS, "")


def parsed_by_us(table: gr.Dataframe) -> gr.Dataframe:
    """Let the table's input reach our parser unchecked by Gradio: Gradio's own pydantic check of a table
    answers a malformed API call with "1 validation error for DataframeData", which names no row and no
    field. The documented API schema and the front end stay the Dataframe's. Events that read the table
    pass preprocess=False."""
    table._api_info_cache = table.api_info()
    table.data_model = None  # read by Gradio before preprocess; preprocess=False does the rest
    return table


def table_cells(table) -> list[list]:
    """The rows of what gr.Dataframe gives (a list of lists, a pandas DataFrame, its raw {"data": ...}) as
    lists of cells; a ValueError for anything that is not rows."""
    if table is None:
        return []
    if isinstance(table, dict):
        table = table.get("data") or []
    elif hasattr(table, "columns") and hasattr(table, "astype"):  # pandas: NaN stays NaN, as object
        table = table.astype(object).values.tolist()
    elif hasattr(table, "tolist"):
        table = table.tolist()
    if not isinstance(table, (list, tuple)):
        raise ValueError(f"the table must be a list of rows, got {type(table).__name__}")
    return [list(row) if isinstance(row, (list, tuple)) else [row] for row in table]


def padded(cells: list, width: int, tail=TAIL_DEFAULTS) -> list:
    """A row cut or padded to `width` cells. A short one gets blanks, except in the last len(tail) columns, which
    take `tail` (an old row, from before those columns: their defaults); a wholly blank row stays blank."""
    cells = list(cells[:width])
    if len(cells) == width or all(map(is_blank, cells)):
        return cells + [None] * (width - len(cells))
    fill = [None] * (width - len(tail)) + list(tail)
    return cells + fill[len(cells):]


def trimmed(cells: list, tail=TAIL_DEFAULTS) -> list:
    """A row without the cells at its end that are blank or hold `tail`'s defaults (the last len(tail) columns):
    what a link writes, as short as the row's old form where those columns are off."""
    cells, first = list(cells), len(cells) - len(tail)
    while len(cells) > first and (is_blank(cells[-1]) or cells[-1] == tail[len(cells) - 1 - first]):
        cells.pop()
    return cells


def tail_settings(cells: list) -> dict:
    """The penalty and "more samplers" cells at a (padded) row's end as parse_settings' keyword arguments."""
    penalties = cells[len(cells) - len(TAIL_COLUMNS): len(cells) - 1]
    return {**dict(zip(PENALTY_NAMES, penalties)), **parse_more(cells[-1])}


def tail_cells(settings: SamplingSettings) -> list:
    """A row's penalty and "more samplers" cells for these settings (tail_settings reads them back)."""
    return [*(getattr(settings, name) for name in PENALTY_NAMES), more_text(settings)]


def more_text(settings: SamplingSettings) -> str:
    """The "more samplers" cell: each MORE_KNOBS knob away from its default, as name=value, separated by spaces."""
    off, parts = SamplingSettings(), []
    for name in MORE_KNOBS:
        value = getattr(settings, name)
        if value == getattr(off, name):
            continue
        if name == "logit_bias":
            value = ";".join(f"{t}:{b:g}" for t, b in value)
        elif name == "dry_sequence_breakers":
            value = validation.format_stop_text(value) or '""'
        else:
            value = f"{value:g}"
        parts.append(f"{name}={value}")
    return " ".join(parts)


def parse_more(cell) -> dict:
    """The "more samplers" cell -> {knob: its text} (the settings' validators check each value, naming it); a
    ValueError names the cell for a part that is not name=value or a name it does not take."""
    if is_blank(cell):
        return {}
    if not isinstance(cell, str):
        raise validation.InputError("more_cell", field=MORE_COLUMN, got=repr(cell), knobs=", ".join(MORE_KNOBS))
    out = {}
    for part in cell.split():
        name, sep, value = part.partition("=")
        if not sep or name not in MORE_KNOBS or name in out:
            raise validation.InputError("more_cell", field=MORE_COLUMN, got=repr(part), knobs=", ".join(MORE_KNOBS))
        out[name] = "" if (name == "dry_sequence_breakers" and value == '""') else value
    return out


__all__ = ["MORE_COLUMN", "MORE_KNOBS", "PENALTY_COLUMNS", "PENALTY_DEFAULTS", "PENALTY_NAMES", "TAIL_COLUMNS",
           "TAIL_DEFAULTS", "more_text", "padded", "parse_more", "parsed_by_us", "table_cells", "tail_cells",
           "tail_settings", "trimmed"]
