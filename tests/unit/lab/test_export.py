"""A run as a file and back (playground/lab/export.py): the same records and the same charts after the trip,
and a bad file refused with a message that names the field."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest

from model_service.records.validation import InputError
from playground import limits
from playground.lab import charts
from playground.lab.export import parse_run, run_json, token_table_csv
from playground.lab.request import DEFAULTS, KNOB_CONTROLS, parse_request

from .test_charts import make_record

REQUEST = parse_request("The capital of France is", False, 0.7, 3, 0.9, 0.0, "1", 3, "\\n|END", "hf")


def a_run():
    records = [make_record(step=i, chosen=i % 2, u=0.2 + 0.1 * i) for i in range(3)]
    records[1] = replace(records[1], piece="\\xe1\\xbb", bytes_hex="e1bb")  # half a character: hex survives
    records[2] = replace(records[2], piece="\\xa7", bytes_hex="a7", pending_hex="e1bb", stop_reason="max_tokens")
    return records


def test_a_run_comes_back_equal_and_draws_the_same_charts():
    records = a_run()
    saved = parse_run(run_json(records, REQUEST, "SmolLM2-135M-Instruct").encode())
    assert list(saved.records) == records and saved.model == "SmolLM2-135M-Instruct" and not saved.stopped_by_you
    assert saved.request == REQUEST
    assert saved.controls == {"prompt": "The capital of France is", "chat": False, "temperature": 0.7, "top_k": 3,
                              "top_p": 0.9, "min_p": 0.0, "seed": "1", "max_new_tokens": 3, "stop": "\\n|END",
                              "order": "hf", **{k: DEFAULTS[k] for k in KNOB_CONTROLS}}
    for i, r in enumerate(records):
        assert charts.stage_figure(saved.records[i]).to_json() == charts.stage_figure(r).to_json()
        assert charts.draw_figure(saved.records[i], lang="vi").to_json() == charts.draw_figure(r, lang="vi").to_json()
    assert charts.run_figure(list(saved.records), selected=1).to_json() == charts.run_figure(records, selected=1).to_json()


def test_the_file_says_model_seed_and_settings_at_the_top():
    d = json.loads(run_json(a_run(), REQUEST, "m", stopped_by_you=True))
    assert (d["format"], d["version"], d["model"], d["seed"], d["stopped_by_you"]) == (
        "next-token-playground/run", 1, "m", 1, True)
    assert d["settings"]["temperature"] == 0.7 and len(d["records"]) == 3


def test_a_run_with_a_blank_seed_imports_with_the_seed_it_drew():
    request = parse_request("Hi", False, 1.0, 0, 1.0, 0.0, "", 3, "", "hf")
    saved = parse_run(run_json(a_run(), request, "m"))
    assert saved.request.settings.seed is None and saved.controls["seed"] == "1"


def test_a_run_saved_before_the_penalties_imports_with_them_off():
    # a file from before the bias and penalties: no such settings, records without their two stages (a_run's)
    d = json.loads(run_json(a_run(), REQUEST, "m"))
    for name in ("logit_bias", "repetition_penalty", "frequency_penalty", "presence_penalty", "penalty_last_n"):
        del d["settings"][name]
    saved = parse_run(json.dumps(d))
    assert saved.request == REQUEST and saved.controls["repetition_penalty"] == 1.0 and saved.controls["logit_bias"] == ""


def test_a_run_with_penalties_and_a_bias_comes_back_with_them():
    request = parse_request("Hi", False, 0.0, 0, 1.0, 0.0, "3", 3, "", "llama.cpp", "13:-100, 42:2.5", 1.3, 0.2, 0.1, 16)
    saved = parse_run(run_json(a_run(), request, "m"))
    s = saved.request.settings
    assert saved.request == request and s.logit_bias == ((13, -100.0), (42, 2.5)) and s.penalty_last_n == 16
    assert saved.controls["logit_bias"] == "13:-100, 42:2.5" and saved.controls["repetition_penalty"] == 1.3


def test_a_custom_chain_with_dry_and_mirostats_records_comes_back_with_them():
    request = parse_request("Hi", False, 0.7, 30, 1.0, 0.05, "3", 3, "", "custom", chain="top_k > min_p > temperature",
                            dry_multiplier=0.8, dry_sequence_breakers="\\n|:")
    stages = ("raw", "logit_bias", "penalties", "dry", "top_k", "min_p", "temperature", "final")
    records = [replace(r, order="custom", adjusted=((5, -1.25),), mirostat_mu=6.5,
                       stages=tuple(replace(r.stages[0], name=n) for n in stages)) for r in a_run()]
    saved = parse_run(run_json(records, request, "m"))
    assert saved.request == request and list(saved.records) == records
    s = saved.request.settings
    assert s.chain == ("top_k", "min_p", "temperature") and s.dry_sequence_breakers == ("\n", ":")
    assert saved.controls["chain"] == "top_k, min_p, temperature" and saved.controls["dry_sequence_breakers"] == "\\n|:"
    bad = json.loads(run_json(records, request, "m"))
    bad["records"][0]["adjusted"] = [[5]]
    with pytest.raises(InputError, match=r"records\[0\]\.adjusted\[0\] must be a pair"):
        parse_run(json.dumps(bad))


def test_the_token_table_counts_steps_from_one_and_reads_characters():
    rows = list(csv.reader(io.StringIO(token_table_csv(a_run()))))
    assert rows[0][:4] == ["step", "token", "token_id", "rank"]
    assert [r[0] for r in rows[1:]] == ["1", "2", "3"]
    assert rows[1][1] == "␣Paris" and rows[2][1] == rows[3][1] == "ủ"  # the split character, not \xe1\xbb
    assert rows[1][4:6] == ["0.5", "0.75"] and rows[3][-1] == "max_tokens"


def broken(change) -> str:
    d = json.loads(run_json(a_run(), REQUEST, "m"))
    change(d)
    return json.dumps(d)


@pytest.mark.parametrize("change, says", [
    (lambda d: d["records"][1]["stages"][2].__setitem__("probs", [0.5, 2, 0, 0, 0]),
     "records[1].stages[2].probs[1] must be a number between 0 and 1, got 2"),
    (lambda d: d["records"][0].__setitem__("bytes_hex", "zz"), "records[0].bytes_hex must be bytes in hex"),
    (lambda d: d["records"][2].pop("draw"), "has no records[2].draw"),
    (lambda d: d["records"][0]["candidates"][0].__setitem__("evil", 1), "records[0].candidates[0].evil is not part"),
    (lambda d: d["records"][0].__setitem__("step", 5), "records[0].step must be 0"),
    (lambda d: d["records"][0]["stages"][1].__setitem__("name", "warp"), "records[0].stages must be the stages of its"),
    (lambda d: d["records"][0]["stages"][0]["probs"].pop(), "records[0].stages[0].probs must be 5 probabilities"),
    (lambda d: d["records"][0].__setitem__("token_id", "__import__('os')"), "records[0].token_id must be a whole"),
    (lambda d: d["records"][0]["draw"].__setitem__("u", float("nan")), "records[0].draw.u must be a number"),
    (lambda d: d["records"][0].__setitem__("stop_reason", "eos"), "stop_reason is on its last step only"),
    (lambda d: d["records"][0].__setitem__("order", "mine"), "records[0].order must be one of hf, vllm, llama.cpp"),
    (lambda d: d["records"][0].__setitem__("logits", [1.0, 2.0]), "records[0].logits must be 0 or 5 numbers"),
    (lambda d: d["settings"].__setitem__("temperature", 9), "temperature must be a number between 0 and"),
    (lambda d: d["settings"].pop("order"), "settings must be an object with prompt"),
    (lambda d: d.__setitem__("records", []), "records must be a list of 1 to 512 steps"),
    (lambda d: d.__setitem__("format", "other"), "format must be 'next-token-playground/run' version 1"),
    (lambda d: d.__setitem__("extra", 1), "extra is not part of a run"),
])
def test_a_bad_file_is_refused_naming_the_field(change, says):
    with pytest.raises(InputError, match=None) as caught:
        parse_run(broken(change))
    assert says in str(caught.value)


@pytest.mark.parametrize("data, says", [
    (b"not json", "the run file is not JSON"),
    (b"[1, 2]", "the file must be a JSON object"),
    (b"\xff\xfe", "the run file is not JSON"),
    (b" " * (limits.MAX_RUN_FILE_BYTES + 1), "the limit here is"),
])
def test_a_file_that_is_not_a_run_is_refused(data, says):
    with pytest.raises(InputError) as caught:
        parse_run(data)
    assert says in str(caught.value)


def test_an_error_about_a_run_file_reads_in_vietnamese():
    from playground.common.errors import in_language

    with pytest.raises(InputError) as caught:
        parse_run(broken(lambda d: d["records"][0].pop("draw")))
    assert in_language(caught.value, "vi") == "Tệp lượt chạy thiếu trường records[0].draw"


def test_a_run_with_the_bans_comes_back_with_them_and_a_banned_tokens_null():
    request = parse_request("Hi", False, 0.0, 0, 1.0, 0.0, "3", 3, "", "hf", no_repeat_ngram_size=3, min_tokens=2)
    stages = ("raw", "no_repeat_ngram", "min_tokens", "temperature", "top_k", "top_p", "min_p", "final")
    records = [replace(r, adjusted=((5, None), (7, -1.5)), stages=tuple(replace(r.stages[0], name=n) for n in stages))
               for r in a_run()]
    text = run_json(records, request, "m")
    assert '"adjusted":[[5,null],[7,-1.5]]' in text  # strict JSON: a ban is null, never -Infinity
    saved = parse_run(text)
    assert saved.request == request and list(saved.records) == records
    assert (saved.controls["no_repeat_ngram_size"], saved.controls["min_tokens"]) == (3, 2)


def test_a_top_h_run_comes_back_with_it_and_an_older_file_takes_it_off():
    request = parse_request("Hi", False, 0.7, 0, 1.0, 0.0, "3", 3, "", "hf", top_h=0.4)
    saved = parse_run(run_json(a_run(), request, "m"))
    assert saved.request == request and saved.request.settings.top_h == 0.4 and saved.controls["top_h"] == 0.4
    older = json.loads(run_json(a_run(), REQUEST, "m"))
    del older["settings"]["top_h"]  # a file saved before Top-H
    assert parse_run(json.dumps(older)).request.settings.top_h == 0.0
