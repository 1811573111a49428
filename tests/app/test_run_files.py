"""A lab run saved as files and loaded back through the API (/export_run, /import_run): the same chips,
status and charts at every step, and a bad file refused naming the field."""

from __future__ import annotations

import csv
import json

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from .lab_args import KNOBS_OFF_BY_NAME, untagged

LESSON = "The capital of France is"
ARGS = dict(chat=False, temperature=0.8, top_k=0, top_p=0.95, min_p=0.0, seed="3", max_new=5, stop="", order="hf", **KNOBS_OFF_BY_NAME)


def figure(plot) -> dict:
    """A chart's figure as it reads, without the mark of when it was drawn (layout.meta: handlers.step_views)."""
    spec = json.loads(plot["plot"])
    spec["layout"].pop("meta", None)
    return spec


def test_an_exported_run_imports_and_scrubs_identically(client, tmp_path):
    live = client.predict(LESSON, *ARGS.values(), api_name="/generate")
    json_path, csv_path = client.predict(api_name="/export_run")
    saved = json.loads(open(json_path, encoding="utf-8").read())
    assert saved["seed"] == 3 and saved["settings"]["top_p"] == 0.95 and len(saved["records"]) == 5
    rows = list(csv.reader(open(csv_path, encoding="utf-8")))
    assert [r[0] for r in rows] == ["step", "1", "2", "3", "4", "5"]
    scrubbed = [client.predict(i, api_name="/scrub") for i in (2, 5)]

    client.predict(LESSON, *{**ARGS, "seed": "9", "max_new": 2}.values(), api_name="/generate")  # another run
    chips, status, stage, draw, run_plot, scrub, *controls = client.predict(
        handle_file(json_path), api_name="/import_run")
    assert chips == untagged(live[0]) and status.startswith(live[1].split(" · forward")[0])  # the same last step
    assert status.endswith("replayed from a file (drawn by SmolLM2-135M-Instruct), no model needed")
    assert figure(stage) == figure(live[2]) and figure(draw) == figure(live[3])
    assert controls[:7] == [LESSON, False, 0.8, 0, 0.95, 0.0, "3"]
    for i, (chips_then, status_then, stage_then, draw_then, _) in zip((2, 5), scrubbed):
        chips_now, status_now, stage_now, draw_now, _ = client.predict(i, api_name="/scrub")
        assert (chips_now, status_now) == (chips_then, status_then)
        assert figure(stage_now) == figure(stage_then) and figure(draw_now) == figure(draw_then)


def test_a_bad_run_file_is_refused_naming_the_field(client, tmp_path):
    client.predict(LESSON, *ARGS.values(), api_name="/generate")
    json_path, _ = client.predict(api_name="/export_run")
    d = json.loads(open(json_path, encoding="utf-8").read())
    d["records"][2]["draw"]["u"] = "0.5; drop table"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(AppError, match=r"records\[2\]\.draw\.u must be a number"):
        client.predict(handle_file(str(bad)), api_name="/import_run")
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(AppError, match="Tệp lượt chạy không phải JSON"):
        client.predict(handle_file(str(bad)), "vi", api_name="/import_run")
