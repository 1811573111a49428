"""The note a Vietnamese page shows when the model reads Vietnamese as bytes (playground/language_fit.py): its
counts, its offer of Gemma (in the menu, by the host, at start) and the model's name escaped."""

from __future__ import annotations

from types import SimpleNamespace

from model_service.records.step import Token
from playground import language_fit


class Splitting:
    """A service whose tokenizer cuts every letter with a mark into two byte pieces (as SmolLM2 does)."""

    def __init__(self, name="Tiny<b>", models=()):
        self.status, self.info, self.models = SimpleNamespace(ready=True), SimpleNamespace(name=name), models

    def encode(self, text):
        return list(range(len(text.encode())))

    def pieces_of(self, ids):
        return {i: Token(i, "\\xe1", bytes_hex="e1" if i % 2 else "") for i in ids}


def test_the_note_counts_the_pieces_and_offers_gemma_as_the_room_can_have_it(monkeypatch):
    monkeypatch.setattr(language_fit, "_fits", {})
    service = Splitting()
    note = language_fit.fit_markdown(service, "vi", can_switch=False)
    assert "Tiny&lt;b&gt;" in note and "(5 từ)" in note and "--model gemma3-270m" in note
    offered = Splitting(name="Other", models=("smollm2", "gemma3-270m"))
    assert "menu mô hình" in language_fit.fit_markdown(offered, "vi", can_switch=True)
    assert "chỉ người chủ trì" in language_fit.fit_markdown(offered, "vi", can_switch=False)
    assert language_fit.fit_markdown(service, "en", can_switch=True) == ""  # English: every model's own


def test_no_note_while_no_model_serves(monkeypatch):
    monkeypatch.setattr(language_fit, "_fits", {})
    service = Splitting()
    service.status = SimpleNamespace(ready=False)
    assert language_fit.fit(service, "vi") is None
