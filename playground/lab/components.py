"""The lab's components by name (`LabComponents`): what build_lab lays out (tab.py), what its handlers read
and set (handlers.py), and what the page and the panels around the lab (branches, run files, the presenter's
toggles, the LM head, the room) wire to."""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from .replays import Replays
from .request import KNOB_CONTROLS

# the run's settings, by their names in links and run files (deep_link.CONTROLS, export.SETTINGS), in
# parse_request's order
CONTROL_NAMES = ("prompt", "chat", "temperature", "top_k", "top_p", "min_p", "seed", "max_new_tokens", "stop", "order",
                 *KNOB_CONTROLS)


@dataclass(frozen=True, eq=False)  # eq=False: compared and hashed as itself (it holds a dict)
class LabComponents:
    """The lab tab's components, and the two things its handlers read besides: the service they ask for
    tokens, and the page's language (its picker, or a State holding "en")."""

    service: object
    language: gr.Radio | gr.State
    # the settings of a run
    prompt: gr.Textbox
    chat: gr.Checkbox
    temperature: gr.Slider
    top_k: gr.Slider
    top_p: gr.Slider
    min_p: gr.Slider
    order: gr.Radio
    order_note: gr.Markdown
    seed: gr.Textbox
    max_new_tokens: gr.Slider
    stop: gr.Textbox
    # every other knob, by name (records/knobs.py: the accordions' controls, the custom chain's box)
    knobs: dict[str, gr.components.Component]
    generate_button: gr.Button
    step_button: gr.Button
    stop_button: gr.Button
    # the run on screen
    chips: gr.HTML
    chip_probs: gr.Radio  # the chips coloured by the raw or the final probability (chips.PROBS_JS)
    ban_box: gr.Textbox  # a clicked candidate's id (ban.py)
    status: gr.Markdown
    stage_plot: gr.Plot
    draw_plot: gr.Plot
    scrub: gr.Slider
    run_plot: gr.Plot
    run_state: gr.State  # the Run (run.py) the views show
    view: gr.State  # how this page draws the charts (playground/workshop/presenter.py sets it)
    # the live lab (what_if.py): shown while a what-if is on screen
    what_if_row: gr.Row
    reset_button: gr.Button
    continue_button: gr.Button
    what_if_figures: gr.Textbox  # a what-if's figures as JSON, which the page draws itself (what_if.DRAW_JS)
    sweep_button: gr.Button  # Sweep T (sweep.py)
    sweep_frames: gr.Textbox  # its frames as JSON, which the page plays (sweep.SWEEP_JS)
    stream_figures: gr.Textbox  # a streaming run's step figures as JSON, drawn in place by the page (in_place.py)
    replays: Replays = field(default_factory=Replays)  # the scenes' runs, kept to show again at once (replays.py)
    # events other panels follow (tab.wire fills it): "continued", a Continue from here's stream and the Stop after it
    events: dict = field(default_factory=dict)

    @property
    def controls(self) -> list:
        """The settings' components in parse_request's order (CONTROL_NAMES)."""
        return [self.control(name) for name in CONTROL_NAMES]

    def control(self, name: str):
        """A setting's component by its name in links and run files (one of CONTROL_NAMES)."""
        if name not in CONTROL_NAMES:
            raise KeyError(name)
        return self.knobs[name] if name in self.knobs else getattr(self, name)

    @property
    def live(self) -> list:
        """What Generate and Step set: the run's views and the Run itself."""
        return [self.chips, self.status, self.stage_plot, self.draw_plot, self.run_state, self.scrub, self.run_plot,
                self.what_if_row]
