"""A lab run as the page keeps it (`Run`: what was asked, the records that came back), and the lines that
describe it: a step's status line, the line of a run waiting for a row in the shared batch, the note of a
sampler order, and the charts before there is a run.

Finished runs live in gr.State as records, so scrubbing back never recomputes anything, and a change of the
page's language redraws every view from them.
"""

from __future__ import annotations

import re
import secrets
import time
from collections import deque
from dataclasses import dataclass, field

from model_service.records import validation
from model_service.records.step import StepRecord
from playground import limits

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
    # Stop (handlers.stop_run tells how): what streams into the lab's views from this run ("run": Generate,
    # "branch": a forced branch, "": nothing), the tag its chips carry, the chips of it the page says it has
    # (None: no page counts them, an API caller), the presses of Stop so far and what the page showed at the
    # last one ((tag, chips); None from an API caller)
    streaming: str = ""
    tag: str = ""
    page_chips: int | None = None
    stop_presses: int = 0
    stop_seen: tuple[str, int] | None = None
    # the step the learner scrubbed to (0-based; None: the last). A language change redraws that step from here:
    # the scrubber's value its event carries was read when the event was queued, maybe before this run began
    scrubbed: int | None = None
    # the live lab (what_if.py): the page's name for the run whose logits the service keeps (its session's), the
    # what-if on screen (None: the run's own step) and a count of knob moves (a late answer to an older move is dropped)
    keep: str = ""
    what_if: object = None
    what_if_serial: int = 0
    replayed: bool = False  # its records are a scene's run kept at start (replays.py), shown at once
    # Continue from here (what_if.continue_run): (the run it continued: its request with its seed, its records, the
    # 0-based step it switched settings at), which the Branches panel keeps as a branch (branch_panel.adopt)
    continued_from: tuple | None = None
    # a branch of the Branches panel's tree: the root run's request and the path from it (branches.py); a run file
    # writes both, as a link does
    branch_root: RunRequest | None = None
    branch_path: tuple = ()
    # a branch forced from this run (branch_panel.force): the presses of Stop it had seen at its last look, and the
    # run it left on the page (a Stop that read this run as the branch ended cuts that one: handlers.stop_run)
    stop_looked: int = 0
    successor: Run | None = None

    @property
    def finished(self) -> bool:
        return bool(self.records) and (self.records[-1].stop_reason is not None or self.stop_requested)

    @property
    def mid_stream(self) -> bool:
        """Steps are still streaming in: the stage charts follow them at their pace, while the views of one
        step under them (Look inside, the batch effect) wait for the run to end or stop, and then draw once."""
        return bool(self.streaming) and not self.finished

    def drawn_as(self, index: int | None, *more) -> tuple:
        """What a view of step `index` of this run is drawn from (this run, how far it got, the step, and `more`:
        the language, an open panel): a view handler that last drew the same can skip the redraw. A Plot fires
        its change event on every new value, even an equal one, so a view that redrew on its trigger regardless
        could set off another round of itself (after a branch was stopped: ~6 redraws a second, for ever)."""
        return id(self), len(self.records), self.finished, self.scrubbed, index, *more

    def redraw(self, drawn, index: int | None, *more) -> tuple | None:
        """The key (drawn_as) to draw step `index`'s views under now, or None when they need no redraw: steps
        still stream in (the run's end, or Stop, draws them), or the views show that key (`drawn`) already."""
        key = self.drawn_as(index, *more)
        return None if self.mid_stream or key == drawn else key

    def progress(self) -> tuple:
        """What a redraw of this run depends on besides the language: it changed if any of these did."""
        return self.streaming, len(self.records), self.finished, self.scrubbed

    def shown_step(self) -> int | None:
        """The step the page shows when it is not the last (0-based), else None."""
        i = self.scrubbed
        return i if self.finished and i is not None and 0 <= i < len(self.records) - 1 else None

    def shown_index(self) -> int:
        """The step the page shows (0-based): the scrubbed one, else the last."""
        i = self.shown_step()
        return len(self.records) - 1 if i is None else i

    def shown_on_page(self, tag: str, count: int) -> int:
        """How many of `count` records the page showed when Stop was pressed: the chips it counted, if they
        were this stream's (`tag`); none if they were another run's; all of them for an API caller."""
        if self.stop_seen is None:
            return count
        seen_tag, chips = self.stop_seen
        return min(chips, count) if seen_tag == tag else 0


STOP_WAIT_S = 1.5  # how long Stop waits for the streaming handler to freeze the views itself (a step is ~0.1-0.5 s)
PAGE_WAIT_S = 2.0  # how long a streaming handler holds its updates for a page that has not said it has the last one
PAGE_AHEAD = 5  # updates a streaming handler may send before the page says it has the first of them (Pace)
_SEEN = re.compile(r"([0-9a-f]{0,16}):(.*)", re.S)


def new_tag() -> str:
    """A stream's tag: its chips carry it on the page, so that Stop can tell whose chips the page counted."""
    return secrets.token_hex(4)


def parse_seen(value) -> tuple[str, int] | None:
    """What the page showed when Stop was pressed, as its js sends it ("tag:chips", chips.STOP_JS): (tag, chips).
    Blank (an API caller): None. Raises ValueError naming the field."""
    if validation.is_blank(value):
        return None
    match = _SEEN.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"chips on the page must be text like 'a1b2c3d4:15' (tag:chips), got {str(value)[:40]!r}")
    return match[1], validation.number("chips on the page", match[2], integer=True, low=0)


class Pace:
    """Keeps a streaming handler at most PAGE_AHEAD updates ahead of its page. The page renders updates one after
    the other, at times slower than a model makes tokens (a chart is a Plotly redraw), and Gradio's client renders
    every update it has received, even after Stop: a handler that sent every token would have the page seconds
    behind, and Stop would land in the middle of that queue. So the page says what it has (the chips' ack,
    common/acks.py) and, while it lacks the update PAGE_AHEAD - 1 before the last one sent, the tokens that come
    wait for the next one (every token is still read: the model's row runs on). A few ahead, not one: while the
    page draws a chart the next tokens are already on their way, each its own update, instead of waiting for the
    redraw and coming together (bench_render: one ahead sent 3-4 chips at once once or twice a run; five ahead,
    one chip an update in every run). What the page renders after a Stop is hidden by Stop's own script
    (chips.STOP_JS), and the frozen update comes next.
    `page()`: the chips (or steps) of this stream the page has, or None while no page counts them (an API
    caller): then every token goes out at once, as before."""

    def __init__(self, page, ahead: int | None = None):
        ahead = PAGE_AHEAD if ahead is None else ahead
        if ahead < 1:
            raise ValueError(f"a stream's lead over its page must be at least 1 update, got {ahead}")
        self.page, self.at = page, 0.0
        self.counts: deque[int] = deque(maxlen=ahead)  # what the last `ahead` updates carried, oldest first

    def behind(self) -> bool:
        """True while the page lacks the update `ahead - 1` before the last one sent (PAGE_WAIT_S at most)."""
        shown = self.page()
        full = len(self.counts) == self.counts.maxlen
        return (shown is not None and full and shown < self.counts[0]
                and time.monotonic() - self.at < PAGE_WAIT_S)

    def went(self, sent: int) -> None:
        self.counts.append(sent)
        self.at = time.monotonic()

    def last(self, stopped) -> bool:
        """Hold a stream's last update until the page is no more than its lead behind (PAGE_WAIT_S at most) or
        Stop is pressed; True if it was. A model that ends ahead of its page would otherwise send every chip it
        still held at once, and a Stop pressed while the page showed the first of them could cut nothing."""
        wait_until(lambda: stopped() or not self.behind(), timeout=PAGE_WAIT_S)
        return bool(stopped())


def wait_until(done, timeout: float = STOP_WAIT_S) -> bool:
    """Poll done() every 20 ms until it holds (True) or `timeout` s pass (False)."""
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def drawn_at_rest(progress, draw, tries: int = 3):
    """draw() again while progress() changed under it (`tries` at most): a redraw that runs beside a stream (a
    language change) must not send a picture older than the stream's last update."""
    for _ in range(tries):
        before = progress()
        drawn = draw()
        if progress() == before:
            break
    return drawn


def knife_edge(draw, lang: str = "en") -> str:
    """The note on a draw that another batch's round-off could have turned ("" for the others)."""
    if draw.margin is not None and draw.margin < limits.KNIFE_EDGE_MARGIN:
        return tr(lang, "lab.status.knife_edge", margin=f"{draw.margin:.1e}")
    if draw.logit_gap is not None and draw.logit_gap < limits.KNIFE_EDGE_MARGIN:
        return tr(lang, "lab.status.knife_edge_greedy", gap=f"{draw.logit_gap:.1e}")
    return ""


def status_markdown(run: Run, index: int | None = None, rate: float | None = None, lang: str = "en") -> str:
    if not run.records:
        return tr(lang, "lab.status.stopped_before_first" if run.stop_requested else "lab.status.empty")
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
    edge = knife_edge(r.draw, lang)
    if edge:
        parts.append(edge)
    batch = getattr(r, "batch_size", 1)
    if batch > 1:
        parts.append(tr(lang, "lab.status.batch", batch=batch))
    if rate and not run.replayed:  # (a kept run's tokens/s would be the page's, not the model's)
        parts.append(tr(lang, "lab.status.rate", rate=f"{rate:.1f}"))
    if run.replayed:
        parts.append(tr(lang, "lab.status.replayed"))
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
