"""Figures the page draws in place: Plotly.react on the chart already on screen, for a figure's JSON.

Gradio's Plot re-creates its chart for every new value (its Plotly element is keyed on the figure: a new element, a
full Plotly.newPlot, then a resize), which cost the page 100-370 ms a redraw while a run streamed: the longest tasks
on its main thread, so a click waited and the chips came in bursts. So a streaming run's charts go to the page as
JSON in a hidden box (`stream_figures` below) and the page reacts them into the charts on screen, the run's last step's
too, and at the run's end the chart over the run (re-created, the charts held the main thread just when a learner
moves a knob next; the panels that follow the run chart are told by the page: FOLLOW_JS). A caller
that is not a page (the API's) gets the Plot values. The Plots keep the value of the run's start (a placeholder marked
with the run's tag) while the page draws the steps in place, so every value the server sends them later is marked as
drawn anew (handlers.step_views): one equal to the last would be skipped, and the in-place figure left on screen. The
knobs' what-ifs (what_if.DRAW_JS) and the sweep (sweep.SWEEP_JS) draw the same way.
"""

from __future__ import annotations

from ..common.figures import PlainFigure

# Plotly.react as Gradio's Plot calls it (autosize, margins that grow with their labels), minus the re-creation
REACT_JS = """(div, figure) => {
    const layout = Object.assign({}, figure.layout, {autosize: true});
    layout.margin = Object.assign({}, layout.margin, {autoexpand: true});
    return window.Plotly.react(div, figure.data || [], layout);
  }"""

# The panels under the run chart (Look inside, the batch effect) follow the chart on screen: for a new one (`key`),
# each open panel's hidden button is clicked once the update that brought it is applied (tab.run_chart_changed: not
# the Plot's own change; a closed panel draws when it opens)
FOLLOW_JS = """(key) => {
  if (window.__ntpRunChart === key) return;
  window.__ntpRunChart = key;
  setTimeout(() => document.querySelectorAll(".ntp-run-chart-changed").forEach((b) => {
    const panel = document.getElementById(b.id.replace("run-chart-changed-", ""));
    const label = panel && panel.querySelector("button.label-wrap");
    if (!label || label.classList.contains("open")) b.click();
  }), 0);
}"""

# The stream's figures, drawn once each (Gradio hands a Textbox's value to its change event again now and then).
# A newer text (the run's last step's; a Stop's blank) makes a draw of an earlier step still waiting for its task
# skip, and one whose chart a Plot value has re-created since lands on the old, detached element. (Else, on a busy
# page, the next-to-last step could cover the last: a CI run.)
STREAM_JS = """(text) => {
  const react = __REACT__;
  if (text === window.__ntpStreamed || !window.Plotly) return [];
  window.__ntpStreamed = text;
  if (!text) return [];
  let figures;
  try { figures = JSON.parse(text); } catch (e) { return []; }
  // one chart a task: a token's update that comes meanwhile is shown between them, not after both
  [['stage-plot', figures.stage], ['draw-plot', figures.draw], ['run-plot', figures.run]].forEach(([id, figure], i) => {
    const div = document.querySelector(`#${id} .js-plotly-plot`);
    if (!figure) return;
    setTimeout(() => {
      if (!(div && div.isConnected && window.__ntpStreamed === text)) return;  // (newer: skip)
      const drawn = react(div, figure);
      if (id === 'run-plot') drawn.then(() => (__FOLLOW__)(`stream:${figures.tag}`));  // the panels that follow it
    }, i);
  });
  return [];
}""".replace("__REACT__", REACT_JS).replace("__FOLLOW__", FOLLOW_JS)


def stream_figures(tag: str, steps: int, stage: PlainFigure, draw: PlainFigure, run: PlainFigure | None = None) -> str:
    """A streaming run's step figures as one JSON text for STREAM_JS; at its last step (`run`: the chart over the
    whole run) it is final. Its tag and step count make each text new (a second run of the same settings would
    otherwise send the text the box already holds, and draw nothing)."""
    end = f',"final":true,"run":{run.to_json()}' if run is not None else ""
    return f'{{"tag":"{tag}","steps":{int(steps)}{end},"stage":{stage.to_json()},"draw":{draw.to_json()}}}'
