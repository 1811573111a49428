"""The presenter view's keys (playground/workshop/presenter.py KEYS_JS): installed once, in both languages."""

from __future__ import annotations

import json
import re

from playground.common.i18n import LANGUAGES, tr
from playground.workshop import presenter


def test_the_keys_script_carries_its_help_in_every_language_escaped():
    script = presenter.keys_js()
    texts = json.loads(re.search(r"const texts = (\{.*?\});\n", script).group(1))
    assert set(texts) == set(LANGUAGES)
    for code in LANGUAGES:
        assert set(texts[code]) == set(presenter.KEY_TEXTS)
        assert texts[code]["step"] == tr(code, "presenter.keys.step")
    assert texts["vi"]["space"] == "Phím cách" and texts["en"]["hint"] == "? keys"
    assert "__TEXTS__" not in script and "<" not in "".join(texts["en"].values())  # escaped: no markup of ours


def test_the_keys_leave_typing_modifiers_and_the_scene_keys_alone():
    script = presenter.KEYS_JS
    assert "if (window.ntpPresenterKeys) return;" in script  # a second load installs nothing
    assert "e.altKey || e.ctrlKey || e.metaKey" in script  # Alt+← / → move scenes (scene_bar.py)
    assert "PageUp" not in script.split('document.addEventListener("keydown"')[1]
    for box in ("TEXTAREA", "SELECT", "isContentEditable"):
        assert box in script
