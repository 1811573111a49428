"""The Sampling lab tab: lesson 13 on the live model. build_lab lays out the tab's components, then wires
their events to the handlers (handlers.py), each bound to the components by name (LabComponents,
components.py). The run the page keeps and the lines that describe it are in run.py.

The service streams StepRecords; the handlers turn each into chips, charts and a status line. Finished runs
live in gr.State as records, so scrubbing back never recomputes anything, and a change of the page's
language redraws every view from them.
"""

from __future__ import annotations

import gradio as gr

from model_service.records.knobs import BY_NAME, KNOBS, Knob
from playground import limits

from ..common.acks import ack_event, ack_js
from ..common.handlers import bind
from ..common.i18n import T
from .ban import wire_ban
from .batch_effect import build_batch_effect
from .chain_board import build_chain_board
from .chips import COUNT_JS, PROBS_JS, SHOW_RUN_JS, STOP_JS, token_chips_html
from .components import CONTROL_NAMES, LabComponents
from .handlers import generate, page_has, step, stop_run
from .in_place import FOLLOW_JS, STREAM_JS
from .inspect import build_inspect
from .replays import Replays
from .request import CHAIN_EXAMPLE, DEFAULTS, KNOB_CONTROLS, ORDER_LABELS, SLIDERS
from .run import Run, order_note_text, placeholder_figures, status_markdown
from .sweep import SWEEP_JS, sweep
from .view import View
from .what_if import ASK_JS, continue_run, rerendered, reset, scrubbed, what_if


def build_lab(service, language: gr.Radio | None = None, replays: Replays | None = None) -> LabComponents:
    """Create the tab's components inside the current Blocks context and wire their events.
    `language`: the page's picker (None: English); replays: the scenes' kept runs (replays.py; None: a new, empty
    one). Returns the components other tabs and the page read."""
    lab = lay_out(service, language if language is not None else gr.State("en"), replays or Replays())
    wire(lab)
    return lab


def lay_out(service, language, replays: Replays) -> LabComponents:
    """The settings on the left, the run on the right (with "Look inside this step" under its chart)."""
    run_state = gr.State(Run())
    view = gr.State(View())  # how this page draws the charts (playground/workshop/presenter.py sets it)
    stage_empty, draw_empty, run_empty = placeholder_figures()
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320, elem_id="lab-controls"):
            prompt = gr.Textbox(limits.LESSON_PROMPT, label=T("lab.prompt"), lines=3, elem_id="prompt")
            chat = gr.Checkbox(False, label=T("lab.chat"))
            # under the prompt, in the first screen: the lesson's knobs follow, the rest opens on demand below
            with gr.Row(elem_id="lab-buttons"):
                # side by side in the settings column (Gradio's 160 px minimum would stack them)
                generate_btn = gr.Button(T("lab.generate"), variant="primary", elem_id="generate", interactive=False,
                                         min_width=60)
                step_btn = gr.Button(T("lab.step"), elem_id="step", interactive=False, min_width=60)
                stop_btn = gr.Button(T("lab.stop_button"), variant="stop", elem_id="stop", min_width=60)
            temperature = _slider("temperature", T("lab.temperature"))
            # the filters' names are the same in both languages
            top_k, top_p, min_p = (_slider(name, label) for name, label in (("top_k", "Top-k"), ("top_p", "Top-p"),
                                                                              ("min_p", "Min-p")))
            knobs = knob_accordions()
            order = gr.Radio([(label, key) for key, label in ORDER_LABELS.items()], value=DEFAULTS["order"],
                             label=T("lab.order"), elem_id="order")
            knobs["chain"] = chain = knob_control(BY_NAME["chain"], placeholder=CHAIN_EXAMPLE,
                                                  visible=DEFAULTS["order"] == "custom")
            build_chain_board(chain, order, language, DEFAULTS["order"] == "custom")  # drag or arrow to reorder
            order_note = gr.Markdown(order_note_text(DEFAULTS["order"]), elem_id="order-note")
            seed = gr.Textbox("", label=T("lab.seed"), placeholder=T("lab.seed.placeholder"), elem_id="seed")
            max_new = gr.Slider(1, limits.MAX_NEW_TOKENS, DEFAULTS["max_new_tokens"], step=1, label=T("lab.max_new"),
                                elem_id="max-new")
            stop = gr.Textbox("", label=T("lab.stop"), placeholder=T("lab.stop.placeholder"), lines=1,
                              elem_id="stop-strings")
            gr.Markdown(T("lab.defaults_note"), elem_classes=["ntp-note"])
        # under ~940 px of page (a projector at 150 %, a phone) the run goes under the settings: its six stage panels
        # need the width (a chart squeezed to a third of the page cannot be read)
        with gr.Column(scale=3, min_width=600):
            chips = gr.HTML(token_chips_html([]), elem_id="chips")
            chip_probs = gr.Radio([(T("lab.logprobs.raw"), "raw"), (T("lab.logprobs.final"), "final")], value="raw",
                                  label=T("lab.logprobs"), show_label=False, container=False, elem_id="chip-probs")
            status = gr.Markdown(status_markdown(Run()), elem_id="run-status")
            with gr.Row(visible=False, elem_id="what-if-row") as what_if_row:  # a what-if on screen (what_if.py)
                reset_btn = gr.Button(T("lab.what_if.reset"), size="sm", elem_id="what-if-reset")
                continue_btn = gr.Button(T("lab.what_if.continue"), size="sm", elem_id="what-if-continue")
            # a what-if's two figures as JSON, drawn by the page itself (what_if.DRAW_JS): no Plot component re-render
            what_if_figures = gr.Textbox("", visible="hidden", elem_id="what-if-figures")
            with gr.Row(elem_id="step-tools"):  # the step on screen at every temperature (sweep.py)
                sweep_btn = gr.Button(T("lab.sweep"), size="sm", elem_id="sweep-t")
                gr.HTML("", elem_id="sweep-now")  # the frame's temperature while a sweep plays (sweep.SWEEP_JS)
            sweep_frames = gr.Textbox("", visible="hidden", elem_id="sweep-frames")
            # a streaming run's step figures as JSON, drawn in place by the page (in_place.STREAM_JS)
            stream_figures = gr.Textbox("", visible="hidden", elem_id="stream-figures")
            stage_plot = gr.Plot(stage_empty, show_label=False, elem_id="stage-plot")
            ban_box = gr.Textbox("", label=T("lab.ban"), lines=1, max_lines=1, elem_id="ban-token",
                                 elem_classes=["ntp-ban"])  # filled by a click on a bar (ban.BAN_JS)
            draw_plot = gr.Plot(draw_empty, show_label=False, elem_id="draw-plot")
            scrub = gr.Slider(1, 2, 1, step=1, label=T("lab.scrub"), visible=False, elem_id="scrub")
            run_plot = gr.Plot(run_empty, show_label=False, elem_id="run-plot")
            shown = run_chart_changed(run_plot, ("inspect", "batch-effect"))
            build_inspect(service, language, run_state, scrub, shown["inspect"])  # "Look inside this step" (issue 14)
            build_batch_effect(service, language, run_state, scrub, shown["batch-effect"])  # a seed in a busy room
    return LabComponents(
        service, language, prompt, chat, temperature, top_k, top_p, min_p, order, order_note, seed, max_new, stop,
        {name: knobs[name] for name in KNOB_CONTROLS}, generate_btn, step_btn, stop_btn, chips, chip_probs,
        ban_box, status, stage_plot, draw_plot, scrub, run_plot, run_state, view, what_if_row, reset_btn, continue_btn,
        what_if_figures, sweep_btn, sweep_frames, stream_figures, replays,
    )


ACCORDIONS = {"penalties": "penalties", "samplers": "samplers", "dry_mirostat": "dry-mirostat"}  # group -> elem_id
PLACEHOLDERS = {"logit_bias": "13:-100, 42:5"}


def knob_accordions() -> dict:
    """The knobs beyond the lesson's, each in its row's accordion (records/knobs.py), closed by default (the
    lesson's chain needs none of them): the bias, penalties and bans; the other samplers, each saying which engines
    have it (an order whose engine lacks one refuses it, naming it); llama.cpp's DRY and mirostat."""
    controls = {}
    for group, elem_id in ACCORDIONS.items():
        with gr.Accordion(T(f"lab.{group}"), open=False, elem_id=elem_id):
            gr.Markdown(T(f"lab.{group}.note"), elem_classes=["ntp-note"])
            for knob in KNOBS:
                if knob.group == group:
                    controls[knob.name] = knob_control(knob, placeholder=PLACEHOLDERS.get(knob.name))
    return controls


def knob_control(knob: Knob, **options):
    """A knob's control, as its row says: a slider, a whole-number box, a text box or a radio (off, v1, v2, ...),
    labelled and explained in the page's language (lab.<name>, lab.<name>.info), elem_id its name with dashes."""
    name, elem_id = knob.name, knob.name.replace("_", "-")
    label, info = T(f"lab.{name}"), T(f"lab.{name}.info")
    if knob.control == "slider":
        return _slider(name, label)
    if knob.control == "number":
        return gr.Number(DEFAULTS[name], precision=0, minimum=SLIDERS[name][0], maximum=SLIDERS[name][1], label=label,
                         info=info, elem_id=elem_id)
    if knob.control == "radio":
        versions = [(f"v{i}", i) for i in range(1, int(knob.high) + 1)]
        return gr.Radio([(T(f"lab.{name}.off"), knob.default), *versions], value=DEFAULTS[name], label=label, info=info,
                        elem_id=elem_id)
    return gr.Textbox(DEFAULTS[name], label=label, info=info, elem_id=elem_id, **options)


def _slider(name: str, label) -> gr.Slider:
    low, high, step = SLIDERS[name]
    return gr.Slider(low, high, DEFAULTS[name], step=step, label=label, info=T(f"lab.{name}.info"),
                     elem_id=name.replace("_", "-"))


def order_shown(lab: LabComponents, order: str, lang: str = "en") -> dict:
    """The order's note, and the chain box shown for the custom order only."""
    return {lab.order_note: order_note_text(order, lang), lab.control("chain"): gr.update(visible=order == "custom")}


def wire(lab: LabComponents) -> None:
    """The tab's events. Each handler takes `lab` first: bound to it, Gradio reads the rest of its signature
    (a gr.Request parameter, the API's parameters) as the handler's own."""
    bound = lambda handler: bind(handler, lab)
    views = [lab.chips, lab.status, lab.stage_plot, lab.draw_plot]
    # preprocess=False: the raw values reach parse_request, whose messages name the control, before
    # Gradio's own component checks ("Value 3.0 is greater than maximum value 2.") can answer for us.
    # The language comes last: API callers that leave it out get English.
    streams = [*lab.live, lab.stream_figures]  # (a streaming run's charts, drawn in place: in_place.py)
    gen_event = lab.generate_button.click(bound(generate), [*lab.controls, lab.language, lab.view], streams,
                                          api_name="generate", show_progress="hidden", preprocess=False)
    # Continue from here (a what-if on screen): the run so far, then on with the knobs' settings; Stop stops it too
    continue_event = lab.continue_button.click(bound(continue_run), [lab.run_state, *lab.controls, lab.language, lab.view],
                                               streams, api_name="continue_run", show_progress="hidden",
                                               preprocess=False)
    # a press while a step is still on its way is kept and runs after it (Gradio's default drops it): a presenter
    # pressing Space twice gets two steps
    lab.step_button.click(bound(step), [lab.run_state, *lab.controls, lab.language, lab.view], lab.live,
                          api_name="step", show_progress="hidden", preprocess=False, trigger_mode="always_last")
    # Stop's js fills `on_page` with what the page shows (chips.STOP_JS; an API caller leaves it blank); the
    # cancel comes after the handler's answer, by then the stream has ended (it stops anything that has not)
    on_page = gr.Textbox("", visible=False, label="chips on the page", elem_id="stop-on-page")
    stopped = lab.stop_button.click(bound(stop_run), [lab.run_state, lab.language, lab.view, on_page], lab.live,
                                    js=STOP_JS, cancels=[gen_event, continue_event], api_name="stop", queue=False,
                                    show_progress="hidden")
    for button in (lab.generate_button, lab.step_button, lab.continue_button):  # (a phone: to the chips, chips.py)
        button.click(None, None, None, js=SHOW_RUN_JS, queue=False, show_progress="hidden", api_visibility="private")
    lab.events["stopped"] = stopped  # and a branch cut by a Stop as its last update left (branch_panel.cut_short)
    lab.events["continued"] = (continue_event, stopped)  # the Branches panel keeps a continued run (branch_panel.adopt)
    # the page has the chips' new value: what a streaming handler reads to keep its lead (run.Pace)
    # (in the page; its count goes to the server as one POST: common/acks.py)
    ack_event(bound(page_has), lab.run_state, "page_has")
    lab.chips.change(None, [lab.chips], None, js=ack_js(COUNT_JS, "page_has"), show_progress="hidden",
                     api_visibility="private")
    # release (mouse), and change from the keyboard: arrow keys and Enter move the step at once
    gr.on([lab.scrub.release, lab.scrub.input], bound(scrubbed), [lab.scrub, lab.run_state, lab.language, lab.view],
          [*views, lab.run_plot, lab.what_if_row], api_name="scrub", show_progress="hidden", trigger_mode="always_last",
          preprocess=False)
    lab.stream_figures.change(None, [lab.stream_figures], None, js=STREAM_JS, queue=False, show_progress="hidden",
                              api_visibility="private")
    wire_what_if(lab, bound)
    lab.chip_probs.change(None, lab.chip_probs, None, js=PROBS_JS, api_visibility="private", show_progress="hidden")
    wire_ban(lab, lab.ban_box)
    lab.order.change(bound(order_shown), [lab.order, lab.language], [lab.order_note, lab.control("chain")],
                     api_visibility="private", show_progress="hidden", trigger_mode="multiple")
    if isinstance(lab.language, gr.Radio):
        lab.language.change(bound(rerendered), [lab.language, lab.run_state, lab.order, lab.prompt, lab.view],
                            [*views, lab.run_plot, lab.order_note, lab.prompt, lab.what_if_row], api_visibility="private",
                            show_progress="hidden", preprocess=False, trigger_mode="multiple")


# The run chart's figure changed on the page (a fingerprint of its JSON against the last one's): a click of a hidden
# button, which only a click fires; only an open panel's (a closed one draws when it opens: its expand event), so a
# run's end costs the page no round trip of a panel nobody opened
RUN_CHART_CHANGED_JS = """(value) => {
  const plot = (value && value.plot) || "";
  let h = 0;
  for (let i = 0; i < plot.length; i += 1) h = (Math.imul(h, 31) + plot.charCodeAt(i)) | 0;
  (__FOLLOW__)(`${plot.length}:${h}`);
  return [];
}""".replace("__FOLLOW__", FOLLOW_JS)


def run_chart_changed(run_plot: gr.Plot, followers: tuple[str, ...]) -> dict[str, gr.Button]:
    """What the panels under the run chart follow instead of the chart's own `change` (or the scrubber's, whose
    step the chart marks): Gradio 6 fires a Plot's (and a Textbox's) `change` whenever its props are handed to it
    again, the same value or not: at rest after a run ~6 times a second, each a queued round trip of both panels
    (~13 a second per open page, for nothing). The page compares the chart's figure with the last one it saw and
    clicks the followers' hidden buttons only when it differs.

    One button per follower: Gradio's page replays a trigger that came while its "always_last" event was running
    by dispatching the trigger again to every event it starts, so two such events on one trigger restart each other
    for as long as their round trips overlap (~10 requests a second each, for seconds, in the presenter view)."""
    buttons = {name: gr.Button(visible="hidden", elem_id=f"run-chart-changed-{name}",
                               elem_classes=["ntp-script", "ntp-run-chart-changed"])  # (menus.py)
               for name in followers}
    run_plot.change(None, [run_plot], None, js=RUN_CHART_CHANGED_JS, queue=False, show_progress="hidden",
                    api_visibility="private")
    return buttons


def wire_what_if(lab: LabComponents, bound) -> None:
    """The live lab: every knob's input (a drag, a key, a typed value once it is entered) redraws the step on screen
    for the new settings (what_if.py). One event in the page for all of them (ASK_JS): it POSTs the knobs' values to
    the hidden `what_if` event, outside Gradio's queue (a what-if takes no forward pass: it never waits behind the
    room's runs, and answers in one request), and draws the figures it returns itself."""
    knobs = [lab.temperature, lab.top_k, lab.top_p, lab.min_p, lab.order, *lab.knobs.values()]
    triggers = []
    for control in [*knobs, lab.stop]:
        if isinstance(control, gr.Textbox):  # typed text is asked about once it is entered, not at every key
            triggers += [control.submit, control.blur]
        else:
            triggers.append(control.input)
    shown = [lab.status, lab.what_if_row, lab.what_if_figures]
    gr.on(triggers, None, [*lab.controls, lab.language, lab.view], shown, js=ASK_JS, show_progress="hidden",
          queue=False, api_visibility="private")
    asked = gr.Button(visible=False)  # never clicked: the page POSTs to its event (ASK_JS); a script calls /what_if
    asked.click(bound(what_if), [lab.run_state, *lab.controls, lab.language, lab.view], shown, api_name="what_if",
                show_progress="hidden", preprocess=False, queue=False)
    lab.sweep_button.click(bound(sweep), [lab.run_state, *lab.controls, lab.language, lab.view], [lab.sweep_frames],
                           api_name="sweep_t", show_progress="hidden", queue=False, preprocess=False).then(
        None, [lab.sweep_frames], None, js=SWEEP_JS)
    outputs = [lab.status, lab.stage_plot, lab.draw_plot, lab.what_if_row]
    lab.reset_button.click(bound(reset), [lab.run_state, lab.language, lab.view],
                           [*(lab.control(name) for name in CONTROL_NAMES if name not in ("prompt", "chat")), *outputs],
                           api_visibility="private", show_progress="hidden")
