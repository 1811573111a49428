"""The lab's controls -> one request; its errors name the control as the learner reads it, in either language."""

from __future__ import annotations

import pytest

from playground.common.errors import in_language
from playground.lab.request import FIELD_LABELS, field_labels, parse_request

ARGS = dict(prompt="Hi", chat=False, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed="", max_new_tokens=8,
            stop="", order="hf")


def error_of(**changes) -> ValueError:
    with pytest.raises(ValueError) as caught:
        parse_request(**{**ARGS, **changes})
    return caught.value


def test_errors_name_the_control_in_the_pages_language():
    error = error_of(max_new_tokens=0)
    assert in_language(error, "en", field_labels("en")) == "max new tokens must be a whole number between 1 and 512, got 0"
    assert in_language(error, "vi", field_labels("vi")) == (
        "Số token mới tối đa phải là một số nguyên từ 1 đến 512, nhận được 0")
    order = in_language(error_of(order="openai"), "vi", field_labels("vi"))
    assert order.startswith("Thứ tự trong sampler phải là một trong ")
    # terms learners meet in code keep their names
    assert in_language(error_of(seed="abc"), "vi", field_labels("vi")).startswith("seed phải là một số nguyên")


def test_every_field_label_exists_in_both_languages():
    assert set(field_labels("en")) == set(field_labels("vi")) == set(FIELD_LABELS)
    assert all(field_labels("vi")[name] != name for name in FIELD_LABELS)
