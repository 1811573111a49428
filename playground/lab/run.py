"""A lab run as the page keeps it (`Run`: what was asked, the records that came back), and the lines that
describe it: a step's status line, the line of a run waiting for a row in the shared batch, the note of a
sampler order, and the charts before there is a run.

Finished runs live in gr.State as records, so scrubbing back never recomputes anything, and a change of the
page's language redraws every view from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model_service.records.step import StepRecord

from ..common.i18n import tr
from ..common.text import escape_html, prob_text, show_steps, stop_reason
from .request import ORDER_NOTES, RunRequest
from .view import View, placeholders


@dataclass
class Run:
    """One generation as the page keeps it: what was asked, the records that came back, and whether
    the learner pressed Stop (the streaming handler reads it between steps and stops at once). `lang` is the
    page's language: a change of it reaches a streaming handler the same way, between steps."""

    request: RunRequest | None = None
    records: list[StepRecord] = field(default_factory=list)
    stop_requested: bool = False
    lang: str = "en"
    rate: float | None = None  # tokens/s of a streamed run, as its status line said it
    model: str = ""  # the model that drew these tokens: Step continues a run only on that model
    view: View = View()  # how the page draws it: a toggle reaches a streaming run between steps, as `lang` does

    @property
    def finished(self) -> bool:
        return bool(self.records) and (self.records[-1].stop_reason is not None or self.stop_requested)


def status_markdown(run: Run, index: int | None = None, rate: float | None = None, lang: str = "en") -> str:
    if not run.records:
        return tr(lang, "lab.status.empty")
    i = len(run.records) - 1 if index is None else index
    r, shown = run.records[i], show_steps(run.records, i, i + 1, lang)[0]
    final = r.stage("final").chosen_prob if r.stages else None
    token = dict(piece=escape_html(shown.text), id=r.token_id, rank=r.chosen_rank + 1)
    keys = ("lab.status.token", "lab.status.token_p")
    if shown.words:  # a piece of a split character: which bytes of it
        keys, token["part"] = ("lab.status.token_split", "lab.status.token_split_p"), escape_html(shown.words)
    parts = [
        tr(lang, "lab.status.step", step=r.step + 1, total=len(run.records)),
        tr(lang, keys[0], **token) if final is None else tr(lang, keys[1], **token, p=prob_text(final)),
        tr(lang, "lab.status.greedy") if r.draw.u is None
        else tr(lang, "lab.status.drawn", u=f"{r.draw.u:.3f}", seed=r.seed),
        tr(lang, "lab.status.timing", forward=f"{r.forward_ms:.0f}", sampling=f"{r.sampling_ms:.1f}"),
    ]
    batch = getattr(r, "batch_size", 1)
    if batch > 1:
        parts.append(tr(lang, "lab.status.batch", batch=batch))
    if rate:
        parts.append(tr(lang, "lab.status.rate", rate=f"{rate:.1f}"))
    last = run.records[-1]
    if last.stop_reason:
        parts.append(tr(lang, "lab.status.stopped", reason=stop_reason(last.stop_reason, lang)))
    elif run.stop_requested:
        parts.append(tr(lang, "lab.status.stopped_by_you", step=len(run.records)))
    return " · ".join(parts)


def waiting_markdown(waiting, lang: str = "en") -> str:
    return tr(lang, "lab.waiting.one" if waiting.ahead == 1 else "lab.waiting.many", ahead=waiting.ahead)


def order_note_text(order: str, lang: str = "en") -> str:
    """What the chosen sampler order changes, under the order's radio."""
    return tr(lang, ORDER_NOTES[order]) if order in ORDER_NOTES else ""


def placeholder_figures(lang: str = "en", view: View = View()) -> tuple:
    """The stage, draw and run charts before there is a run: what each will show, in `lang`."""
    return placeholders(view, lang)
