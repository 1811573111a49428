"""Tables as a gr.Dataframe hands them over, read once for every table of the page (the engine's rows, the
Compare columns, the toy softmax's logits). An API caller can send anything where a table goes; Gradio's own
check of a Dataframe answers a malformed call with a bare error that names nothing, so the tables' events
take the raw value (`parsed_by_us`) and `table_cells` says what was wrong."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the pure readers below need no Gradio
    import gradio as gr


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


__all__ = ["parsed_by_us", "table_cells"]
