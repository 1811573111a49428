"""Two languages, one app: English and Vietnamese, from one catalogue per language (assets/i18n/*.json).

Two kinds of text, one choice of language:
- static component text (labels, help, button values, choices, lesson Markdown) is `T(key)`: Gradio's
  gr.I18n sends the key and the browser shows the current language's string;
- text built on the server (status lines, chart titles, axis labels, hover text, messages) is
  `tr(lang, key, **values)`, where `lang` is the header's language picker, an input of every handler.

Gradio 6's frontend picks its locale only among languages it ships its own strings for, and Vietnamese is
not one of them: on a vi-VN browser it would fall back to English. So the page chooses the language itself
on load (`?lang=` in the link, else the host's `--lang`, else the browser's languages, else English), tells
Gradio's i18n store (`changeLocale`, from Gradio's own already-loaded core module: no second copy) and
writes it into the picker, which every server-side view reads. The picker in the header switches both.
"""

from __future__ import annotations

import json
import re
import string
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from playground import limits

if TYPE_CHECKING:  # gradio is imported where it is used: chart builders call tr() and must not load it
    import gradio as gr
    from gradio.i18n import I18nData

CATALOGUES = Path(__file__).resolve().parents[2] / "assets" / "i18n"
LANGUAGES = {"en": "English", "vi": "Tiếng Việt"}  # code -> its own name (what the picker shows)
DEFAULT = "en"


@cache
def catalogue(lang: str) -> dict[str, str]:
    """key -> text, as written in assets/i18n/<lang>.json."""
    return json.loads((CATALOGUES / f"{lang}.json").read_text(encoding="utf-8"))


def language(value) -> str:
    """A language code we serve; anything else (a junk link parameter, None) is the default."""
    if isinstance(value, str):
        code = value.strip().lower().replace("_", "-").split("-")[0]
        if code in LANGUAGES:
            return code
    return DEFAULT


def tr(lang, key: str, **values) -> str:
    """Server-built text in `lang`: the catalogue's string with {placeholders} filled. Values are
    inserted as given: a caller that puts a visitor's text into HTML escapes it first."""
    text = catalogue(language(lang))[key]
    return text.format(**values) if values else text


LESSON_PROMPTS = {"en": limits.LESSON_PROMPT, "vi": limits.LESSON_PROMPT_VI}  # the lessons' prompt, per language
PATCH_SOURCES = {"en": limits.PATCH_SOURCE, "vi": limits.PATCH_SOURCE_VI}  # the prompt patched into it (intervene.py)
STEER_PROMPTS = {"en": limits.STEER_PROMPT, "vi": limits.STEER_PROMPT_VI}  # steering's three prompts (intervene.py)
STEER_TOWARDS = {"en": limits.STEER_TOWARDS, "vi": limits.STEER_TOWARDS_VI}
STEER_AWAY = {"en": limits.STEER_AWAY, "vi": limits.STEER_AWAY_VI}


def swapped_default(current, lang, versions: dict[str, str]) -> str | None:
    """A box's text after the page's language became `lang`: `versions[lang]` when the box still holds
    another language's version (the visitor has not typed there); None when it must be left as it is."""
    wanted = versions.get(language(lang))
    if wanted is None or current == wanted or current not in versions.values():
        return None
    return wanted


def T(key: str) -> I18nData:
    """Static component text; the browser shows it in the page's language. The key must exist."""
    from gradio.i18n import I18nData

    catalogue(DEFAULT)[key]  # a typo fails when the page is built, not silently in the browser
    return I18nData(key)


def translations() -> gr.I18n:
    """For launch(i18n=...): every catalogue, as Gradio's frontend reads them."""
    import gradio as gr

    return gr.I18n(**{lang: catalogue(lang) for lang in LANGUAGES})


def placeholders(text: str) -> set[str]:
    """The {names} a catalogue string expects (both languages must expect the same)."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def html_lang_script(default: str | None) -> str:
    """JS for the page's load event: choose the language, switch Gradio's strings, return the code
    (the output is the header's picker). `default` is the host's --lang, or None for the browser's."""
    host = json.dumps(language(default) if default else None)
    return _LOAD_JS.replace("__HOST__", host).replace("__LANGS__", json.dumps(list(LANGUAGES)))


# Gradio's core module (svelte-i18n's store behind it) is already loaded; import() returns that instance.
_SET_LOCALE = """
async function ntpSetLocale(code) {
  const url = performance.getEntriesByType('resource').map(e => e.name).find(n => /\\/core-[^/]*\\.js$/.test(n));
  if (url) { try { (await import(url)).changeLocale(code); } catch (e) { console.warn('language switch', e); } }
  document.documentElement.lang = code;
}
"""
_LOAD_JS = (
    "async () => {" + _SET_LOCALE + """
  const langs = __LANGS__, host = __HOST__;
  const pick = (v) => { const c = (v || '').toLowerCase().split('-')[0]; return langs.includes(c) ? c : null; };
  const code = pick(new URLSearchParams(location.search).get('lang')) || host
    || (navigator.languages || [navigator.language]).map(pick).find(Boolean) || 'en';
  // a learner who picked a language before this ran (a loaded machine answers late) keeps it: the picker is
  // this event's output, and returning the link's or the browser's would undo the click (SWITCH_JS notes it)
  if (!window.__ntpLang) await ntpSetLocale(code);
  const picked = window.__ntpLang;  // (a pick made while the line above awaited: its locale again)
  if (picked && picked !== code) await ntpSetLocale(picked);
  return picked || code;
}"""
)
SWITCH_JS = "async (code) => {" + _SET_LOCALE + " window.__ntpLang = code; await ntpSetLocale(code); return code; }"

_KEY = re.compile(r"""\b(?:T|tr)\(\s*(?:[a-z_]+\s*,\s*)?["']([a-z0-9_.]+)["']""")


def keys_used_in(source: str) -> set[str]:
    """The literal keys a module passes to T() or tr() (the test checks that each exists)."""
    return set(_KEY.findall(source))
