from urllib.parse import parse_qsl

from playground.common.lab_link import lab_query
from playground.lab.deep_link import FIELDS, parse_query


def test_a_link_round_trips_the_settings():
    values = {"prompt": "The capital of France is", "chat": True, "temperature": 0.5, "top_k": 40, "top_p": 0.9,
              "min_p": 0.05, "seed": "7", "max_new_tokens": 30, "stop": "\\n", "order": "vllm"}
    parsed, problems = parse_query(dict(parse_qsl(lab_query(values))))
    assert problems == [] and parsed == values


def test_defaults_are_left_out():
    assert lab_query({"prompt": "hi", "temperature": 1.0, "top_k": 0, "order": "hf", "max_new_tokens": 48}) == "prompt=hi"
    assert lab_query({"prompt": "hi", "max_new_tokens": 20}) == "prompt=hi&max_new_tokens=20"


def test_bad_and_unknown_parameters_are_reported_not_fatal():
    values, problems = parse_query({"temperature": "hot", "order": "openai", "colour": "red", "top_p": "0.5"})
    assert values == {"top_p": 0.5}
    assert len(problems) == 3 and any("temperature" in p for p in problems) and any("colour" in p for p in problems)


def test_out_of_range_values_are_named_at_load_and_the_default_kept():
    values, problems = parse_query({"temperature": "5", "max_new_tokens": "1000", "seed": "9007199254740993"})
    assert values == {}
    assert any(p.startswith("temperature must be a number between 0 and 2, got '5'") for p in problems)
    assert any("max_new_tokens must be a whole number between 1 and 512" in p for p in problems)
    assert any(p.startswith("seed must be a whole number between 0 and 9,007,199,254,740,991") for p in problems)
    assert all(p.endswith("the default is kept") for p in problems)


def test_stop_strings_and_big_seeds_round_trip_exactly():
    values = {"prompt": "a|b", "stop": "\\n|x\\|y", "seed": "9007199254740991"}
    parsed, problems = parse_query(dict(parse_qsl(lab_query(values))))
    assert problems == [] and parsed == values


def test_a_vietnamese_page_puts_its_language_in_the_link_and_parsing_ignores_it():
    query = lab_query({"prompt": "Thủ đô của Pháp là", "temperature": 0.5}, lang="vi")
    assert dict(parse_qsl(query)) == {"prompt": "Thủ đô của Pháp là", "temperature": "0.5", "lang": "vi"}
    assert parse_query(dict(parse_qsl(query))) == ({"prompt": "Thủ đô của Pháp là", "temperature": 0.5}, [])


def test_an_english_link_stays_short_unless_the_host_opens_pages_in_another_language():
    assert lab_query({"prompt": "hi"}, lang="en") == "prompt=hi"
    assert lab_query({"prompt": "hi"}, lang="en", host_lang="vi") == "prompt=hi&lang=en"
    assert lab_query({"prompt": "hi"}, lang="<script>") == "prompt=hi"  # junk is the default, English


def test_a_vietnamese_links_problems_are_said_in_vietnamese():
    values, problems = parse_query({"lang": "vi", "temperature": "5", "colour": "red"})
    assert values == {}
    assert problems == [
        "temperature phải là một số từ 0 đến 2, nhận được '5'; giữ giá trị mặc định",
        f"không có thiết lập 'colour' (các thiết lập có: {', '.join(FIELDS)})",
    ]


def test_a_links_controls_are_the_labs_in_one_order():
    from playground.lab.components import CONTROL_NAMES
    from playground.lab.deep_link import CONTROLS

    assert CONTROLS == CONTROL_NAMES  # the page's link reads the lab's components in this order


def test_a_link_carries_dry_mirostat_and_a_custom_chain():
    from playground.lab.deep_link import parse_query

    values, problems = parse_query({"order": "custom", "chain": "top_k > min_p > temperature", "dry_multiplier": "0.8",
                                    "dry_sequence_breakers": "\\n|:", "mirostat": "2", "mirostat_tau": "3"})
    assert problems == [] and values == {"order": "custom", "chain": "top_k, min_p, temperature", "dry_multiplier": 0.8,
                                         "dry_sequence_breakers": "\\n|:", "mirostat": 2, "mirostat_tau": 3.0}
    _, problems = parse_query({"chain": "top_k > beam"})
    assert problems and "chain: 'beam' is not a stage a chain can order" in problems[0]


def test_a_link_carries_top_h_and_checks_it_within_its_slider():
    from playground.lab.deep_link import parse_query

    values, problems = parse_query({"top_h": "0.4", "temperature": "0.7"})
    assert problems == [] and values == {"top_h": 0.4, "temperature": 0.7}
    values, problems = parse_query({"top_h": "1.5"})
    assert values == {} and "top_h must be a number between 0 and 1" in problems[0]
