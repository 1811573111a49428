"""The Sampling lab tab: lesson 13 on the live model. build_lab lays out the tab's components, then wires
their events to the handlers (handlers.py), each bound to the components by name (LabComponents,
components.py). The run the page keeps and the lines that describe it are in run.py.

The service streams StepRecords; the handlers turn each into chips, charts and a status line. Finished runs
live in gr.State as records, so scrubbing back never recomputes anything, and a change of the page's
language redraws every view from them.
"""

from __future__ import annotations

import gradio as gr

from model_service import limits

from ..common.handlers import bind
from ..common.i18n import T
from .ban import wire_ban
from .batch_effect import build_batch_effect
from .chain_board import build_chain_board
from .chips import COUNT_JS, PROBS_JS, STOP_JS, token_chips_html
from .components import LabComponents
from .handlers import generate, page_has, rerender, scrub_to, step, stop_run
from .inspect import build_inspect
from .request import CHAIN_EXAMPLE, DEFAULTS, ORDER_LABELS, SLIDERS
from .run import Run, order_note_text, placeholder_figures, status_markdown
from .view import View


def build_lab(service, language: gr.Radio | None = None) -> LabComponents:
    """Create the tab's components inside the current Blocks context and wire their events.
    `language`: the page's picker (None: English). Returns the components other tabs and the page read."""
    lab = lay_out(service, language if language is not None else gr.State("en"))
    wire(lab)
    return lab


def lay_out(service, language) -> LabComponents:
    """The settings on the left, the run on the right (with "Look inside this step" under its chart)."""
    run_state = gr.State(Run())
    view = gr.State(View())  # how this page draws the charts (playground/workshop/presenter.py sets it)
    stage_empty, draw_empty, run_empty = placeholder_figures()
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320, elem_id="lab-controls"):
            prompt = gr.Textbox(limits.LESSON_PROMPT, label=T("lab.prompt"), lines=3, elem_id="prompt")
            chat = gr.Checkbox(False, label=T("lab.chat"))
            temperature = gr.Slider(0, 2, DEFAULTS["temperature"], step=0.05, label=T("lab.temperature"),
                                    info=T("lab.temperature.info"), elem_id="temperature")
            # the filters' names are the same in both languages
            top_k = gr.Slider(0, 200, DEFAULTS["top_k"], step=1, label="Top-k", info=T("lab.top_k.info"), elem_id="top-k")
            top_p = gr.Slider(0.01, 1, DEFAULTS["top_p"], step=0.01, label="Top-p", info=T("lab.top_p.info"),
                              elem_id="top-p")
            min_p = gr.Slider(0, 1, DEFAULTS["min_p"], step=0.01, label="Min-p", info=T("lab.min_p.info"), elem_id="min-p")
            logit_bias, penalties = penalty_controls()
            samplers = sampler_controls()
            dry_mirostat = dry_mirostat_controls()
            order = gr.Radio([(label, key) for key, label in ORDER_LABELS.items()], value=DEFAULTS["order"],
                             label=T("lab.order"), elem_id="order")
            chain = gr.Textbox(DEFAULTS["chain"], label=T("lab.chain"), placeholder=CHAIN_EXAMPLE, info=T("lab.chain.info"),
                               visible=DEFAULTS["order"] == "custom", elem_id="chain")
            build_chain_board(chain, order, language, DEFAULTS["order"] == "custom")  # drag or arrow to reorder
            order_note = gr.Markdown(order_note_text(DEFAULTS["order"]), elem_id="order-note")
            seed = gr.Textbox("", label=T("lab.seed"), placeholder=T("lab.seed.placeholder"), elem_id="seed")
            max_new = gr.Slider(1, limits.MAX_NEW_TOKENS, DEFAULTS["max_new_tokens"], step=1, label=T("lab.max_new"),
                                elem_id="max-new")
            stop = gr.Textbox("", label=T("lab.stop"), placeholder=T("lab.stop.placeholder"), lines=1,
                              elem_id="stop-strings")
            with gr.Row(elem_id="lab-buttons"):
                generate_btn = gr.Button(T("lab.generate"), variant="primary", elem_id="generate", interactive=False)
                step_btn = gr.Button(T("lab.step"), elem_id="step", interactive=False)
                stop_btn = gr.Button(T("lab.stop_button"), variant="stop", elem_id="stop")
            gr.Markdown(T("lab.defaults_note"), elem_classes=["ntp-note"])
        with gr.Column(scale=3):
            chips = gr.HTML(token_chips_html([]), elem_id="chips")
            chip_probs = gr.Radio([(T("lab.logprobs.raw"), "raw"), (T("lab.logprobs.final"), "final")], value="raw",
                                  label=T("lab.logprobs"), show_label=False, container=False, elem_id="chip-probs")
            status = gr.Markdown(status_markdown(Run()), elem_id="run-status")
            stage_plot = gr.Plot(stage_empty, show_label=False, elem_id="stage-plot")
            ban_box = gr.Textbox("", label=T("lab.ban"), lines=1, max_lines=1, elem_id="ban-token",
                                 elem_classes=["ntp-ban"])  # filled by a click on a bar (ban.BAN_JS)
            draw_plot = gr.Plot(draw_empty, show_label=False, elem_id="draw-plot")
            scrub = gr.Slider(1, 2, 1, step=1, label=T("lab.scrub"), visible=False, elem_id="scrub")
            run_plot = gr.Plot(run_empty, show_label=False, elem_id="run-plot")
            build_inspect(service, language, run_state, scrub, run_plot)  # "Look inside this step" (issue 14)
            build_batch_effect(service, language, run_state, scrub, run_plot)  # a seed in a busy room (issue 24)
    return LabComponents(
        service, language, prompt, chat, temperature, top_k, top_p, min_p, order, order_note, seed, max_new, stop,
        logit_bias, *penalties, *samplers, *dry_mirostat, chain, generate_btn, step_btn, stop_btn, chips, chip_probs,
        ban_box, status, stage_plot, draw_plot, scrub, run_plot, run_state, view,
    )


def penalty_controls():
    """The bias, penalties and bans, in an accordion closed by default (the lesson's chain needs none of them): the
    three penalties, llama.cpp's window of counted tokens, the no-repeat n-gram and min-tokens bans and the logit
    bias box."""
    with gr.Accordion(T("lab.penalties"), open=False, elem_id="penalties"):
        gr.Markdown(T("lab.penalties.note"), elem_classes=["ntp-note"])
        sliders = [_slider(name, elem_id) for name, elem_id in (
            ("repetition_penalty", "repetition-penalty"), ("frequency_penalty", "frequency-penalty"),
            ("presence_penalty", "presence-penalty"))]
        last_n = gr.Number(DEFAULTS["penalty_last_n"], precision=0, minimum=SLIDERS["penalty_last_n"][0],
                           maximum=SLIDERS["penalty_last_n"][1], label=T("lab.penalty_last_n"),
                           info=T("lab.penalty_last_n.info"), elem_id="penalty-last-n")
        bans = [_slider(name, name.replace("_", "-")) for name in ("no_repeat_ngram_size", "min_tokens")]
        bias = gr.Textbox(DEFAULTS["logit_bias"], label=T("lab.logit_bias"), placeholder="13:-100, 42:5",
                          info=T("lab.logit_bias.info"), elem_id="logit-bias")
    return bias, (*sliders, last_n, *bans)


def sampler_controls() -> list[gr.Slider]:
    """The samplers beyond the lesson's, in an accordion closed by default; each says which engines have it (an
    order whose engine lacks one refuses it, naming it)."""
    with gr.Accordion(T("lab.samplers"), open=False, elem_id="samplers"):
        gr.Markdown(T("lab.samplers.note"), elem_classes=["ntp-note"])
        return [_slider(name, name.replace("_", "-")) for name in (
            "typical_p", "epsilon_cutoff", "eta_cutoff", "top_n_sigma", "xtc_probability", "xtc_threshold",
            "dynatemp_range", "dynatemp_exponent")]


def dry_mirostat_controls() -> list:
    """llama.cpp's DRY and mirostat, in an accordion closed by default: DRY's five knobs, then mirostat's version
    (it replaces the chain's cuts), target and learning rate."""
    with gr.Accordion(T("lab.dry_mirostat"), open=False, elem_id="dry-mirostat"):
        gr.Markdown(T("lab.dry_mirostat.note"), elem_classes=["ntp-note"])
        dry = [_slider(name, name.replace("_", "-")) for name in ("dry_multiplier", "dry_base", "dry_allowed_length")]
        window = gr.Number(DEFAULTS["dry_penalty_last_n"], precision=0, minimum=SLIDERS["dry_penalty_last_n"][0],
                           maximum=SLIDERS["dry_penalty_last_n"][1], label=T("lab.dry_penalty_last_n"),
                           info=T("lab.dry_penalty_last_n.info"), elem_id="dry-penalty-last-n")
        breakers = gr.Textbox(DEFAULTS["dry_sequence_breakers"], label=T("lab.dry_sequence_breakers"),
                              info=T("lab.dry_sequence_breakers.info"), elem_id="dry-sequence-breakers")
        mirostat = gr.Radio([(T("lab.mirostat.off"), 0), ("v1", 1), ("v2", 2)], value=DEFAULTS["mirostat"],
                            label=T("lab.mirostat"), info=T("lab.mirostat.info"), elem_id="mirostat")
        rest = [_slider(name, name.replace("_", "-")) for name in ("mirostat_tau", "mirostat_eta")]
    return [*dry, window, breakers, mirostat, *rest]


def _slider(name: str, elem_id: str) -> gr.Slider:
    low, high, step = SLIDERS[name]
    return gr.Slider(low, high, DEFAULTS[name], step=step, label=T(f"lab.{name}"), info=T(f"lab.{name}.info"),
                     elem_id=elem_id)


def order_shown(lab: LabComponents, order: str, lang: str = "en") -> dict:
    """The order's note, and the chain box shown for the custom order only."""
    return {lab.order_note: order_note_text(order, lang), lab.chain: gr.update(visible=order == "custom")}


def wire(lab: LabComponents) -> None:
    """The tab's events. Each handler takes `lab` first: bound to it, Gradio reads the rest of its signature
    (a gr.Request parameter, the API's parameters) as the handler's own."""
    bound = lambda handler: bind(handler, lab)
    views = [lab.chips, lab.status, lab.stage_plot, lab.draw_plot]
    # preprocess=False: the raw values reach parse_request, whose messages name the control, before
    # Gradio's own component checks ("Value 3.0 is greater than maximum value 2.") can answer for us.
    # The language comes last: API callers that leave it out get English.
    gen_event = lab.generate_button.click(bound(generate), [*lab.controls, lab.language, lab.view], lab.live,
                                          api_name="generate", show_progress="hidden", preprocess=False)
    # a press while a step is still on its way is kept and runs after it (Gradio's default drops it): a presenter
    # pressing Space twice gets two steps
    lab.step_button.click(bound(step), [lab.run_state, *lab.controls, lab.language, lab.view], lab.live,
                          api_name="step", show_progress="hidden", preprocess=False, trigger_mode="always_last")
    # Stop's js fills `on_page` with what the page shows (chips.STOP_JS; an API caller leaves it blank); the
    # cancel comes after the handler's answer, by then the stream has ended (it stops anything that has not)
    on_page = gr.Textbox("", visible=False, label="chips on the page", elem_id="stop-on-page")
    lab.stop_button.click(bound(stop_run), [lab.run_state, lab.language, lab.view, on_page], lab.live, js=STOP_JS,
                          cancels=[gen_event], api_name="stop", queue=False, show_progress="hidden")
    # the page has the chips' new value: what a streaming handler reads to stay one update ahead (run.Pace)
    lab.chips.change(bound(page_has), [lab.run_state, lab.chips], None, js=COUNT_JS, queue=False, preprocess=False,
                     postprocess=False, show_progress="hidden", api_visibility="private")
    # release (mouse), and change from the keyboard: arrow keys and Enter move the step at once
    gr.on([lab.scrub.release, lab.scrub.input], bound(scrub_to), [lab.scrub, lab.run_state, lab.language, lab.view],
          [*views, lab.run_plot], api_name="scrub", show_progress="hidden", trigger_mode="always_last",
          preprocess=False)
    lab.chip_probs.change(None, lab.chip_probs, None, js=PROBS_JS, api_visibility="private", show_progress="hidden")
    wire_ban(lab, lab.ban_box)
    lab.order.change(bound(order_shown), [lab.order, lab.language], [lab.order_note, lab.chain], api_visibility="private",
                     show_progress="hidden")
    if isinstance(lab.language, gr.Radio):
        lab.language.change(bound(rerender), [lab.language, lab.run_state, lab.order, lab.prompt, lab.view],
                            [*views, lab.run_plot, lab.order_note, lab.prompt], api_visibility="private",
                            show_progress="hidden", preprocess=False)
