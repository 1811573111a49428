"""Branch paths (the link's `branch=`), the forced step's record and the tree of branches: hand-made records."""

from __future__ import annotations

import pytest

from playground.common.lab_link import lab_query
from playground.lab.branches import (
    MAX_FORCED,
    Branch,
    Tree,
    branch_label,
    child_path,
    forced_note,
    forced_record,
    format_path,
    parent_of,
    parse_path,
)
from playground.lab.deep_link import parse_query
from tests.unit.lab.test_charts import make_record


def test_a_path_round_trips_and_blank_is_no_branch():
    assert parse_path("5:1234, 9:42") == ((5, 1234), (9, 42))
    assert format_path(parse_path("5:1234,9:42")) == "5:1234,9:42"
    assert parse_path("") == parse_path(None) == ()


@pytest.mark.parametrize("text, words", [
    ("5", "step:token pairs"),
    ("0:12", "branch step"),
    ("3:-1", "branch token"),
    ("3:x", "branch token"),
    ("9:1,5:2", "increase"),
    ("5:1,5:2", "increase"),
    ("600:1", "branch step"),
    (",".join(f"{k}:1" for k in range(1, MAX_FORCED + 2)), f"at most {MAX_FORCED}"),
])
def test_a_bad_path_is_named(text, words):
    with pytest.raises(ValueError, match=words):
        parse_path(text)


def test_a_branch_link_round_trips_and_a_bad_one_is_reported_not_fatal():
    values, problems = parse_query({"seed": "3", "branch": "2:101,4:7"})
    assert values["branch"] == "2:101,4:7" and not problems
    assert "branch=2%3A101%2C4%3A7" in lab_query({"seed": "3", "branch": "2:101,4:7"})
    assert "branch" not in lab_query({"seed": "3", "branch": ""})
    values, problems = parse_query({"branch": "<b>oops</b>"})
    assert "branch" not in values and len(problems) == 1 and "branch" in problems[0]


def test_a_forced_record_keeps_the_steps_distributions_and_takes_the_forced_tokens_rank_and_probabilities():
    record = make_record(chosen=0, u=0.3)  # ' Paris' drawn with u = 0.3
    forced = forced_record(record, 102, text_before="so far")  # ' London': rank 3, 0.15 under the model
    assert (forced.token_id, forced.piece, forced.chosen_rank) == (102, " London", 2)
    assert [s.chosen_prob for s in forced.stages] == [0.15, 0.12, 0.131, 0.0, 0.0, 0.0]  # top-p removed it
    assert forced.stages[0].probs == record.stages[0].probs  # same context, same distributions
    assert forced.draw.u == 0.3 and forced.draw.rank == 2 and forced.draw.low == forced.draw.high == 1.0
    assert forced.text == "so far" and forced.stop_reason is None
    second = forced_record(record, 101)
    assert (second.draw.low, second.draw.high) == (0.75, 1.0)
    assert "rank 3" in forced_note(forced) and "15.0%" in forced_note(forced)


def test_only_a_steps_candidates_can_be_forced():
    with pytest.raises(ValueError, match="not among step 1's top 5 candidates"):
        forced_record(make_record(), 9999)


def test_a_child_path_keeps_the_forcings_before_its_step_and_drops_those_after():
    assert child_path((), 4, 7) == ((5, 7),)
    assert child_path(((2, 1), (6, 3)), 4, 7) == ((2, 1), (5, 7))
    assert child_path(((2, 1),), 1, 9) == ((2, 9),)  # the same step again: a sibling, not a child


def test_the_tree_finds_parents_replaces_a_repeated_path_and_labels_each_branch():
    records = tuple(make_record(step=k) for k in range(4))
    tree = Tree(object(), [Branch((), records)])
    forced = (*records[:2], forced_record(records[2], 103), records[3])
    assert tree.add(Branch(((3, 103),), forced, parent_of(tree, ((3, 103),)))) == 1
    assert parent_of(tree, ((3, 103), (4, 101))) == 1 and parent_of(tree, ((2, 101),)) == 0
    assert tree.add(Branch(((3, 103),), forced, 0)) == 1 and len(tree.branches) == 2
    assert branch_label(tree, 0) == "Original run · 4 tokens"
    assert branch_label(tree, 1) == "Branch 1: step 3 → '↵' (rank 4, 10.0%) · 4 tokens"
    assert branch_label(tree, 1, "vi").startswith("Nhánh 1: bước 3")


def test_a_switch_of_settings_round_trips_in_a_path_and_in_a_link_with_its_values_checked():
    from playground.lab.branches import Switch, is_switch, last_switch, switch_path

    path = parse_path("3:7,5@temperature=0.5;top_k=10,5:42")
    assert path == ((3, 7), (5, Switch((("temperature", "0.5"), ("top_k", "10")))), (5, 42))
    assert format_path(path) == "3:7,5@temperature=0.5;top_k=10,5:42" and last_switch(path).label() == \
        "temperature 0.5 · top_k 10" and is_switch(path[1]) and not is_switch(path[0])
    stops = Switch((("stop", ", ;=@"),))  # any text: each value percent-quoted in the path
    assert parse_path(format_path(((4, stops),))) == ((4, stops),)
    values, problems = parse_query({"seed": "3", "branch": "5@temperature=0.50"})
    assert values["branch"] == "5@temperature=0.5" and not problems  # read as the link's temperature is
    for bad in ("5@temperature=9", "5@prompt=hi", "5@seed=4", "5@temperature=1;temperature=2", "5@", "5:1,5@top_k=3"):
        values, problems = parse_query({"branch": bad})
        assert "branch" not in values and len(problems) == 1, bad
    assert switch_path(((3, 7), (6, 9)), 4, stops) == ((3, 7), (5, stops))
    assert child_path(((5, stops),), 4, 11) == ((5, stops), (5, 11))  # the forced step draws with the switch


def test_a_known_branch_is_reused_only_as_far_as_its_path_agrees():
    from playground.lab.branches import Switch, valid_known

    switch = Switch((("temperature", "0.5"),))
    assert valid_known((), ((5, 12),)) == 5  # the drawn step 5 makes the forced one
    assert valid_known((), ((5, switch),)) == 4  # step 5 draws with other settings
    assert valid_known(((5, switch),), ((5, switch), (9, 3))) == 9
    assert valid_known(((5, switch),), ((7, 3),)) == 4  # the known steps after its switch are not this branch's
    assert valid_known(((3, 1),), ((3, 1),)) >= 512


def test_a_branch_run_file_keeps_the_root_and_the_path_and_reads_back_the_settings_of_its_last_steps():
    from model_service import SamplingSettings
    from playground.lab.export import parse_run, run_json
    from playground.lab.request import RunRequest

    root = RunRequest("The capital of France is", False, SamplingSettings(temperature=1.0, seed=5), 8, ())
    path = parse_path("3@temperature=0.5;top_k=10")
    records = [make_record(chosen=0, u=0.3)]
    text = run_json(records, root, "tiny", branch=(root, path))
    assert '"branch":"3@temperature=0.5;top_k=10"' in text and '"temperature":1.0' in text
    saved = parse_run(text)
    assert saved.path == path and saved.root.settings.temperature == 1.0
    assert saved.request.settings.temperature == 0.5 and saved.request.settings.top_k == 10
    assert saved.controls["temperature"] == 0.5  # the knobs show what the run's last steps drew with
    with pytest.raises(ValueError, match="branch"):
        parse_run(text.replace("3@temperature=0.5", "3@temperature=7"))
