"""Sweep T: the lesson's own check in one click. The step on screen is redrawn at T 0.1, 0.2, ... 2 (the other knobs
as they are), frame after frame, so the room watches the distribution sharpen and flatten; then the step on screen
comes back.

    Sweep T ──► sweep(): one what-if per temperature on the step's own kept logits (no forward pass, engine/what_if.py),
        each its stage figure ──► the frames as JSON ──► SWEEP_JS plays them on the figure on screen (Plotly.react, one
        frame every FRAME_MS), the frame's "T = 0.5" large beside the button, holds the last, and puts back what was
        there

Every frame is exact: the pipeline in the knobs' order on that step's logits at that temperature, the numbers a run
with those settings records at that step after the same tokens.
"""

from __future__ import annotations

import json
from dataclasses import replace

import gradio as gr

from playground import limits

from ..common.errors import unchanged, warn
from ..common.i18n import tr
from .components import LabComponents
from .handlers import RunValues, bad, keep_key
from .in_place import REACT_JS
from .request import continued
from .run import Run
from .view import stage_chart

FRAME_MS = 220  # a frame's time on screen: 20 frames in under five seconds, each long enough to read its T
HOLD_MS = 1500  # the last frame (T 2) stays this long before the step on screen comes back

SWEEP_JS = """(text) => {
  const react = __REACT__;
  let sweep;
  try { sweep = JSON.parse(text || 'null'); } catch (e) { return; }
  const div = document.querySelector('#stage-plot .js-plotly-plot');
  if (!sweep || !sweep.frames || !sweep.frames.length || !div || !window.Plotly) return;
  const before = {data: div.data, layout: div.layout}, label = document.querySelector('#sweep-now');
  const tools = document.getElementById('step-tools');  // the presenter view shows it only while a sweep plays
  const say = (text) => { if (label) label.textContent = text; if (tools) tools.classList.toggle('sweeping', !!text); };
  const mine = String(sweep.serial);
  div.dataset.sweep = mine;  // a newer sweep, or a what-if drawn meanwhile, takes over
  let k = 0, drawn = div.data;
  const frame = () => {
    if (div.dataset.sweep !== mine || div.data !== drawn) { say(''); return; }  // something else drew here: it stays
    if (k === sweep.frames.length) {
      setTimeout(() => { if (div.dataset.sweep !== mine || div.data !== drawn) return;
        window.Plotly.react(div, before.data, before.layout); say(''); div.dataset.sweep = ''; div.dataset.swept = mine;
      }, __HOLD__);
      return;
    }
    const f = sweep.frames[k++];
    drawn = f.data || [];
    react(div, f).then(() => {
      say(f.label); div.dataset.sweepT = String(f.t); setTimeout(frame, __FRAME__);
    });
  };
  frame();
}""".replace("__FRAME__", str(FRAME_MS)).replace("__HOLD__", str(HOLD_MS)).replace("__REACT__", REACT_JS)


def sweep(lab: LabComponents, page: gr.Request, state: Run, *values):
    """The step on screen at every temperature of limits.SWEEP_TEMPERATURES, as frames for SWEEP_JS."""
    given = RunValues.of(values)
    request = given.request()  # a bad knob is named at once
    if not state.records or state.mid_stream or state.request is None:
        warn(tr(given.lang, "lab.sweep.no_run"), given.lang)
        return unchanged(lab.sweep_frames)
    if (request.prompt, request.chat) != (state.request.prompt, state.request.chat):
        warn(tr(given.lang, "lab.what_if.prompt_changed"), given.lang)
        return unchanged(lab.sweep_frames)
    state.keep = state.keep or keep_key(page)
    i, seed = state.shown_index(), state.records[0].seed
    before = [r.token_id for r in state.records[:i]]
    frames = []
    try:
        for t in limits.SWEEP_TEMPERATURES:
            settings = continued(replace(request.settings, temperature=t).with_seed(seed), state.records[:i])
            what = lab.service.what_if(request.prompt, settings, state.request.max_new_tokens, request.stop,
                                       request.chat, continue_from=before, keep=state.keep)
            label = json.dumps(tr(given.lang, "lab.sweep.frame", t=f"{t:g}"), ensure_ascii=False)
            figure = stage_chart(what.record, given.view, given.lang, fold=False).to_json()  # serialised once
            frames.append(f'{{"t":{t},"label":{label},{figure[1:]}')  # the figure's own data and layout beside them
    except (ValueError, RuntimeError) as e:
        raise bad(e, given.lang) from None
    state.what_if_serial += 1
    return {lab.sweep_frames: f'{{"serial":{state.what_if_serial},"step":{i + 1},"frames":[{",".join(frames)}]}}'}


__all__ = ["FRAME_MS", "HOLD_MS", "SWEEP_JS", "sweep"]
