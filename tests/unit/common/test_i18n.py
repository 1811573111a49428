"""The two catalogues and the language choice."""

from pathlib import Path

import pytest

from playground.common import i18n

ROOT = Path(__file__).resolve().parents[3]


def test_both_languages_have_every_key_with_the_same_placeholders():
    en, vi = i18n.catalogue("en"), i18n.catalogue("vi")
    assert set(en) == set(vi), f"only in en: {set(en) - set(vi)}; only in vi: {set(vi) - set(en)}"
    for key in en:
        assert i18n.placeholders(en[key]) == i18n.placeholders(vi[key]), key
        assert vi[key].strip(), key


def test_every_key_the_code_uses_exists():
    used = set()
    for path in (ROOT / "playground").rglob("*.py"):
        used |= i18n.keys_used_in(path.read_text(encoding="utf-8"))
    assert used, "the scan found no keys: the pattern is broken"
    missing = sorted(used - set(i18n.catalogue("en")))
    assert not missing, missing


def test_most_of_the_vietnamese_catalogue_is_translated():
    en, vi = i18n.catalogue("en"), i18n.catalogue("vi")
    same = [k for k in en if en[k] == vi[k] and any(c.isalpha() for c in en[k])]
    # names and symbols may stay as they are (model names, "Softmax & LM head"); prose may not
    assert len(same) <= max(3, len(en) // 10), same


@pytest.mark.parametrize("value, code", [
    ("vi", "vi"), ("VI", "vi"), ("vi-VN", "vi"), ("vi_VN", "vi"), ("en-US", "en"),
    ("fr", "en"), ("", "en"), (None, "en"), (3, "en"), ("<script>", "en"),
])
def test_language_accepts_only_what_we_serve(value, code):
    assert i18n.language(value) == code


def test_tr_fills_placeholders_and_falls_back_to_english_for_a_junk_language():
    assert i18n.tr("vi", "page.model.ready", description="X") == "**Mô hình:** X"
    assert i18n.tr("xx", "page.model.ready", description="X") == "**Model:** X"


def test_T_refuses_an_unknown_key_when_the_page_is_built():
    with pytest.raises(KeyError):
        i18n.T("no.such.key")


def test_the_load_script_carries_the_hosts_language_only_when_valid():
    assert '"vi"' in i18n.html_lang_script("vi")
    assert "host = null" in i18n.html_lang_script(None)
    assert "</script>" not in i18n.html_lang_script("</script>")


def test_the_english_catalogue_says_every_error_as_the_service_and_the_page_do():
    from model_service.records.validation import MESSAGES
    from playground.common.page_errors import PAGE_MESSAGES, PageInputError

    en = i18n.catalogue("en")
    assert {k: en[f"error.{k}"] for k in MESSAGES} == MESSAGES
    assert {k: en[f"error.{k}"] for k in PAGE_MESSAGES} == PAGE_MESSAGES
    assert str(PageInputError("room_unknown", code="ABCDE")).startswith("there is no open room ABCDE")


def test_a_keyed_error_is_said_in_the_pages_language_and_others_stay_english():
    from model_service.records import validation
    from playground.common.errors import in_language

    with pytest.raises(validation.InputError) as caught:
        validation.number("temperature", "abc", low=0, high=100)
    error = caught.value
    assert in_language(error, "en") == str(error) == "temperature must be a number between 0 and 100, got 'abc'"
    assert in_language(error, "vi") == "temperature phải là một số từ 0 đến 100, nhận được 'abc'"
    assert in_language(ValueError("plain"), "vi") == "plain"
    assert in_language("Link: x", "vi") == "Link: x"


def test_the_lesson_prompt_is_swapped_only_while_it_is_the_other_languages_default():
    en, vi = i18n.LESSON_PROMPTS["en"], i18n.LESSON_PROMPTS["vi"]
    assert (en, vi) == ("The capital of France is", "Thủ đô của Pháp là")
    assert i18n.swapped_default(en, "vi", i18n.LESSON_PROMPTS) == vi
    assert i18n.swapped_default(vi, "en", i18n.LESSON_PROMPTS) == en
    assert i18n.swapped_default(vi, "vi", i18n.LESSON_PROMPTS) is None  # already right: nothing to send
    assert i18n.swapped_default("The capital of Italy is", "vi", i18n.LESSON_PROMPTS) is None  # typed: kept
    assert i18n.swapped_default(en + " ", "vi", i18n.LESSON_PROMPTS) is None
    assert i18n.swapped_default(en, "fr", i18n.LESSON_PROMPTS) is None  # junk means English: already English


def test_chart_builders_can_translate_without_loading_gradio():
    import subprocess
    import sys

    code = "import sys, playground.common.i18n as i; i.tr('vi', 'common.stop.eos'); print('gradio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
