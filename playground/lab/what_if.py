"""The live lab: a knob moved after a run redraws the step on screen for the new settings, keeping the run.

    a knob's input (drag, a typed value, a key) ──► what_if: the step on screen (scrubbed, else the last) asked of
        client.what_if with the new settings, the run's seed and tokens ──► its stage and draw charts, and a line:
        "what if T 0.5 · this run drew with T 1.0", the token it would draw now when it differs
    Reset ──► the knobs back to the run's settings, the run's own step again
    Continue from here ──► the run kept up to the step on screen, then on with the new settings and the run's seed
        stream (handlers.continue_run)

The numbers are the service's: the step's own logits (kept by the service for the page's run, so no forward pass),
the pipeline in the new settings' order, the draw at the run's own u (engine/what_if.py). Pure functions and the
handlers here; tab.py wires them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import gradio as gr

from model_service.records.knobs import BY_NAME
from model_service.records.settings import SamplingSettings
from model_service.records.step import WhatIf
from playground import limits

from ..common.errors import unchanged
from ..common.i18n import LESSON_PROMPTS, tr
from ..common.page_post import POST_JS
from ..common.text import escape_html, pct, show_token
from .components import LabComponents
from .handlers import (
    RunValues,
    bad,
    cleared,
    keep_key,
    model_name,
    open_stream,
    rerender,
    scrub_to,
    step_views,
    streamed,
)
from .in_place import REACT_JS
from .request import RunRequest, continued
from .run import Run, new_tag, status_markdown
from .view import View, draw_chart, stage_chart

# The knobs' fast path draws a what-if's figures itself: Plotly.react on the figures already on screen, as Gradio's
# Plot would but without its re-render and its deferred resize (a Plot redraw took 180-290 ms from the knob's input
# to the first change on screen, with the server's answer in by 70-130 ms). The Plot components keep their values.
# (in_place.py)
DRAW_JS = """(text) => {
  const react = __REACT__;
  let figures;
  try { figures = JSON.parse(text || 'null'); } catch (e) { return; }
  if (!figures || !window.Plotly) return;
  const draw = (id, figure) => {
    const div = document.querySelector(`#${id} .js-plotly-plot`);
    if (!div || !figure) return;
    div.dataset.sweep = '';  // a sweep playing here stops: the knobs' picture is the one on screen now
    react(div, figure).then(() => { div.dataset.whatIf = String(figures.serial); });
  };
  draw('stage-plot', figures.stage);
  setTimeout(() => draw('draw-plot', figures.draw), 0);  // its own task: the stage chart is painted first
}""".replace("__REACT__", REACT_JS)

# A knob's input, in the page: its values POSTed to the hidden `what_if` event (common/page_post.py: Gradio's own
# dispatch of a server event cost this page 40-70 ms of its main thread per move, before the request and after it),
# the figures drawn as soon as the answer is in, then the line, the Reset row and the figures' box handed to Gradio as
# this event's outputs, as the server's event would have set them. One move in flight: moves made meanwhile collapse
# to the last, asked when it is back (a drag asks at the server's pace, not at the mouse's). A refusal (a bad value,
# named, escaped by common/errors.py) or a lost connection (escaped here) is said on the line.
ASK_JS = """async (...values) => {
  const post = __POST__, draw = __DRAW__;
  const me = window.__ntpWhatIf || (window.__ntpWhatIf = {busy: false, next: null});
  if (me.busy) { me.next = values; return []; }
  const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const ask = async (asked) => {
    let response, body;
    try {
      response = post("what_if", [null, ...asked]);
      if (!response) return [];
      response = await response;
      body = await response.json();
    } catch (e) {
      return [`⚠ ${escape(e && e.message || e)}`];
    }
    if (!response.ok || !Array.isArray(body.data)) {  // the app's refusals come escaped, as Gradio's toast takes them
      return [`⚠ ${body.title !== undefined ? body.error : escape(body.error || response.statusText)}`];
    }
    if (typeof body.data[2] === 'string') draw(body.data[2]);
    return body.data;
  };
  me.busy = true;
  let out = [];
  try {
    for (let asked = values; asked; asked = me.next) {
      me.next = null;
      out = await ask(asked);
    }
  } finally {
    me.busy = false;
  }
  return out;
}""".replace("__POST__", POST_JS).replace("__DRAW__", DRAW_JS)
SHORT = {"temperature": "T", "order": "order", "stop": "stop"}  # the rest by their rows' labels (records/knobs.py)
SKIPPED = ("seed", "mirostat_mu")  # a what-if draws with the run's seed stream; mirostat's mu is the run's


@dataclass(frozen=True)
class Shown:
    """The what-if on the page: its record, the step it redraws (0-based), what changed from the run's settings."""

    what: WhatIf
    index: int
    changes: tuple[tuple[str, object, object], ...]  # (knob, the run's value, the new one)
    request: RunRequest


def changes(before: RunRequest, after: RunRequest) -> tuple[tuple[str, object, object], ...]:
    """The knobs whose value differs between two requests (the seed aside), in the settings' order, then stop."""
    out = [(f.name, getattr(before.settings, f.name), getattr(after.settings, f.name))
           for f in fields(SamplingSettings) if f.name not in SKIPPED
           and getattr(before.settings, f.name) != getattr(after.settings, f.name)]
    if before.stop != after.stop:
        out.append(("stop", before.stop, after.stop))
    return tuple(out)


def about_the_run(request: RunRequest, run: RunRequest) -> RunRequest | None:
    """The knobs' request as a what-if of the run on screen: its prompt the run's, also where the box holds the run's
    lesson prompt in the page's other language (a language switch swaps an untouched lesson prompt; the run on
    screen stays the one it was, in the prompt it ran); None when the box holds another prompt (or chat mode)."""
    if request.chat != run.chat:
        return None
    if request.prompt == run.prompt:
        return request
    lessons = LESSON_PROMPTS.values()
    return replace(request, prompt=run.prompt) if request.prompt in lessons and run.prompt in lessons else None


def knob_text(name: str, value) -> str:
    """A knob and its value as the line shows it ("T 0.5", "top-k 40", "logit bias 13:-100"), escaped."""
    label = SHORT.get(name) or (BY_NAME[name].label if name in BY_NAME and BY_NAME[name].label else name)
    if isinstance(value, tuple):
        value = ", ".join(":".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in value) or "—"
    elif isinstance(value, float):
        value = f"{value:g}"
    return escape_html(f"{label} {value}")


def what_if_markdown(shown: Shown, run: Run, lang: str = "en") -> str:
    """The line over a what-if: what it shows, with what the run drew, and the token it would draw now."""
    record, drawn = shown.what.record, run.records[shown.index]
    now = ", ".join(knob_text(name, new) for name, _, new in shown.changes)
    was = ", ".join(knob_text(name, old) for name, old, _ in shown.changes)
    parts = [tr(lang, "lab.what_if.line", now=now, was=was, step=shown.index + 1)]
    final = record.stages[-1].chosen_prob if record.stages else None
    token = escape_html(show_token(record, lang=lang).text)
    if record.token_id != drawn.token_id:
        parts.append(tr(lang, "lab.what_if.other", token=token, p=pct(final) if final is not None else "–",
                        drawn=escape_html(show_token(drawn, lang=lang).text)))
    else:
        parts.append(tr(lang, "lab.what_if.same", token=token, p=pct(final) if final is not None else "–"))
    if shown.what.logits_from != "kept":
        parts.append(tr(lang, f"lab.what_if.from_{shown.what.logits_from}", page=_mb(limits.KEPT_LOGITS_PAGE_BYTES),
                        room=_mb(limits.KEPT_LOGITS_TOTAL_BYTES)))
    return " · ".join(parts)


def _mb(size: int) -> str:
    return f"{size / (1 << 30):g} GB" if size >= 1 << 30 else f"{size >> 20} MB"


def what_if_views(lab: LabComponents, run: Run, shown: Shown | None, view, lang: str) -> dict:
    """The step on screen through the Plot components: the what-if's charts and line, or (None) the run's own step
    and status. A figure drawn by the page itself (DRAW_JS) is not the Plot's value, so the run's own step is marked
    with the what-if serial: a value the Plot has not shown, which it therefore redraws."""
    if shown is None:
        i = run.shown_step()
        marked = {plot: figure.update_layout(meta={"what_if_serial": run.what_if_serial})
                  for plot, figure in step_views(lab, run, i, view).items()}
        return {**marked, lab.status: status_markdown(run, index=i, lang=lang), lab.what_if_row: gr.update(visible=False)}
    return {lab.stage_plot: stage_chart(shown.what.record, view, lang),
            lab.draw_plot: draw_chart(shown.what.record, view, lang),
            lab.status: what_if_markdown(shown, run, lang), lab.what_if_row: gr.update(visible=True)}


def drawn_in_page(lab: LabComponents, run: Run, shown: Shown | None, view, lang: str) -> dict:
    """The step on screen as the knobs' fast path sends it: the line, and both figures as JSON for DRAW_JS (the Plot
    components keep their values; the page redraws the figures on screen in place)."""
    views = what_if_views(lab, run, shown, view, lang)
    stage, draw = views[lab.stage_plot].to_json(), views[lab.draw_plot].to_json()  # each serialised once
    figures = f'{{"serial":{run.what_if_serial},"stage":{stage},"draw":{draw}}}'
    return {lab.status: views[lab.status], lab.what_if_row: views[lab.what_if_row], lab.what_if_figures: figures}


def what_if(lab: LabComponents, page: gr.Request, state: Run, *values):
    """A knob moved: the step on screen for the new settings (nothing while a run streams, or before one), drawn by the
    page itself from the figures this returns (DRAW_JS). A run the service did not keep (a loaded run file, a
    branch) has its steps kept under the page's name once recomputed."""
    given = RunValues.of(values)
    state.keep = state.keep or keep_key(page)
    if given.chain_unwritten():
        return unchanged(lab.status)
    request = given.request()  # a bad value is named at once, run or not
    if not state.records or state.mid_stream or state.request is None:
        return unchanged(lab.status)
    request = about_the_run(request, state.request)
    if request is None:
        state.what_if = None
        return {lab.status: tr(given.lang, "lab.what_if.prompt_changed"), lab.what_if_row: gr.update(visible=False)}
    fresh = redraw_at(lab, state, request, state.shown_index(), given.lang)
    return drawn_in_page(lab, state, state.what_if, given.view, given.lang) if fresh else unchanged(lab.status)


def redraw_at(lab: LabComponents, state: Run, request: RunRequest, i: int, lang: str) -> bool:
    """Step i of the page's run (0-based) under `request`'s settings, with the run's seed, into state.what_if (None:
    back at the run's own settings). False when a later move has started meanwhile (its picture, not this one)."""
    state.what_if_serial += 1
    serial, seed = state.what_if_serial, state.records[0].seed
    ran = replace(state.request, settings=state.request.settings.with_seed(seed))
    asked = replace(request, settings=request.settings.with_seed(seed))
    moved = changes(ran, asked)
    if not moved:  # back at the run's own settings: its own step
        state.what_if = None
        return True
    try:
        what = lab.service.what_if(
            asked.prompt, continued(asked.settings, state.records[:i]), state.request.max_new_tokens, asked.stop,
            asked.chat, continue_from=[r.token_id for r in state.records[:i]], keep=state.keep)
    except (ValueError, RuntimeError) as e:
        raise bad(e, lang) from None
    if serial != state.what_if_serial:
        return False
    state.what_if = Shown(what, i, moved, asked)
    return True


def scrubbed(lab: LabComponents, index, state: Run, lang, view: View = View()):
    """The scrubber moved: the run's step there, and with a what-if on screen, the what-if of that step."""
    out = scrub_to(lab, index, state, lang, view)
    if isinstance(state.what_if, Shown) and state.records and not state.mid_stream:
        if redraw_at(lab, state, state.what_if.request, state.shown_index(), lang):
            out |= what_if_views(lab, state, state.what_if, view, lang)
    return out


def rerendered(lab: LabComponents, lang, state: Run, order_key, current_prompt, view: View = View(),
               request: gr.Request = None):
    """The page's language changed: every view again, the what-if on screen too (its record, in the new language)."""
    out = rerender(lab, lang, state, order_key, current_prompt, view, request)
    if isinstance(state.what_if, Shown) and not state.streaming:
        out |= what_if_views(lab, state, state.what_if, view, lang)
    return out


def continue_run(lab: LabComponents, page: gr.Request, state: Run, *values):
    """Continue from here: the run's steps before the one on screen kept, then on with the knobs' settings and the
    run's seed stream (the same u's: what changes comes from the settings, not from new luck)."""
    given = RunValues.of(values)
    if not state.records or state.mid_stream or state.request is None:
        return
    request = about_the_run(given.request(), state.request)
    if request is None:
        raise bad(ValueError(tr(given.lang, "lab.what_if.prompt_changed")), given.lang)
    i, lang = state.shown_index(), given.lang
    settings = continued(request.settings.with_seed(state.records[0].seed), state.records[:i])
    asked = replace(request, settings=settings, max_new_tokens=max(request.max_new_tokens, i + 1))
    run = Run(asked, list(state.records[:i]), lang=lang, model=model_name(lab, lang), view=given.view,
              streaming="run", tag=new_tag(), keep=keep_key(page))
    run.continued_from = (replace(state.request, settings=state.request.settings.with_seed(state.records[0].seed)),
                          tuple(state.records), i)
    stream = open_stream(lab, asked, lang, continue_from=[r.token_id for r in run.records], keep=run.keep)
    yield from streamed(lab, run, stream, cleared(lab, run, lang, given.view))


def reset(lab: LabComponents, state: Run, lang, view):
    """The knobs back to the run's settings, and the run's own step."""
    if state.request is None:
        return unchanged(lab.status)
    from .export import controls_of

    state.what_if = None
    state.what_if_serial += 1
    values = controls_of(state.request)
    return {**{lab.control(name): value for name, value in values.items() if name not in ("prompt", "chat")},
            **what_if_views(lab, state, None, view, lang)}


__all__ = ["ASK_JS", "DRAW_JS", "Shown", "about_the_run", "changes", "continue_run", "drawn_in_page", "knob_text",
           "redraw_at", "rerendered", "reset", "scrubbed", "what_if", "what_if_markdown", "what_if_views"]
