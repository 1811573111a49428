"""The page's header: which model serves the room (with load and switch progress) and the host's model
picker, in a menu that the model line opens (playground/menus.py).

One model serves everyone, so everyone sees which one, and only the host may switch it
(playground/hosting.py:switch_policy: open on a machine nobody else can reach, with the host key in a
room, off on ZeroGPU). The picker sends an allowlist key, checked again on the server, never free text.

After a switch every open page re-reads what depends on the model: each tab hands in a watcher
(its outputs, and a function of the new ModelInfo that returns their updates). A page learns of a new
model from a light timer (limits.MODEL_WATCH_SECONDS; it compares two numbers, no model work); the
handlers check for a stale model themselves too, so nothing depends on the timer's timing.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

import gradio as gr

from model_service.models.catalog import choose, label
from playground import limits

from .common.errors import unchanged, user_error
from .common.i18n import T, tr
from .common.page_errors import PageInputError, PageUnavailable
from .common.text import escape_html
from .hosting import SwitchPolicy
from .menus import panel

Watcher = tuple[list, Callable]  # (outputs, refresh(info, first_time, lang) -> {component: update})


def model_line(status, lang="en", switching: str | None = None) -> str:
    if status.ready and status.error:  # a switch failed and the previous model serves again
        return tr(lang, "page.model.kept", description=escape_html(status.message), error=escape_html(status.error))
    if status.ready:
        return tr(lang, "page.model.ready", description=escape_html(status.message))
    if status.error:
        return tr(lang, "page.model.failed", error=escape_html(status.error))
    key = "page.model.switching" if switching else "page.model.loading"
    return tr(lang, key, percent=f"{status.fraction:.0%}", message=escape_html(status.message))


def default_policy(service) -> SwitchPolicy:
    models = tuple(getattr(service, "models", ()) or ())
    return SwitchPolicy("off", "one_model" if len(models) < 2 else "no_key")


def picker_note(service, policy: SwitchPolicy, lang="en") -> str:
    """Why switching is open, keyed or off, and the models offered (host-given names, escaped)."""
    offered = ", ".join(escape_html(label(k)) for k in getattr(service, "models", ()) or ())
    return tr(lang, "page.picker.note", why=tr(lang, f"page.picker.why.{policy.reason}"), offered=offered)


def build_header(service, policy: SwitchPolicy) -> dict:
    """The status line and the picker, in the current Blocks context."""
    models = tuple(getattr(service, "models", ()) or ())
    # one line in the header row (cut to its first words there); a click on it opens the picker's panel
    status = gr.Markdown(model_line(service.status, switching=getattr(service, "switching", None)),
                         elem_id="model-status")
    with panel("model"):
        full = gr.Markdown(status.value, elem_id="model-line")  # the whole line the header cuts
        picker = gr.Dropdown([(label(k), k) for k in models], value=getattr(service, "current", None) or None,
                             label=T("page.picker.label"), interactive=policy.enabled, elem_id="model-choice")
        with gr.Row(visible=policy.enabled):
            key = gr.Textbox(label=T("page.picker.key"), type="password", visible=policy.mode == "key", scale=2,
                             elem_id="host-key")
            switch = gr.Button(T("page.picker.switch"), scale=1, elem_id="switch-model")
        note = gr.Markdown(picker_note(service, policy), elem_classes=["ntp-note"], elem_id="model-picker-note")
    seen = gr.State((0, ""))  # (the model epoch this page shows, the status line it shows)
    timer = gr.Timer(limits.MODEL_WATCH_SECONDS)
    return {"status": status, "line": full, "picker": picker, "key": key, "switch": switch, "note": note, "seen": seen,
            "timer": timer}


def wire_header(loaded, service, header: dict, watchers: list[Watcher], policy: SwitchPolicy, host_key: str | None,
                language: gr.Radio) -> None:
    """Inside the Blocks context. loaded: the page-load event that sets `language`; the header follows it."""
    status_md, picker, seen = header["status"], header["picker"], header["seen"]
    outputs = [status_md, header["line"], picker, seen] + [c for outs, _ in watchers for c in outs]

    def shows(text: str) -> dict:
        """The model's line, in the header (cut to its first words) and whole in the model's menu."""
        return {status_md: text, header["line"]: text}

    def line(lang) -> str:
        return model_line(service.status, lang, getattr(service, "switching", None))

    def refresh(first: bool, lang) -> dict:
        """Every watcher's numbers from the model now serving; the page remembers its epoch."""
        info = service.info
        out = {picker: service.current, seen: (service.epoch, line(lang)), **shows(line(lang))}
        for _, fn in watchers:
            out |= fn(info, first, lang)
        return out

    def track_loading(lang):
        """On page load: progress while the model loads, then the model's numbers."""
        from model_service.client import wait_until_ready

        for status in wait_until_ready(service):
            yield shows(model_line(status, lang, getattr(service, "switching", None)))
        if service.status.ready:
            yield refresh(True, lang)

    def watch(state, lang):
        """Each tick: a new status line, or a new model (then every tab re-reads its numbers)."""
        epoch, shown = state if isinstance(state, tuple) and len(state) == 2 else (0, "")
        now = line(lang)
        if service.status.ready and service.epoch != epoch:
            return refresh(epoch == 0, lang)
        if now != shown:
            return {**shows(now), seen: (epoch, now)}
        return unchanged(status_md)

    def switch_model(choice, key, lang=None):
        """The host's switch: checked, started, then its progress until the new model serves."""
        try:
            if not policy.enabled:
                raise PageUnavailable("switch_off")
            choice = choose("model", choice, service.models)
            if policy.mode == "key" and not _same(key, host_key):
                time.sleep(limits.HOST_KEY_DELAY_SECONDS)  # guessing through the API stays slow
                raise PageInputError("host_key")
            service.switch(choice)
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang) from None
        shown = ""
        while getattr(service, "switching", None):
            service.wait(0.25)
            if line(lang) != shown:
                shown = line(lang)
                yield shows(shown)
        # the page's tabs re-read their numbers at the next tick, as every other page in the room does
        yield {**shows(line(lang)), picker: getattr(service, "current", None)}

    loaded.then(track_loading, language, outputs, api_visibility="private", show_progress="hidden")
    # not queued: a tick is two comparisons, and 100 pages ticking must not wait behind Generate events
    header["timer"].tick(watch, [seen, language], outputs, api_visibility="private", show_progress="hidden",
                         queue=False)
    header["switch"].click(switch_model, [picker, header["key"], language], [status_md, header["line"], picker],
                           api_name="switch_model", show_progress="hidden", preprocess=False)


def _same(typed, key: str | None) -> bool:
    """The host key, compared in constant time (a timing difference must not spell it out)."""
    if not key or not isinstance(typed, str):
        return False
    return hmac.compare_digest(typed.encode("utf-8"), key.encode("utf-8"))
