"""The Intervene section's results as a file and back (playground/forward/intervene_files.py): hand-made records of
all four kinds come back equal and draw the same views, export → import → export gives the same text, a bad file is
refused naming the field, and the model's name (a visitor's text) is escaped in the line that names it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from model_service.records.intervention import (
    Attribution,
    Knockout,
    KnockoutResult,
    PatchCell,
    PatchResult,
    SteerResult,
)
from model_service.records.step import Token
from model_service.records.validation import InputError
from playground import limits
from playground.forward import intervene_charts as charts
from playground.forward import intervene_text as text
from playground.forward.intervene_files import (
    FORMAT,
    exported_json,
    has_results,
    parse_interventions,
    remember,
    results_of,
    views_of,
)
from playground.lab.view import View, stage_chart
from tests.unit.lab.test_charts import make_record

PROMPT, SOURCE = "The capital of France is", "The capital of Italy is"
STEER = {"prompt": "I think that this movie is", "towards": "I love <b>this</b>", "away": "I hate this"}


def attribution() -> Attribution:
    return Attribution(candidate=Token(7, " Paris"), rival=Token(8, " <b>the</b>"), logit_diff=2.0, scale=25.0,
                       embedding=-0.5, attention=(0.25, 1.0), mlp=(-0.25, 1.5), lens=(-3.0, 2.0), bias=0.0,
                       residual_error=1e-7, head_block=2, heads=(0.75, 0.25), head_note="", softcap=None, tokens=5,
                       ms=12.0)


def knockout() -> KnockoutResult:
    before, after = make_record(), make_record(chosen=1)
    return KnockoutResult(Knockout("head", 2, 1, "mean"), before, after, before.candidates[0], 0.5, 0.2, 1, 2, 3.25,
                          80.0, 170.0)


def patch() -> PatchResult:
    tokens = (Token(1, "The"), Token(2, " capital"), Token(3, " is"))
    cells = tuple(PatchCell(p, b, 0.1, 0.05 * (p + b), Token(9, " Rome"), 0.3) for p in range(3) for b in (1, 2))
    return PatchResult(Token(7, " Paris"), Token(9, " Rome"), tokens, (0.8, 0.001), (0.01, 0.4), cells, 10.0)


def steer() -> SteerResult:
    plain = tuple(make_record(step=i, u=0.2 + 0.1 * i) for i in range(3))
    steered = (plain[0], make_record(step=1, chosen=1, u=0.3), make_record(step=2, u=0.4))
    return SteerResult(10, 1.5, 3.0, 40.0, plain, steered, 1, 11, 99.5)


def kept(model: str = "SmolLM2-135M-Instruct") -> dict:
    results = remember(None, "attribution", {"prompt": PROMPT, "chat": False, "model": model}, attribution())
    results = remember(results, "knockout", {"prompt": PROMPT, "chat": False, "model": model}, knockout())
    results = remember(results, "patch", {"prompt": PROMPT, "chat": False, "source": SOURCE, "model": model}, patch())
    return remember(results, "steer", {**STEER, "model": model}, steer())


def test_all_four_kinds_come_back_equal_and_the_file_round_trips():
    first = exported_json(kept())
    saved = parse_interventions(first.encode())
    assert (saved.model, saved.prompt, saved.chat, saved.source) == ("SmolLM2-135M-Instruct", PROMPT, False, SOURCE)
    assert saved.attribution == attribution() and saved.knockout == knockout() and saved.patch == patch()
    assert saved.steer == steer() and saved.steer_prompts == tuple(STEER.values())
    assert exported_json(results_of(saved)) == first  # export → import → export: the same text
    d = json.loads(first)
    assert list(d) == ["kind", "version", "model", "prompt", "chat", "attribution", "knockout", "patch", "steer"]
    assert (d["kind"], d["version"], d["patch"]["source"], d["steer"]["towards"]) == (FORMAT, 1, SOURCE, STEER["towards"])


def test_a_loaded_file_draws_what_the_handlers_draw_and_says_where_it_came_from():
    saved = parse_interventions(exported_json(kept()))
    views = views_of(saved, "vi", View(log=True))
    note = "Mở từ một tệp được tạo trên <code>SmolLM2-135M-Instruct</code>"
    assert views["attribution_md"] == f"{text.attribution_markdown(attribution(), 'vi')}\n\n" + views["attribution_md"].split("\n\n")[-1]
    for key in ("attribution_md", "knockout_md", "patch_md", "steer_md"):
        assert note in views[key].split("\n\n")[-1], key
    assert views["knockout_md"].startswith(text.knockout_markdown(knockout(), "vi"))
    assert views["patch_md"].startswith(text.patch_markdown(patch(), SOURCE, patch().tokens, "vi"))
    assert views["steer_md"].startswith(text.steer_markdown(steer(), "vi"))
    assert views["attribution_plot"].to_json() == charts.attribution_figure(attribution(), "vi").to_json()
    assert views["knockout_plot"].to_json() == charts.knockout_figure(knockout(), "vi").to_json()
    assert views["patch_plot"].to_json() == charts.patch_figure(patch(), patch().tokens, "vi", 240).to_json()
    assert views["stages_plot"].to_json() == stage_chart(knockout().after, View(log=True), "vi").to_json()
    assert (views["source"], views["steer_prompt"], views["towards"], views["away"]) == (SOURCE, *STEER.values())
    assert views["state"] == {"key": (PROMPT, False, "SmolLM2-135M-Instruct"), "attribution": attribution()}


def test_a_kind_the_file_lacks_is_drawn_empty_and_exported_as_null():
    results = remember(None, "steer", {**STEER, "model": "m"}, steer())
    saved = parse_interventions(exported_json(results))
    assert saved.attribution is saved.knockout is saved.patch is None and saved.steer == steer()
    views = views_of(saved)
    assert views["attribution_md"] == views["knockout_md"] == views["patch_md"] == "" and views["state"] is None
    assert "source" not in views and views["steer_md"].endswith("no model ran for this.")
    assert json.loads(exported_json(results_of(saved)))["patch"] is None
    empty = parse_interventions(exported_json(None))
    assert views_of(empty)["attribution_md"].startswith("Loaded from a file made on <code>?</code>")


def test_remember_keeps_one_prompt_one_model_and_forgets_a_cleared_kind():
    results = kept()
    assert has_results(results) and not has_results(None) and not has_results(remember(None, "knockout", {}, None))
    other = remember(results, "knockout", {"prompt": "Hello", "chat": False, "model": "SmolLM2-135M-Instruct"}, knockout())
    assert other["prompt"] == "Hello" and other["attribution"] is other["patch"] is None
    assert other["steer"] == results["steer"]  # steering has its own prompt
    assert remember(results, "knockout", {}, None)["knockout"] is None  # Restore
    assert remember(results, "steer", {**STEER, "model": "gemma"}, steer())["attribution"] is None  # another model
    with pytest.raises(ValueError, match="kind must be one of"):
        remember(results, "lens", {}, None)


def test_the_model_name_is_escaped_in_the_line():
    evil = "<img src=x onerror=alert(1)>*bold* | `x`"
    saved = parse_interventions(exported_json(kept(evil)))
    line = views_of(saved)["attribution_md"].split("\n\n")[-1]
    assert "<img" not in line and "&lt;img src=x onerror=alert(1)&gt;" in line
    assert "\\*bold\\*" in line and "\\|" in line and "\\`x\\`" in line


def broken(change) -> str:
    d = json.loads(exported_json(kept()))
    change(d)
    return json.dumps(d)


@pytest.mark.parametrize("change, says", [
    (lambda d: d["patch"]["result"]["cells"][3].__setitem__("block", "2"),
     "patch.result.cells[3].block must be a whole number from 1"),
    (lambda d: d["patch"]["result"]["cells"][3].__setitem__("block", 0), "patch.result.cells[3].block must be"),
    (lambda d: d["patch"]["result"]["cells"][0].__setitem__("source_answer", 1.5),
     "patch.result.cells[0].source_answer must be a number between 0 and 1, got 1.5"),
    (lambda d: d["patch"]["result"]["clean"].pop(), "patch.result.clean must be a list of 2 items"),
    (lambda d: d["patch"]["result"]["tokens"][1].__setitem__("evil", 1), "patch.result.tokens[1].evil is not part"),
    (lambda d: d["patch"].pop("source"), "has no patch.source"),
    (lambda d: d["attribution"]["candidate"].__setitem__("id", -1), "attribution.candidate.id must be a whole number"),
    (lambda d: d["attribution"]["mlp"].pop(), "attribution.mlp must be 2 numbers"),
    (lambda d: d["attribution"].__setitem__("lens", []), "attribution.lens must be a list of 1 to"),
    (lambda d: d["attribution"].__setitem__("head_block", 3), "attribution.head_block must be a block from 1 to 2"),
    (lambda d: d["attribution"].__setitem__("scale", float("nan")), "attribution.scale must be a number"),
    (lambda d: d["attribution"].pop("softcap"), "has no attribution.softcap"),
    (lambda d: d["knockout"]["target"].__setitem__("kind", "layer"), "knockout.target.kind must be 'attention'"),
    (lambda d: d["knockout"]["target"].__setitem__("head", None), "knockout.target.head must be a head for kind head"),
    (lambda d: d["knockout"]["target"].__setitem__("mode", "rand"), "knockout.target.mode must be 'zero' or 'mean'"),
    (lambda d: d["knockout"]["before"]["stages"][1].__setitem__("probs", [0.5, 2, 0, 0, 0]),
     "knockout.before.stages[1].probs[1] must be a number between 0 and 1, got 2"),
    (lambda d: d["knockout"]["after"].pop("draw"), "has no knockout.after.draw"),
    (lambda d: d["knockout"]["after"].__setitem__("step", 1), "knockout.after.step must be 0"),
    (lambda d: d["knockout"].__setitem__("rank_before", 0), "knockout.rank_before must be a whole number from 1"),
    (lambda d: d["steer"]["result"]["steered"][2].__setitem__("step", 5), "steer.result.steered[2].step must be 2"),
    (lambda d: d["steer"]["result"]["plain"][1].__setitem__("bytes_hex", "zz"),
     "steer.result.plain[1].bytes_hex must be bytes in hex"),
    (lambda d: d["steer"]["result"].__setitem__("parted_at", 3), "steer.result.parted_at must be null or a step both"),
    (lambda d: d["steer"]["result"].__setitem__("plain", [None] * (limits.MAX_STEER_TOKENS + 1)),
     "steer.result.plain must be a list of 0 to 48 items"),
    (lambda d: d["steer"].__setitem__("towards", 3), "steer.towards must be text"),
    (lambda d: d.__setitem__("chat", "yes"), "chat must be true or false"),
    (lambda d: d.__setitem__("model", "m" * 201), "model must be a name of at most 200 characters"),
    (lambda d: d.__setitem__("extra", 1), "extra is not part of it (expected: kind, version"),
    (lambda d: d.pop("steer"), "has no steer"),
    (lambda d: d.__setitem__("kind", "next-token-playground/run"), "kind must be 'next-token-playground/interventions'"),
    (lambda d: d.__setitem__("version", 2), "version must be 1, got 2"),
    (lambda d: d.__setitem__("knockout", [1]), "knockout must be an object, got list"),
])
def test_a_bad_file_is_refused_naming_the_field(change, says):
    with pytest.raises(InputError) as caught:
        parse_interventions(broken(change))
    assert says in str(caught.value) and str(caught.value).startswith("the intervention file")


@pytest.mark.parametrize("data, says", [
    (b"not json", "the intervention file is not JSON"),
    (b"[1, 2]", "the file must be an object"),
    (b'{"kind": "\\ud800"}', "the intervention file is not JSON"),
    (b"\xff\xfe", "the intervention file is not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "the intervention file is not JSON"),
    (b" " * (limits.MAX_RUN_FILE_BYTES + 1), "the limit here is"),
])
def test_a_file_that_is_not_an_intervention_file_is_refused(data, says):
    with pytest.raises(InputError) as caught:
        parse_interventions(data)
    assert says in str(caught.value)


def test_an_error_about_an_intervention_file_reads_in_vietnamese():
    from playground.common.errors import in_language

    with pytest.raises(InputError) as caught:
        parse_interventions(broken(lambda d: d["knockout"]["after"].pop("draw")))
    assert in_language(caught.value, "vi") == "Tệp can thiệp thiếu trường knockout.after.draw"


def test_a_knockout_of_a_whole_part_has_no_head_and_a_file_of_it_round_trips():
    r = replace(knockout(), target=Knockout("mlp", 1))
    results = remember(None, "knockout", {"prompt": PROMPT, "chat": True, "model": "m"}, r)
    text_once = exported_json(results)
    assert parse_interventions(text_once).knockout == r and parse_interventions(text_once).chat is True
    with pytest.raises(InputError, match="knockout.target.head"):
        parse_interventions(text_once.replace('"head":null', '"head":2'))
