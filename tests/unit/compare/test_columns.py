"""The Compare tab's settings table and the divergence finder."""

from __future__ import annotations

import pytest

from playground.common.tables import tail_cells
from playground.compare.columns import COLUMNS, EXAMPLE_ROWS, first_divergence, headers, parse_comparison, table_rows


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


# ---- the penalty columns, at the end of each row -----------------------------------------------------------


def test_the_headers_end_with_the_penalties_by_their_names_in_every_language():
    assert list(COLUMNS) == ["temperature", "top-k", "top-p", "min-p", "order", "repetition penalty",
                             "frequency penalty", "presence penalty", "more samplers"]
    assert headers() == [*COLUMNS[:8], "more samplers (name=value …)"]
    assert headers("vi") == [*COLUMNS[:4], "thứ tự", *COLUMNS[5:8], "bộ lấy mẫu khác (tên=giá trị …)"]
    assert all(len(row) == len(COLUMNS) and row[5:] == [1, 0, 0, ""] for row in EXAMPLE_ROWS)


def test_the_more_samplers_cell_and_a_chain_in_the_order_cell_reach_each_columns_settings():
    c = parse_comparison("Hi", [[1, 0, 1, 0, "llama.cpp", 1, 0, 0, "dry_multiplier=0.8 typical_p=0.9 logit_bias=13:-100;42:2"],
                                [0.7, 30, 1, 0.05, "top_k > min_p > temperature", "", "", "", ""]], "1", 4)
    first, second = (q.settings for q in c.requests)
    assert (first.dry_multiplier, first.typical_p, first.logit_bias) == (0.8, 0.9, ((13, -100.0), (42, 2.0)))
    assert second.chain == ("top_k", "min_p", "temperature")
    with pytest.raises(ValueError, match="more samplers: 'beam=4' is not a knob=value pair it takes"):
        parse_comparison("Hi", [[1, 0, 1, 0, "hf", 1, 0, 0, "beam=4"], [1, 0, 1, 0, "hf"]], "1", 4)
    with pytest.raises(ValueError, match="mirostat is not part of the hf order"):
        parse_comparison("Hi", [[1, 0, 1, 0, "hf", 1, 0, 0, "mirostat=2"], [1, 0, 1, 0, "hf"]], "1", 4)


def test_the_bans_in_the_more_samplers_cell_reach_the_columns_and_read_back():
    c = parse_comparison("Hi", [[0, 0, 1, 0, "hf", 1, 0, 0, "no_repeat_ngram_size=3 min_tokens=5"],
                                [0, 0, 1, 0, "vllm", 1, 0, 0, "min_tokens=8"]], "1", 4)
    first, second = (q.settings for q in c.requests)
    assert (first.no_repeat_ngram_size, first.min_tokens, second.min_tokens) == (3, 5, 8)
    assert tail_cells(first)[-1] == "no_repeat_ngram_size=3 min_tokens=5"  # what a shared link's table shows
    with pytest.raises(ValueError, match="no_repeat_ngram_size is not part of the vllm order"):
        parse_comparison("Hi", [[1, 0, 1, 0, "vllm", 1, 0, 0, "no_repeat_ngram_size=2"], [1, 0, 1, 0, "hf"]], "1", 4)


def test_the_penalty_columns_reach_each_columns_settings():
    c = parse_comparison("Hi", [[1, 0, 1, 0, "vllm", 1.3, 0.5, -0.2], [1, 0, 1, 0, "llama.cpp", "", None, 0.4]], "1", 4)
    penalties = [(s.repetition_penalty, s.frequency_penalty, s.presence_penalty) for s in (q.settings for q in c.requests)]
    assert penalties == [(1.3, 0.5, -0.2), (1.0, 0.0, 0.4)]


def test_an_old_row_of_five_cells_takes_the_penalties_off():
    assert table_rows([[0.5, 0, 1, 0, "hf"], [None] * 5]) == [[0.5, 0, 1, 0, "hf", 1, 0, 0, ""]]
    old = parse_comparison("Hi", [[0.5, 0, 1, 0, "hf"], [1.0, 0, 1, 0, "hf"]], "3", 4)
    assert old == parse_comparison("Hi", EXAMPLE_ROWS, "3", 4) and not any(q.settings.penalised for q in old.requests)


@pytest.mark.parametrize("rows, words", [
    ([[1, 0, 1, 0, "vllm", 0, 0, 0], [1, 0, 1, 0, "hf"]], r"^column A: repetition penalty must be a number between 0 and 10"),
    ([[1, 0, 1, 0, "hf"], [1, 0, 1, 0, "vllm", 1, 2.5, 0]], "^column B: frequency penalty must be a number between -2 and 2"),
    ([[1, 0, 1, 0, "hf"], [1, 0, 1, 0, "vllm", 1, 0, "x"]], "^column B: presence penalty must be a number"),
    ([[1, 0, 1, 0, "hf", 1, 0.5, 0], [1, 0, 1, 0, "hf"]], r"^column A: frequency penalty is not part of the hf order"),
    ([[1, 0, 1, 0, "hf"], [1, 0, 1, 0, "", 1, 0, 0.1]], "^column B: presence penalty is not part of the hf order"),
])
def test_a_bad_penalty_is_named_with_its_column_and_the_hf_order_refuses_frequency_and_presence(rows, words):
    with pytest.raises(ValueError, match=words):
        parse_comparison("Hi", rows, "1", 4)


def test_a_vietnamese_page_names_a_penalty_by_its_header():
    with pytest.raises(ValueError, match="^cột B: frequency penalty không có trong thứ tự hf"):
        parse_comparison("Hi", [[1, 0, 1, 0, "hf"], [1, 0, 1, 0, "hf", 1, 0.5, 0]], "1", 4, lang="vi")


def test_top_h_in_the_more_samplers_cell_reaches_its_column_and_another_order_refuses_it():
    c = parse_comparison("Hi", [[0.8, 0, 1, 0, "hf", 1, 0, 0, "top_h=0.4"], [0.8, 0, 1, 0, "hf"]], "1", 4)
    assert c.requests[0].settings.top_h == 0.4 and c.requests[1].settings.top_h == 0.0
    with pytest.raises(ValueError, match="top_h is not part of the vllm order"):
        parse_comparison("Hi", [[1, 0, 1, 0, "vllm", 1, 0, 0, "top_h=0.4"], [1, 0, 1, 0, "hf"]], "1", 4)
