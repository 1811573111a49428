"""Messages to the page. Toasts (gr.Error, gr.Warning) render HTML, and our messages quote what a
visitor typed or put in a link: every message is escaped here, the one place that raises them."""

from __future__ import annotations

import gradio as gr

from .text import escape_plotly as _escape_text  # html.escape without quotes: toasts are not attributes


def toast_text(message) -> str:
    """A message as a toast shows it: '<', '>' and '&' as text, so a quoted payload stays inert. API
    callers read the same text in AppError (quotes stay quotes)."""
    return _escape_text(str(message))


def user_error(error) -> gr.Error:
    """A gr.Error to raise for a bad input or a service that is not ready; the text is escaped."""
    return gr.Error(toast_text(error), print_exception=False)


def warn(message: str) -> None:
    """A warning toast; the text is escaped."""
    gr.Warning(toast_text(message))


def unchanged(*components) -> dict:
    """A handler's "nothing to redraw": Gradio reads an empty dict as one value, so skip explicitly."""
    return {c: gr.skip() for c in components}
