"""Save a lab run to files and load one back: the "Run files" panel under the lab.

Export writes the run kept in the page's State (no model work) as JSON (playground/lab/export.py) and its
token table as CSV; the charts download as PNG from Plotly's own toolbar (the camera icon on each chart).
Import reads an uploaded JSON run, checks it strictly, and replays it in the lab with no model at all: the
chips, charts and scrubber come from the records, exactly as after a live run.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import gradio as gr

from ..common.errors import user_error
from ..common.i18n import T, tr
from ..common.text import escape_html
from .chips import token_chips_html
from .components import LabComponents
from .export import SETTINGS, parse_run, run_json, token_table_csv
from .run import Run, status_markdown
from .scrubber import scrub_update
from .view import View, draw_chart, run_chart, stage_chart


def _file_name(run: Run, suffix: str) -> str:
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", run.model or "model")[:40]
    return f"run-{model}-seed{run.records[0].seed}-{len(run.records)}-steps.{suffix}"


def export_files(state: Run, lang: str = "en") -> tuple[str, str]:
    """(JSON path, CSV path) of the run on the page, written to a fresh temporary folder Gradio serves."""
    if not state.records or state.request is None:
        raise gr.Error(tr(lang, "lab.files.nothing"), print_exception=False)
    records = list(state.records)  # a snapshot: a streaming run may append while we write
    folder = Path(tempfile.mkdtemp(prefix="ntp-run-"))
    run = Run(state.request, records, model=state.model)
    json_path, csv_path = folder / _file_name(run, "json"), folder / _file_name(run, "csv")
    branch = (state.branch_root, state.branch_path) if state.branch_path else None
    json_path.write_text(run_json(records, state.request, state.model, state.stop_requested, branch), encoding="utf-8")
    csv_path.write_text(token_table_csv(records, lang), encoding="utf-8")
    return str(json_path), str(csv_path)


def imported_run(data: bytes, lang: str = "en"):
    """(the Run the lab keeps, the SavedRun) of an uploaded file; raises InputError naming the field."""
    saved = parse_run(data)
    finished_early = saved.stopped_by_you or saved.records[-1].stop_reason is None
    run = Run(saved.request, list(saved.records), stop_requested=finished_early, lang=lang, model=saved.model,
              branch_root=saved.root, branch_path=saved.path)
    return run, saved


def build_run_files(lab: LabComponents, language) -> dict:
    """The panel, wired to the lab's components (build_lab's) and the page's language picker."""
    with gr.Accordion(T("lab.files.title"), open=False, elem_id="run-files"):
        gr.Markdown(T("lab.files.note"), elem_classes=["ntp-note"])
        with gr.Row():
            export_btn = gr.Button(T("lab.files.export"), size="sm", scale=0, elem_id="export-run")
            json_file = gr.File(label=T("lab.files.json"), interactive=False, elem_id="run-json")
            csv_file = gr.File(label=T("lab.files.csv"), interactive=False, elem_id="run-csv")
        upload = gr.File(label=T("lab.files.import"), file_types=[".json"], type="binary", elem_id="import-run")

    views = [lab.run_state, lab.chips, lab.status, lab.stage_plot, lab.draw_plot, lab.run_plot, lab.scrub]
    controls = [lab.control(k) for k in SETTINGS]

    def do_export(state: Run, lang):
        json_path, csv_path = export_files(state, lang)
        return {json_file: json_path, csv_file: csv_path}

    def do_import(data, lang, shown: View):
        if not data:  # the file was cleared
            return {lab.status: gr.skip()}
        try:
            run, saved = imported_run(data, lang)
        except ValueError as e:
            raise user_error(e, lang) from None
        run.view = shown
        note = tr(lang, "lab.status.imported", model=escape_html(saved.model or "?"))
        return {
            lab.run_state: run, lab.chips: token_chips_html(run.records, lang=lang),
            lab.status: f"{status_markdown(run, lang=lang)} · {note}",
            lab.stage_plot: stage_chart(run.records[-1], shown, lang),
            lab.draw_plot: draw_chart(run.records[-1], shown, lang),
            lab.run_plot: run_chart(run.records, None, shown, lang), lab.scrub: scrub_update(run.records),
            **{lab.control(k): saved.controls[k] for k in SETTINGS},
        }

    export_btn.click(do_export, [lab.run_state, language], [json_file, csv_file], api_name="export_run",
                     show_progress="hidden")
    upload.upload(do_import, [upload, language, lab.view], [*views, *controls], api_name="import_run", show_progress="hidden")
    return {"export": export_btn, "json_file": json_file, "csv_file": csv_file, "upload": upload}
