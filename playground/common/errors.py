"""Messages to the page. Toasts (gr.Error, gr.Warning) render HTML, and our messages quote what a
visitor typed or put in a link: every message is escaped here, the one place that raises them."""

from __future__ import annotations

import logging

import gradio as gr

from .i18n import DEFAULT, catalogue, language, tr
from .text import escape_plotly as _escape_text  # html.escape without quotes: toasts are not attributes

log = logging.getLogger(__name__)


def toast_text(message) -> str:
    """A message as a toast shows it: '<', '>' and '&' as text, so a quoted payload stays inert. API
    callers read the same text in AppError (quotes stay quotes)."""
    return _escape_text(str(message))


def in_language(error, lang=None, fields: dict[str, str] | None = None) -> str:
    """The error's message in the page's language: a keyed error (model_service.records.validation's InputError,
    Unavailable) is said again from the catalogue; anything else keeps its English text. `fields`: how
    the page names a field in `lang` (the validator's English name -> the label the learner sees)."""
    key, values = getattr(error, "key", None), getattr(error, "values", None)
    lang = language(lang)
    if lang == DEFAULT or not isinstance(values, dict) or f"error.{key}" not in catalogue(lang):
        return str(error)
    if fields and values.get("field") in fields:
        values = {**values, "field": fields[values["field"]]}
    return tr(lang, f"error.{key}", **values)


def user_error(error, lang=None, fields: dict[str, str] | None = None) -> gr.Error:
    """A gr.Error to raise for a bad input or a service that is not ready; the text is escaped."""
    log.info("error toast: %s", error)
    return gr.Error(toast_text(in_language(error, lang, fields)), print_exception=False)


def warn(message, lang=None) -> None:
    """A warning toast; the text (or keyed error) is escaped."""
    log.info("warning toast: %s", message)
    gr.Warning(toast_text(in_language(message, lang)))


def unchanged(*components) -> dict:
    """A handler's "nothing to redraw": Gradio reads an empty dict as one value, so skip explicitly."""
    return {c: gr.skip() for c in components}
