"""Compare and Branch through the API (gradio_client against the launched app on the embedded model)."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

import pytest
from gradio_client.exceptions import AppError

from model_service import SamplingSettings
from playground.compare.columns import COLUMNS, EXAMPLE_ROWS, EXAMPLE_SEED

from .lab_args import KNOBS_OFF

LESSON = "The capital of France is"


def table(rows) -> dict:
    return {"headers": list(COLUMNS), "data": rows, "metadata": None}


def tokens(texts_html: str) -> list[list[str]]:
    """Each column's chips' hover text ids, in order."""
    return [re.findall(r"title=\"\d+ · id (\d+) ", col) for col in texts_html.split('class="ntp-col"')[1:]]


def test_compare_has_named_endpoints(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/compare_run", "/compare_scrub", "/branch_force", "/branch_select", "/branch_link"} <= names


def test_a_new_comparison_clears_the_last_ones_scrubber_table_and_overlay_at_once(client):
    client.predict(LESSON, table(EXAMPLE_ROWS), EXAMPLE_SEED, 6, "en", api_name="/compare_run")  # a comparison shown
    outputs = list(client.submit(LESSON, table(EXAMPLE_ROWS), EXAMPLE_SEED, 6, "en", api_name="/compare_run"))
    texts, status, scrub, step_table, overlay = outputs[0]
    assert status == "Starting a new run…" and scrub["visible"] is False and step_table == ""
    assert "ntp-chip" not in texts  # no chips of the last comparison
    assert outputs[-1][2]["visible"] is True and outputs[-1][3] != ""  # then this one's, when it ends


def test_the_example_agrees_until_a_step_and_each_column_is_its_solo_run(client, embedded):
    texts, status, scrub, step_table, overlay = client.predict(LESSON, table(EXAMPLE_ROWS), EXAMPLE_SEED, 12, "en",
                                                               api_name="/compare_run")
    a, b = tokens(texts)
    step = int(re.search(r"part at \*\*step (\d+)", status).group(1))
    assert a[: step - 1] == b[: step - 1] and a[step - 1] != b[step - 1] and step > 1
    assert scrub["value"] == step  # the scrubber opens on the divergent step (it counts from 1)
    for row, column in zip(EXAMPLE_ROWS, (a, b)):
        settings = SamplingSettings(temperature=row[0], seed=int(EXAMPLE_SEED))
        alone = [str(r.token_id) for r in embedded.generate(LESSON, settings, 12)]
        assert column == alone
    us = re.findall(r"<td>(0\.\d{4})</td>", step_table)
    assert len(us) == 2 and us[0] == us[1]  # the same u in both columns
    fig = json.loads(overlay["plot"])
    assert [t["name"] for t in fig["data"] if t.get("showlegend")] == ["A", "B"]


def test_a_columns_penalties_reach_its_request_and_it_is_still_its_solo_run(client, embedded):
    rows = [[1.0, 0, 1, 0, "vllm", 1, 0, 0], [1.0, 0, 1, 0, "vllm", 1.5, 1.0, 0.5]]  # the same draws, penalised or not
    texts, *_ = client.predict(LESSON, table(rows), "2", 10, "en", api_name="/compare_run")
    for row, column in zip(rows, tokens(texts)):
        settings = SamplingSettings(temperature=1.0, order="vllm", repetition_penalty=row[5], frequency_penalty=row[6],
                                    presence_penalty=row[7], seed=2)
        assert column == [str(r.token_id) for r in embedded.generate(LESSON, settings, 10)]


def test_identical_columns_are_identical_and_scrubbing_needs_no_model(client):
    rows = [[1.3, 0, 0.95, 0, "hf"]] * 3
    # seeded: a blank seed draws a fresh one, and some end at end-of-text before step 3 (seed 3 does, at T 1.3)
    texts, status, *_ = client.predict(LESSON, table(rows), "1", 8, "en", api_name="/compare_run")
    a, b, c = tokens(texts)
    assert a == b == c and len(a) == 8 and "every column chose the same tokens" in status
    texts, step_table, overlay = client.predict(3, "en", api_name="/compare_scrub")  # step 3
    assert 'ntp-sel" data-step="2"' in texts and "Step 3" in step_table


@pytest.mark.parametrize("rows, words", [([[1, 0, 1, 0, "hf"]], "2 to 4 rows"),
                                         ([[1, 0, 1, 0, "hf"], [1, 0, 7, 0, "hf"]], "column B: top-p"),
                                         ([[1, 0, 1, 0, "vllm", 1, 0, 3], [1, 0, 1, 0, "hf"]], "column A: presence penalty"),
                                         ([[1, 0, 1, 0, "hf"], [1, 0, 1, 0, "hf", 1, 0.5, 0]],
                                          "column B: frequency penalty is not part of the hf order")])
def test_bad_settings_are_named(client, rows, words):
    with pytest.raises(AppError, match=words):
        client.predict(LESSON, table(rows), "1", 8, "en", api_name="/compare_run")


def test_force_a_candidate_then_the_branch_is_the_solo_run_with_that_prefix_and_has_a_link(client, embedded):
    settings = SamplingSettings(temperature=0.8, seed=5)
    client.predict(LESSON, False, 0.8, 0, 1.0, 0.0, "5", 8, "", "hf", *KNOBS_OFF, "en", api_name="/generate")
    run = list(embedded.generate(LESSON, settings, 8))
    rank, token = next((i, c.id) for i, c in enumerate(run[2].candidates)
                       if i >= 2 and c.id not in embedded.eos_token_ids)  # end-of-text would end the branch
    out = client.predict(3, token, "en", api_name="/branch_force")  # the scrubber on step 3
    path, note = out[-3], out[-2]
    assert path == f"3:{token}" and f"rank {rank + 1}" in note and "step 3" in note
    prefix = [r.token_id for r in run[:2]] + [token]
    after = [r.token_id for r in embedded.generate(LESSON, settings, 8, continue_from=prefix)]
    chips = out[0]  # the State outputs are not in the API
    assert re.findall(r"id (\d+) ·", chips) == [str(t) for t in prefix + after]
    link = client.predict("en", api_name="/branch_link")
    query = parse_qs(urlparse(link).query)
    assert query["branch"] == [f"3:{token}"] and query["seed"] == ["5"] and query["temperature"] == ["0.8"]
    back = client.predict(0, "en", api_name="/branch_select")  # the original run again
    assert back[-3] == "" and re.findall(r"id (\d+) ·", back[0]) == [str(r.token_id) for r in run]


def test_forcing_a_token_outside_the_candidates_is_refused(client):
    client.predict(LESSON, False, 0.8, 0, 1.0, 0.0, "5", 6, "", "hf", *KNOBS_OFF, "en", api_name="/generate")
    with pytest.raises(AppError, match="only those can be forced"):
        client.predict(1, 12345678, "en", api_name="/branch_force")
