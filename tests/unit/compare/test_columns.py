"""The Compare tab's settings table and the divergence finder."""

from __future__ import annotations

import pytest

from playground.compare.columns import EXAMPLE_ROWS, first_divergence, parse_comparison


@pytest.mark.parametrize("columns, expected", [
    ([[1, 2, 3], [1, 2, 3]], None),
    ([[1, 2, 3], [1, 5, 3]], 1),
    ([[7], [8]], 0),
    ([[1, 2], [1, 2, 3]], 2),  # one column stopped, the other went on
    ([[1, 2, 3], [1, 2, 3], [1, 2, 4]], 2),
    ([[], []], None),
])
def test_the_first_divergent_step(columns, expected):
    assert first_divergence(columns) == expected


def test_every_column_shares_the_seed_and_the_prompt():
    c = parse_comparison("Hello", EXAMPLE_ROWS, "7", 5)
    assert c.seed == 7 and [q.settings.seed for q in c.requests] == [7, 7]
    assert [q.settings.temperature for q in c.requests] == [0.5, 1.0]
    assert {q.prompt for q in c.requests} == {"Hello"} and {q.max_new_tokens for q in c.requests} == {5}


def test_a_blank_seed_draws_one_seed_for_all_columns_and_blank_cells_take_the_defaults():
    c = parse_comparison("Hi", [["", None, None, None, "hf"], [0, "", "", "", "vllm"], [None] * 5], "", 4)
    assert len(c.requests) == 2  # the wholly blank row is no column
    assert c.requests[0].settings.seed == c.requests[1].settings.seed == c.seed
    assert c.requests[0].settings.temperature == 1 and c.requests[1].settings.greedy
    assert c.requests[1].settings.order == "vllm"


@pytest.mark.parametrize("rows, words", [
    ([[1, 0, 1, 0, "hf"]], "2 to 4 rows"),
    ([[1, 0, 1, 0, "hf"]] * 5, "2 to 4 rows"),
    ([[1, 0, 1, 0, "hf"], [1, -3, 1, 0, "hf"]], "column B: top-k"),
    ([[1, 0, 1, 0, "nope"], [1, 0, 1, 0, "hf"]], "column A: order"),
])
def test_bad_settings_name_the_column_and_the_field(rows, words):
    with pytest.raises(ValueError, match=words):
        parse_comparison("Hi", rows, "1", 4)


def test_a_vietnamese_page_names_the_problem_in_vietnamese():
    with pytest.raises(ValueError, match="So sánh cần từ 2 đến 4"):
        parse_comparison("Hi", [[1, 0, 1, 0, "hf"]], "1", 4, lang="vi")
