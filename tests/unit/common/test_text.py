"""The shared words: why a run stopped, in either language."""

from playground.common.text import STOP_REASON_KEYS, STOP_REASONS, stop_reason


def test_stop_reasons_in_english_are_as_every_tab_said_them():
    assert STOP_REASONS == {"eos": "end-of-text token", "max_tokens": "reached max new tokens",
                            "stop_string": "stop string"}
    assert all(stop_reason(code) == STOP_REASONS[code] for code in STOP_REASON_KEYS)


def test_stop_reasons_in_vietnamese_and_an_unknown_code():
    assert stop_reason("eos", "vi") == "token kết thúc văn bản"
    assert stop_reason("max_tokens", "vi") == "đạt số token mới tối đa"
    assert all(stop_reason(code, "vi") != STOP_REASONS[code] for code in STOP_REASON_KEYS)
    assert stop_reason("length", "vi") == "length" and stop_reason(None) == "None"
