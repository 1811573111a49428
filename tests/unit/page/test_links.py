import json
from urllib.parse import parse_qsl, urlsplit

import pytest

from playground.common.address import absolute, page_url, space_direct_url
from playground.engine.table import EXAMPLE_ROWS
from playground.hosting import Machine, detect
from playground.workshop.links import DEFAULTS, make_query, parse_query

OFF = [1.0, 0.0, 0.0, ""]  # a column's penalties, off (repetition, frequency, presence), and no other sampler, as a
# link gives them back
EVERY_TAB = {  # one non-default value per field of every tab
    "lab": {"prompt": "Once upon a time", "chat": True, "temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.05,
            "seed": "7", "max_new_tokens": 20, "stop": "\\n|.", "order": "llama.cpp"},
    "softmax": {"toy_logits": [4.0, 3.0, 2.0, 1.0, 0.5], "toy_shift": 2.5, "toy_temperature": 0.5},
    "engine": {"engine": [["Hi there", 0.5, 10, 0.9, 0.0, "vllm", "3", 8, ".", 1.3, 0.5, 0.2, ""],
                          ["1, 2, 3,", 0, 0, 1, 0, "hf", "", 4, "", 1, 0, 0, ""]]},
    "forward": {"fw_prompt": "A cat sat", "fw_chat": True, "fw_block": 3, "fw_head": 2},
    "compare": {"compare_prompt": "Once upon a time", "compare_seed": "42", "compare_max_new": 16,
                "compare_table": [[0.5, 0, 1.0, 0.0, "hf", *OFF], [1.5, 40, 0.9, 0.05, "vllm", 1.2, 0.5, 0.0, ""],
                                  [0.123456789, 0, 1.0, 0.0, "llama.cpp", *OFF]]},
}


@pytest.mark.parametrize("tab", list(EVERY_TAB))
def test_every_tabs_inputs_round_trip_through_a_link(tab):
    values = {"tab": tab, **EVERY_TAB[tab]}
    query = make_query(values, lang="vi")
    parsed, problems = parse_query(dict(parse_qsl(query)))
    assert problems == [] and parsed == ({} if tab == "lab" else {"tab": tab}) | EVERY_TAB[tab]
    assert dict(parse_qsl(query))["lang"] == "vi"


def test_the_whole_page_in_one_link_and_defaults_left_out():
    values = {"tab": "forward", **{k: v for fields in EVERY_TAB.values() for k, v in fields.items()}}
    parsed, problems = parse_query(dict(parse_qsl(make_query(values))))
    assert problems == [] and parsed == values
    # the lab is the default tab; the toy's, the engine's and the lessons' prompts are left out
    defaults = {"tab": "lab", "prompt": "hi", "toy_logits": DEFAULTS["toy_logits"], "toy_shift": 0.0,
                "engine": [list(r) for r in EXAMPLE_ROWS], "fw_prompt": "Thủ đô của Pháp là", "fw_head": -1,
                "compare_prompt": "The capital of France is", "compare_seed": "3", "compare_max_new": 24,
                "compare_table": DEFAULTS["compare_table"]}
    assert make_query(defaults) == "prompt=hi"


def test_the_compare_tabs_link_is_short_readable_and_exact():
    values = {"tab": "compare", **EVERY_TAB["compare"]}
    query = make_query(values)
    assert query == ("tab=compare&compare_prompt=Once+upon+a+time&compare_seed=42&compare_max_new=16&compare_columns=3"
                     "&compare_b=1.5,40,0.9,0.05,vllm,1.2,0.5&compare_c=0.123456789,0,1,0,llama.cpp")  # column A is the
    # default; the penalties that are off are left out at a column's end
    assert parse_query(dict(parse_qsl(query))) == (values, [])
    # the tab's own prompt (in either language), seed, length and two columns are left out
    defaults = {"tab": "compare", "compare_prompt": "Thủ đô của Pháp là", "compare_seed": "3", "compare_max_new": 24,
                "compare_table": [[0.5, 0, 1, 0, "hf", 1, 0, 0, ""], [1, 0, 1, 0, "hf", 1, 0, 0, ""]]}
    assert make_query(defaults) == "tab=compare"
    old_rows = {**defaults, "compare_table": [[0.5, 0, 1, 0, "hf"], [1, 0, 1, 0, "hf"]]}  # from before the penalties
    assert make_query(old_rows) == "tab=compare"
    # a blank seed (a fresh one for every run) is not the tab's 3: the link says so, and it parses back
    query = make_query({"compare_seed": ""})
    assert query == "compare_seed=" and parse_query(dict(parse_qsl(query, keep_blank_values=True))) == ({"compare_seed": ""}, [])


def test_a_compare_columns_blank_cells_and_count_fill_in_as_the_table_does():
    values, problems = parse_query({"compare_d": "0.7,,,, VLLM "})
    assert problems == [] and values == {"compare_table": [[0.5, 0, 1.0, 0.0, "hf", *OFF], [1.0, 0, 1.0, 0.0, "hf", *OFF],
                                                           [1.0, 0, 1.0, 0.0, "hf", *OFF], [0.7, 0, 1.0, 0.0, "vllm", *OFF]]}
    values, _ = parse_query({"compare_columns": "3"})
    assert values["compare_table"][2] == [1.0, 0, 1.0, 0.0, "hf", *OFF]  # a third column with every filter off
    values, problems = parse_query({"compare_b": "1,0,1,0,vllm,,0.5"})  # a blank penalty is off, a missing one too
    assert problems == [] and values["compare_table"][1] == [1.0, 0, 1.0, 0.0, "vllm", 1.0, 0.5, 0.0, ""]


def test_an_old_compare_link_of_five_cells_still_parses_with_the_penalties_off():
    values, problems = parse_query({"compare_a": "0.5,0,1,0,hf", "compare_b": "1.5,40,0.9,0.05,vllm"})
    assert problems == [] and values == {"compare_table": [[0.5, 0, 1.0, 0.0, "hf", *OFF], [1.5, 40, 0.9, 0.05, "vllm", *OFF]]}
    assert make_query(values) == "compare_b=1.5,40,0.9,0.05,vllm"  # and a link made of it reads as before


def test_an_old_engine_link_of_nine_cell_rows_still_parses_with_the_penalties_off():
    old = '[["Hi there",0.5,10,0.9,0,"vllm","3",8,"."],["1, 2, 3,",0,0,1,0,"hf","",4,""]]'
    values, problems = parse_query({"engine": old})
    assert problems == [] and values["engine"] == [["Hi there", 0.5, 10, 0.9, 0, "vllm", "3", 8, ".", 1, 0, 0, ""],
                                                   ["1, 2, 3,", 0, 0, 1, 0, "hf", "", 4, "", 1, 0, 0, ""]]
    assert dict(parse_qsl(make_query(values)))["engine"] == old  # the penalties that are off are left out again
    old_example = json.dumps([row[:9] for row in EXAMPLE_ROWS])
    assert make_query(parse_query({"engine": old_example})[0]) == ""  # the tab's own example, as an old link wrote it


@pytest.mark.parametrize("query, why", [
    ({"compare_prompt": "  "}, "compare_prompt is empty"),
    ({"compare_seed": "-1"}, "compare_seed must be a whole number between 0 and"),
    ({"compare_seed": "abc"}, "compare_seed must be a whole number"),
    ({"compare_max_new": "0"}, "compare_max_new must be a whole number between 1 and 512"),
    ({"compare_max_new": "2.5"}, "compare_max_new must be a whole number"),
    ({"compare_columns": "5"}, "compare_columns must be a whole number between 2 and 4"),
    ({"compare_a": "1,0,1"}, "compare_a must be 5 to 9 settings separated by commas (temperature, top-k, top-p, min-p, "
                             "order, then the repetition, frequency and presence penalties"),
    ({"compare_b": "999,0,1,0,hf"}, "compare_b: temperature must be a number between 0 and 100, got '999'"),
    ({"compare_c": "1,x,1,0,hf"}, "compare_c: top-k must be a whole number"),
    ({"compare_d": "1,0,0,0,hf"}, "compare_d: top-p must be a number between 0 and 1 (0 excluded)"),
    ({"compare_b": "1,0,1,2,hf"}, "compare_b: min-p must be a number between 0 and 1"),
    ({"compare_b": "1,0,1,0,openai"}, "compare_b: order must be one of hf, vllm, llama.cpp, custom, got 'openai'"),
    ({"compare_b": "1,0,1,0,vllm,0"}, "compare_b: repetition penalty must be a number between 0 and 10 (0 excluded)"),
    ({"compare_c": "1,0,1,0,vllm,1,9"}, "compare_c: frequency penalty must be a number between -2 and 2, got '9'"),
    ({"compare_b": "1,0,1,0,hf,1,0.5"}, "compare_b: frequency penalty is not part of the hf order"),
    ({"compare_b": "1,0,1,0,hf,1,0,-1"}, "compare_b: presence penalty is not part of the hf order"),
    ({"compare_a": "1,0,1,0,hf,1,0,0,,0"}, "compare_a must be 5 to 9 settings separated by commas"),
])
def test_each_bad_compare_field_is_named_and_the_control_keeps_its_value(query, why):
    values, problems = parse_query({**query, "compare_a": query.get("compare_a", "0.2,0,1,0,hf"), "temperature": "0.5"})
    assert values.get("temperature") == 0.5
    assert len(problems) == 1 and why in problems[0] and problems[0].endswith("the default is kept")
    bad = next(iter(query))
    assert bad not in values
    if bad.startswith(("compare_columns", "compare_a", "compare_b", "compare_c", "compare_d")):
        assert "compare_table" not in values  # one bad part: the table keeps all its columns
    else:
        assert values["compare_table"][0] == [0.2, 0, 1.0, 0.0, "hf", *OFF]


def test_a_column_beyond_the_count_is_named_and_a_vietnamese_link_says_so_in_vietnamese():
    values, problems = parse_query({"compare_columns": "2", "compare_c": "1,0,1,0,hf", "lang": "vi"})
    assert values == {"compare_table": [[0.5, 0, 1.0, 0.0, "hf", *OFF], [1.0, 0, 1.0, 0.0, "hf", *OFF]]}
    assert problems == ["compare_c bị bỏ qua: compare_columns chỉ có 2 cột"]
    _, problems = parse_query({"compare_b": "1,0,1,0,openai", "lang": "vi"})
    assert problems == ["compare_b: order phải là một trong hf, vllm, llama.cpp, custom, nhận được 'openai'; giữ giá trị mặc định"]


def test_an_injection_in_a_compare_field_is_only_quoted_and_the_page_escapes_it():
    from playground.common.errors import toast_text

    payload = '<img src=x onerror="alert(1)">'
    for name, raw in (("compare_seed", payload), ("compare_max_new", payload), ("compare_columns", payload),
                      ("compare_b", f"1,0,1,0,{payload}"), ("compare_c", f"{payload},0,1,0,hf")):
        _, problems = parse_query({name: raw})
        assert len(problems) == 1 and name in problems[0] and payload in problems[0]  # quoted, as typed
        shown = toast_text(problems[0])
        assert "<img" not in shown and "&lt;img" in shown
    values, problems = parse_query({"compare_prompt": payload})  # a prompt is any text: the tab shows it escaped
    assert values == {"compare_prompt": payload} and problems == []


def test_a_scene_link_is_short():
    assert make_query({}, scene="l13-top-k") == "scene=l13-top-k"
    assert parse_query({"scene": "l13-top-k", "__theme": "dark", "__sign": "x"}) == ({}, [])


@pytest.mark.parametrize("name, raw, why", [
    ("tab", "settings", "tab must be one of lab, softmax, engine, compare, forward"),
    ("toy_logits", "1,2", "toy_logits must have 5 numbers"),
    ("toy_logits", "1,2,x,4,5", "must be a number"),
    ("toy_shift", "11", "toy_shift must be a number between -10 and 10"),
    ("toy_temperature", "-1", "toy_temperature must be a number between 0 and 2"),
    ("engine", "[[", "engine must be the table as JSON"),
    ("engine", '{"a": 1}', "engine must be the table as JSON"),
    ("engine", '[["hi", 1, 0, 1, 0, "openai"]]', "engine: row 1, order must be one of hf, vllm, llama.cpp"),
    ("engine", '[["", 1]]', "engine: row 1"),
    ("engine", '[["hi", 1, 0, 1, 0, "vllm", "", 8, "", 1, 3]]', "engine: row 1, frequency penalty must be a number between -2"),
    ("engine", '[["hi", 1, 0, 1, 0, "hf", "", 8, "", 1, 0, 0.5]]', "engine: row 1, presence penalty is not part of the hf"),
    ("fw_block", "0", "fw_block must be a whole number between 1 and 1,000"),
    ("fw_head", "x", "fw_head must be a whole number between -1 and 1,000"),
    ("fw_chat", "maybe", "fw_chat must be true or false"),
])
def test_each_bad_field_is_named_and_the_rest_still_applies(name, raw, why):
    values, problems = parse_query({name: raw, "temperature": "0.5"})
    assert values == {"temperature": 0.5}
    assert len(problems) == 1 and why in problems[0] and problems[0].endswith("the default is kept")


def test_an_unknown_field_is_named_in_the_links_language_and_never_fatal():
    values, problems = parse_query({"<b>x</b>": "1", "lang": "vi", "tab": "engine"})
    assert values == {"tab": "engine"}
    assert problems and "'<b>x</b>'" in problems[0] and problems[0].startswith("không có thiết lập")


def test_a_bad_field_is_said_in_vietnamese_on_a_vietnamese_link():
    _, problems = parse_query({"toy_logits": "1", "lang": "vi"})
    assert problems == ["toy_logits phải có 5 số cách nhau bằng dấu phẩy (mỗi token của vocabulary đồ chơi một số), "
                        "nhận được 1; giữ giá trị mặc định"]


# ------------------------------------------------------------------ the page's address


def test_a_local_page_links_to_itself():
    headers = {"host": "127.0.0.1:7860", "referer": "http://127.0.0.1:7860/?prompt=x"}
    assert page_url(headers, "http://127.0.0.1:7860/gradio_api/queue/join") == "http://127.0.0.1:7860"
    assert page_url({"host": "10.0.0.5:7860"}, "http://10.0.0.5:7860/gradio_api/queue/join") == "http://10.0.0.5:7860"


def test_behind_a_proxy_the_forwarded_host_scheme_and_prefix_win():
    headers = {"Host": "127.0.0.1:7860", "X-Forwarded-Host": "ntp.example.org, proxy.internal",
               "X-Forwarded-Proto": "https,http", "Referer": "http://127.0.0.1:7860/"}
    assert page_url(headers, "http://127.0.0.1:7860/x") == "https://ntp.example.org"
    assert page_url({**headers, "X-Forwarded-Prefix": "/workshop/"}) == "https://ntp.example.org/workshop"
    assert page_url(headers, root_path="/ntp") == "https://ntp.example.org/ntp"
    assert page_url(headers, root_path="https://class.example.org/ntp/") == "https://class.example.org/ntp"


def test_on_a_space_the_link_is_the_spaces_page_and_the_direct_address_is_known():
    machine = detect({"SPACE_ID": "teacher/next-token", "SPACE_HOST": "teacher-next-token.hf.space"})
    headers = {"host": "teacher-next-token.hf.space", "x-forwarded-host": "teacher-next-token.hf.space",
               "x-forwarded-proto": "https"}
    base = page_url(headers, machine=machine)
    assert base == "https://huggingface.co/spaces/teacher/next-token"
    assert absolute(base, "scene=l10-tokens") == "https://huggingface.co/spaces/teacher/next-token?scene=l10-tokens"
    assert space_direct_url(machine) == "https://teacher-next-token.hf.space"
    assert space_direct_url(Machine()) is None


def test_absolute_links_have_a_host_and_parse_back():
    link = absolute("http://127.0.0.1:7860", make_query({"tab": "softmax", "toy_temperature": 0.5}))
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "127.0.0.1:7860", "/")
    assert parse_query(dict(parse_qsl(parts.query)))[0] == {"tab": "softmax", "toy_temperature": 0.5}
