"""Does the model serving the room read the page's language as words? A note under the header when it does not.

SmolLM2 learned almost no Vietnamese: it splits "Thủ đô của Pháp là" (5 words) into 15 tokens, most of them a
byte of a letter like "ủ" (a piece that is not a character on its own, shown as \\xNN). The lessons' figures (the
chips, the stage bars, the greedy loop) then talk about bytes, not words. The offline Gemma 3 270M reads the same
prompt as words. So on a Vietnamese page, a model that splits the lesson's prompt into byte pieces is named, with
its counts, and Gemma is offered: in the model menu when the host may switch to it, else how to start with it.

Tokenizer work only (encode, pieces_of: no forward pass), once per model and language.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from .common.i18n import LESSON_PROMPTS, tr
from .common.text import escape_html

MULTILINGUAL = "gemma3-270m"  # the offline model that reads Vietnamese as words (model_service/models/catalog.py)
CHECKED = ("vi",)  # the page's languages whose lesson prompt is checked (English is every model's own)


@dataclass(frozen=True)
class Fit:
    """How a model tokenises the lesson's prompt in one language."""

    model: str
    prompt: str
    words: int
    tokens: int
    byte_pieces: int  # tokens that hold part of a character, not a whole one

    @property
    def splits(self) -> bool:
        return self.byte_pieces > 0


_fits: dict[tuple[str, str], Fit] = {}


def fit(service, lang: str) -> Fit | None:
    """The serving model's fit for the page's language; None for English, or while no model serves."""
    if lang not in CHECKED or not service.status.ready:
        return None
    name = service.info.name
    if (name, lang) not in _fits:
        prompt = LESSON_PROMPTS[lang]
        ids = service.encode(prompt)
        pieces = service.pieces_of(ids)
        shown = [pieces[i] for i in ids if not pieces[i].special]
        _fits[(name, lang)] = Fit(name, prompt, len(prompt.split()), len(shown),
                                  sum(1 for p in shown if p.bytes_hex))
    return _fits[(name, lang)]


def fit_markdown(service, lang: str, can_switch: bool) -> str:
    """The note ("" when the model reads the language as words). can_switch: the host may pick Gemma in the menu."""
    found = fit(service, lang)
    if found is None or not found.splits:
        return ""
    offered = MULTILINGUAL in (getattr(service, "models", ()) or ())
    offer = ("language_fit.offer.menu" if offered and can_switch else
             "language_fit.offer.host" if offered else "language_fit.offer.start")
    return tr(lang, "language_fit.note", model=escape_html(found.model), prompt=escape_html(found.prompt),
              words=found.words, tokens=found.tokens, bytes=found.byte_pieces) + " " + tr(lang, offer)


def build_fit_note() -> gr.Markdown:
    """Under the header's band (it scrolls away: said once): hidden, taking no room, unless the model splits."""
    return gr.Markdown("", visible=False, elem_id="language-fit", elem_classes=["ntp-note"])


def note_update(service, lang: str, can_switch: bool) -> gr.Markdown:
    text = fit_markdown(service, lang, can_switch)
    return gr.Markdown(text, visible=bool(text))


def watcher(service, note: gr.Markdown, can_switch: bool):
    """The header's watcher (header.py): the note again whenever a model starts serving."""
    return [note], lambda info, first, lang: {note: note_update(service, lang, can_switch)}


__all__ = ["CHECKED", "Fit", "MULTILINGUAL", "build_fit_note", "fit", "fit_markdown", "note_update", "watcher"]
