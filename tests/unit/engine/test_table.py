"""The Engine tab's table -> requests: what gr.Dataframe (or an API caller) may hand over."""

from __future__ import annotations

import pytest

from model_service.records.validation import parse_stop_text
from playground import limits
from playground.engine.table import (
    COLUMNS,
    EXAMPLE_ROWS,
    NEW_ROWS,
    headers,
    parse_table,
    renumber,
    table_rows,
    table_value,
)

GOOD = ["The capital of France is", 0, 0, 1, 0, "hf", "", 24, "\\n", 1, 0, 0]
PENALTIES = ("repetition_penalty", "frequency_penalty", "presence_penalty")


def test_cells_may_be_strings_nan_or_none_and_blank_means_default():
    numbers, requests = parse_table([
        GOOD,
        ["Once", "0.8", "", "0.95", None, " VLLM ", "7", "12.0", "a|b"],
        [None, float("nan"), "", None, None, None, None, None, None],  # an empty row: skipped
        ["x", None, float("nan"), None, None, None, float("nan"), None, None],
    ])
    assert numbers == [1, 2, 4]  # table numbering kept
    q = requests[1]
    assert (q.settings.temperature, q.settings.top_k, q.settings.top_p, q.settings.min_p) == (0.8, 0, 0.95, 0.0)
    assert q.settings.order == "vllm" and q.settings.seed == 7 and q.max_new_tokens == 12 and q.stop == ("a", "b")
    d = requests[2]
    assert (d.settings.temperature, d.settings.top_k, d.settings.top_p, d.settings.seed) == (1.0, 0, 1.0, None)
    assert d.max_new_tokens == 32 and requests[0].settings.greedy and requests[0].stop == ("\n",)


def test_a_pandas_frame_and_the_api_dict_are_accepted():
    import pandas as pd

    frame = pd.DataFrame([GOOD, ["y", None, None, None, None, None, None, None, None]])
    assert [q.prompt for q in parse_table(frame)[1]] == ["The capital of France is", "y"]
    assert parse_table({"headers": [], "data": [GOOD[:3]]})[1][0].max_new_tokens == 32  # short rows padded


@pytest.mark.parametrize("cell, expected", [
    ("", ()), (None, ()), (".", (".",)), (" 7|.", (" 7", ".")), ("\\n|\\t", ("\n", "\t")),
    ("a\\|b", ("a|b",)), ("||x||", ("x",)),
])
def test_stop_cells(cell, expected):
    assert parse_stop_text("stop", cell) == expected


@pytest.mark.parametrize("row, needle", [
    (["", 1, 0, 1, 0, "hf", "", 8, ""], "row 2, prompt: empty"),
    (["x", "hot", 0, 1, 0, "hf", "", 8, ""], "row 2, temperature must be a number between 0 and 100, got 'hot'"),
    (["x", 1, 2.5, 1, 0, "hf", "", 8, ""], "row 2, top-k must be a whole number"),
    (["x", 1, 0, 3, 0, "hf", "", 8, ""], r"row 2, top-p must be a number between 0 and 1 \(0 excluded\), got 3"),
    (["x", -1, 0, 1, 0, "hf", "", 8, ""], "row 2, temperature must be a number between 0 and 100, got -1"),
    (["x", 1, 0, 1, 0, "greedy", "", 8, ""], "row 2, order must be one of hf, vllm, llama.cpp"),
    (["x", 1, 0, 1, 0, "hf", "1.5", 8, ""], "row 2, seed must be a whole number"),
    (["x", 1, 0, 1, 0, "hf", "-3", 8, ""], "row 2, seed must be a whole number between 0 and"),
    (["x", 1, 0, 1, 0, "hf", "", 0, ""], "row 2, max tokens must be a whole number between 1 and 512"),
    (["x", 1, 0, 1, 0, "hf", "", float("inf"), ""], "row 2, max tokens must be a whole number"),
    (["x", True, 0, 1, 0, "hf", "", 8, ""], "row 2, temperature must be a number"),
])
def test_bad_cells_are_refused_naming_the_row_and_the_field(row, needle):
    with pytest.raises(ValueError, match=needle):
        parse_table([GOOD, row])


def test_more_than_eight_requests_or_none_are_refused():
    with pytest.raises(ValueError, match=f"at most {limits.MAX_ENGINE_ROWS} requests.*has 9: remove 1 row"):
        parse_table([GOOD] * 9)
    assert len(parse_table([GOOD] * 8 + [[None] * 9])[1]) == 8  # a blank 9th row is not a request
    for empty in (None, [], [[None] * 9]):
        with pytest.raises(ValueError, match="no requests"):
            parse_table(empty)


def test_service_messages_are_renumbered_to_table_rows():
    assert renumber("request 2: prompt + max_new_tokens exceeds", [1, 4]) == "row 4: prompt + max_new_tokens exceeds"
    assert renumber("a batch needs 1 to 64 requests", [1]) == "a batch needs 1 to 64 requests"


# ---- the table in Vietnamese: headers in words, columns read by position ---------------------------------


def test_headers_translate_the_words_and_keep_the_knobs_names():
    assert headers() == [*COLUMNS[:-1], "more samplers (name=value …)"]  # the last says how to fill it in
    vi = headers("vi")
    assert vi == ["prompt", "temperature", "top-k", "top-p", "min-p", "thứ tự", "seed", "token tối đa", "dừng",
                  "repetition penalty", "frequency penalty", "presence penalty", "bộ lấy mẫu khác (tên=giá trị …)"]


@pytest.mark.parametrize("header_row", [
    headers("vi"), list(COLUMNS), list(reversed(COLUMNS)), ["a"] * 12, [],
])
def test_a_table_parses_by_position_whatever_its_headers_say(header_row):
    rows = [GOOD, ["Once", 0.8, 40, 0.95, 0.1, "vllm", "7", 12, "a|b", 1.1, 0.2, 0.3]]
    value = {"headers": header_row, "data": rows, "metadata": None}
    assert parse_table(value) == parse_table(rows)
    assert parse_table(table_value(rows, "vi"), "vi") == parse_table(rows)


def test_the_tables_own_messages_in_vietnamese_and_the_validators_in_english():
    with pytest.raises(ValueError, match="bảng chưa có request nào: hãy thêm một hàng có prompt"):
        parse_table([[None] * 9], "vi")
    with pytest.raises(ValueError, match="ở đây tối đa 8 request chạy cùng lúc; bảng đang có 9: hãy xoá 1 hàng"):
        parse_table([GOOD] * 9, "vi")
    with pytest.raises(ValueError, match="^hàng 2, prompt: đang trống;"):
        parse_table([GOOD, ["", 1, 0, 1, 0, "hf", "", 8, ""]], "vi")
    # the validators' keyed errors, said again in Vietnamese, naming the field as the Vietnamese header does
    with pytest.raises(ValueError, match="^hàng 2, temperature phải là một số từ 0 đến 100, nhận được 'hot'$"):
        parse_table([GOOD, ["x", "hot", 0, 1, 0, "hf", "", 8, ""]], "vi")
    with pytest.raises(ValueError, match="^hàng 3, thứ tự phải là một trong hf, vllm, llama.cpp, custom, nhận được 'beam'$"):
        parse_table([GOOD, GOOD, ["x", 1, 0, 1, 0, "beam", "", 8, ""]], "vi")
    with pytest.raises(ValueError, match="^hàng 2, token tối đa phải là một số nguyên từ 1 đến 512, nhận được 0$"):
        parse_table([GOOD, ["x", 1, 0, 1, 0, "hf", "", 0, ""]], "vi")
    with pytest.raises(ValueError, match="^row 2, max tokens must be a whole number between 1 and 512, got 0$"):
        parse_table([GOOD, ["x", 1, 0, 1, 0, "hf", "", 0, ""]])


# ---- the penalty columns, at the end of each row -----------------------------------------------------------


def test_the_penalty_columns_reach_each_requests_settings_and_blank_cells_are_off():
    _, requests = parse_table([
        ["a", 1, 0, 1, 0, "vllm", "", 8, "", 1.3, "0.5", -0.25],
        ["b", 1, 0, 1, 0, "llama.cpp", "", 8, "", "", None, float("nan")],
        ["c", 1, 0, 1, 0, "hf", "", 8, "", 1.2, 0, ""],
    ])
    assert [tuple(getattr(q.settings, name) for name in PENALTIES) for q in requests] == [
        (1.3, 0.5, -0.25), (1.0, 0.0, 0.0), (1.2, 0.0, 0.0)]


def test_an_old_row_of_nine_cells_takes_the_penalties_off_and_a_blank_row_stays_blank():
    old = ["Once", 0.8, 0, 0.95, 0, "hf", "1", 32, ""]
    assert table_rows([old, [None] * 9]) == [[*old, 1, 0, 0, ""], [None] * 13]
    numbers, requests = parse_table([old, [None] * 9, GOOD[:3]])
    assert numbers == [1, 3] and not any(q.settings.penalised for q in requests)
    assert parse_table([old]) == parse_table([[*old, 1, 0, 0, ""]])


def test_every_example_and_new_row_has_every_column_and_no_penalty():
    for row in EXAMPLE_ROWS + NEW_ROWS:
        assert len(row) == len(COLUMNS) and row[-4:] == [1, 0, 0, ""]
    assert not any(q.settings.penalised for q in parse_table(EXAMPLE_ROWS)[1])


@pytest.mark.parametrize("penalties, needle", [
    ((0, 0, 0), r"row 2, repetition penalty must be a number between 0 and 10 \(0 excluded\), got 0"),
    ((11, 0, 0), "row 2, repetition penalty must be a number between 0 and 10"),
    ((1, "lots", 0), "row 2, frequency penalty must be a number between -2 and 2, got 'lots'"),
    ((1, 0, -3), "row 2, presence penalty must be a number between -2 and 2, got -3"),
])
def test_a_bad_penalty_cell_is_named_with_its_row_and_column(penalties, needle):
    with pytest.raises(ValueError, match=needle):
        parse_table([GOOD, ["x", 1, 0, 1, 0, "vllm", "", 8, "", *penalties]])


@pytest.mark.parametrize("penalties, name", [((1, 0.5, 0), "frequency penalty"), ((1, 0, -0.5), "presence penalty")])
def test_the_hf_order_refuses_a_frequency_or_presence_penalty_naming_it(penalties, name):
    with pytest.raises(ValueError, match=f"^row 2, {name} is not part of the hf order \\(transformers has no {name}\\)"):
        parse_table([GOOD, ["x", 1, 0, 1, 0, "hf", "", 8, "", *penalties]])
    with pytest.raises(ValueError, match=f"^hàng 2, {name} không có trong thứ tự hf"):
        parse_table([GOOD, ["x", 1, 0, 1, 0, " HF ", "", 8, "", *penalties]], "vi")
    assert parse_table([["x", 1, 0, 1, 0, "vllm", "", 8, "", *penalties]])[1][0].settings.penalised
