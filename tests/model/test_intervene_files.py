"""An intervention file of real records (the tiny random Llama's attribution, knock-out, patching grid and steered
run, with the lab's settings): every field passes the file's checks, the records come back equal, the views draw, and
export → import → export gives the same text (playground/forward/intervene_files.py)."""

from __future__ import annotations

import json

from model_service import SamplingSettings
from model_service.records.intervention import Knockout
from playground.forward.intervene_files import exported_json, parse_interventions, remember, results_of, views_of

PROMPT = "hello world"


def test_real_records_of_every_kind_round_trip_through_a_file(tiny_service):
    settings = SamplingSettings(temperature=0.8, top_k=5, top_p=0.9, seed=3)
    model = tiny_service.info.name
    asked = {"prompt": PROMPT, "chat": False, "model": model}
    a = tiny_service.attribute(PROMPT)
    k = tiny_service.knock_out(PROMPT, Knockout("head", 2, 1, "mean"), settings)
    cells = [(p, b) for p in range(len(tiny_service.encode(PROMPT))) for b in (1, 2)]
    p = tiny_service.patch(PROMPT, "hello earth", cells)
    s = tiny_service.steer("hello", "good", "bad", 1, 2.0, settings, 6)
    results = remember(None, "attribution", asked, a)
    results = remember(results, "knockout", asked, k)
    results = remember(results, "patch", {**asked, "source": "hello earth"}, p)
    results = remember(results, "steer", {"prompt": "hello", "towards": "good", "away": "bad", "model": model}, s)
    first = exported_json(results)
    saved = parse_interventions(first.encode())
    assert (saved.attribution, saved.knockout, saved.patch, saved.steer) == (a, k, p, s)
    assert exported_json(results_of(saved)) == first and json.loads(first)["model"] == model
    views = views_of(saved, "en")
    assert all(views[key].endswith("no model ran for this.") for key in ("attribution_md", "knockout_md", "patch_md",
                                                                         "steer_md"))
    for key in ("attribution_plot", "knockout_plot", "patch_plot", "stages_plot"):
        assert json.loads(views[key].to_json())["data"], key
