"""The Sampling lab tab: lesson 13 on the live model.

Layout and wiring only. The service streams StepRecords; this module turns each into chips, charts
and a status line. Text goes out on every token; charts at most every CHART_INTERVAL seconds (and
always on the last step), because each Plotly update re-sends and re-draws the whole figure.
Finished runs live in gr.State as records, so scrubbing back never recomputes anything.
Handlers return {component: value}; a component left out keeps what it shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import gradio as gr

from model_service import limits, validation
from model_service.records import StepRecord

from ..common.errors import unchanged, user_error
from ..common.figures import empty_figure
from ..common.text import STOP_REASONS, escape_html
from . import charts
from .chips import chip_html, chips_prefix, token_chips_html
from .request import DEFAULTS, DEFAULTS_NOTE, ORDER_LABELS, ORDER_NOTES, STOP_HELP, RunRequest, parse_request

CHART_INTERVAL = 0.5  # seconds: a six-panel Plotly redraw costs the browser ~100+ ms; 2 a second stays live


@dataclass
class Run:
    """One generation as the page keeps it: what was asked, the records that came back, and whether
    the learner pressed Stop (the streaming handler reads it between steps and stops at once)."""

    request: RunRequest | None = None
    records: list[StepRecord] = field(default_factory=list)
    stop_requested: bool = False

    @property
    def finished(self) -> bool:
        return bool(self.records) and (self.records[-1].stop_reason is not None or self.stop_requested)


def status_markdown(run: Run, index: int | None = None, rate: float | None = None) -> str:
    if not run.records:
        return "Press **Generate** to stream a run, or **Step** to take one token at a time."
    r = run.records[-1 if index is None else index]
    final = r.stage("final").chosen_prob if r.stages else None
    parts = [
        f"**Step {r.step + 1}** of {len(run.records)}",
        f"token <code>{escape_html(repr(r.piece))}</code> (id {r.token_id})",
        f"rank {r.chosen_rank + 1}" + (f", p = {final:.3f} after the pipeline" if final is not None else ""),
        "greedy: argmax" if r.draw.u is None else f"drawn with u = {r.draw.u:.3f}",
        f"seed {r.seed}",
        f"forward {r.forward_ms:.0f} ms · sampling {r.sampling_ms:.1f} ms",
    ]
    batch = getattr(r, "batch_size", 1)
    if batch > 1:
        parts.append(f"batch of {batch} this step")
    if rate:
        parts.append(f"{rate:.1f} tokens/s")
    last = run.records[-1]
    if last.stop_reason:
        parts.append(f"**stopped: {STOP_REASONS[last.stop_reason]}**")
    elif run.stop_requested:
        parts.append("**stopped by you**")
    return " · ".join(parts)


def waiting_markdown(waiting) -> str:
    ahead = waiting.ahead
    return (f"⏳ **waiting: {ahead} request{'s' if ahead != 1 else ''} ahead of you** — the model serves the "
            "whole room in one batch; your row joins at the next step with a free place.")


def _scrub_update(run: Run):
    n = len(run.records)
    return gr.update(minimum=0, maximum=max(n - 1, 1), value=n - 1, step=1, interactive=n > 1, visible=n > 0)


def build_lab(service, language: gr.Radio | None = None) -> dict:
    """Create the tab's components inside the current Blocks context and wire their events.
    Returns the components other tabs and the page read (by name)."""
    run_state = gr.State(Run())
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320):
            prompt = gr.Textbox(limits.LESSON_PROMPT, label="Prompt", lines=3, elem_id="prompt")
            chat = gr.Checkbox(False, label="Chat template (wrap the prompt as a user message for instruct models)")
            temperature = gr.Slider(0, 2, DEFAULTS["temperature"], step=0.05, label="Temperature", info="0 = greedy (argmax)", elem_id="temperature")
            top_k = gr.Slider(0, 200, DEFAULTS["top_k"], step=1, label="Top-k", info="0 = off", elem_id="top-k")
            top_p = gr.Slider(0.01, 1, DEFAULTS["top_p"], step=0.01, label="Top-p", info="1 = off", elem_id="top-p")
            min_p = gr.Slider(0, 1, DEFAULTS["min_p"], step=0.01, label="Min-p", info="0 = off", elem_id="min-p")
            order = gr.Radio([(label, key) for key, label in ORDER_LABELS.items()], value=DEFAULTS["order"], label="Sampler order", elem_id="order")
            order_note = gr.Markdown(ORDER_NOTES[DEFAULTS["order"]])
            seed = gr.Textbox("", label="Seed", placeholder="blank = random; the seed used is shown after a run", elem_id="seed")
            max_new = gr.Slider(1, limits.MAX_NEW_TOKENS, DEFAULTS["max_new_tokens"], step=1, label="Max new tokens", elem_id="max-new")
            stop = gr.Textbox("", label="Stop strings", placeholder=STOP_HELP, lines=1, elem_id="stop-strings")
            with gr.Row():
                generate_btn = gr.Button("Generate", variant="primary", elem_id="generate")
                step_btn = gr.Button("Step", elem_id="step")
                stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
            gr.Markdown(DEFAULTS_NOTE, elem_classes=["ntp-note"])
        with gr.Column(scale=3):
            chips = gr.HTML(token_chips_html([]), elem_id="chips")
            status = gr.Markdown(status_markdown(Run()), elem_id="run-status")
            stage_plot = gr.Plot(empty_figure("The distributions of each step appear here."), show_label=False, elem_id="stage-plot")
            draw_plot = gr.Plot(empty_figure("The random draw appears here.", height=120), show_label=False, elem_id="draw-plot")
            scrub = gr.Slider(0, 1, 0, step=1, label="Scrub through the steps of the last run", visible=False, elem_id="scrub")
            run_plot = gr.Plot(empty_figure("Entropy, chosen-token probability and kept count over the run.", height=220), show_label=False, elem_id="run-plot")

    controls = [prompt, chat, temperature, top_k, top_p, min_p, seed, max_new, stop, order]

    def request_of(*values) -> RunRequest:
        try:
            return parse_request(*values)
        except ValueError as e:
            raise user_error(e) from None

    def open_stream(request: RunRequest, continue_from=()):
        try:
            return service.generate(
                request.prompt, request.settings, max_new_tokens=request.max_new_tokens, stop=request.stop,
                chat=request.chat, continue_from=continue_from, report_waiting=True,
            )
        except (ValueError, RuntimeError) as e:  # bad input, or the model still loading
            raise user_error(e) from None

    def step_views(run: Run, index: int | None = None) -> dict:
        """The stage and draw figures of one step of a run."""
        r = run.records[-1 if index is None else index]
        return {stage_plot: charts.stage_figure(r), draw_plot: charts.draw_figure(r)}

    def generate(*values):
        request = request_of(*values)
        run = Run(request)
        stream = open_stream(request)
        started = last_chart = time.monotonic()
        chips_html = chips_prefix()
        try:
            for record in stream:
                if run.stop_requested:  # Stop was pressed: this record is never shown
                    break
                if not isinstance(record, StepRecord):  # waiting for a row in the shared batch
                    yield {status: waiting_markdown(record)}
                    continue
                run.records.append(record)  # the State holds this same object: no copy per token
                now = time.monotonic()
                chips_html += chip_html(record, len(run.records) - 1)  # O(1) per token, same HTML as token_chips_html
                out = {chips: chips_html, run_state: run}
                if record.stop_reason or now - last_chart >= CHART_INTERVAL:
                    # the status line re-renders as Markdown in the browser: it keeps the charts' pace
                    last_chart = now
                    rate = len(run.records) / max(now - started, 1e-6)
                    out |= {status: status_markdown(run, rate=rate), **step_views(run)}
                if record.stop_reason:  # here, not in a follow-up event, so API callers can scrub too
                    out |= finish(run)
                yield out
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # frees this run's row in the model's batch at the next step boundary

    def step(state: Run, *values):
        request = request_of(*values)
        same_run = state.request is not None and not state.finished and (
            (state.request.prompt, state.request.chat) == (request.prompt, request.chat)
        )
        taken = [r.token_id for r in state.records] if same_run else []
        if same_run and request.settings.seed is None:  # blank seed: keep following the run's own
            request = replace(request, settings=replace(request.settings, seed=state.records[0].seed))
        stream = open_stream(request, continue_from=taken)
        try:
            record = next(r for r in stream if isinstance(r, StepRecord))  # past any Waiting
        finally:
            getattr(stream, "close", lambda: None)()
        run = Run(request, (state.records if same_run else []) + [record])
        return {
            chips: token_chips_html(run.records), status: status_markdown(run), **step_views(run), run_state: run,
            scrub: _scrub_update(run), run_plot: charts.run_figure(run.records),
        }

    def finish(state: Run):
        """After a run: the scrub slider and the over-the-run chart, from the records."""
        if not state.records:
            return unchanged(scrub, run_plot)
        return {scrub: _scrub_update(state), run_plot: charts.run_figure(state.records)}

    def stop_run(state: Run):
        """Stop: the streaming handler sees the flag before its next record; the page freezes on the
        records it has shown, and the scrubber and run chart appear for them."""
        state.stop_requested = True
        if not state.records:
            return unchanged(chips)
        return {
            chips: token_chips_html(state.records), status: status_markdown(state), **step_views(state),
            **finish(state),
        }

    def scrub_to(index, state: Run):
        if not state.records:
            return unchanged(chips)
        try:
            i = validation.number("scrub step", index, integer=True, low=0, high=len(state.records) - 1)
        except ValueError as e:
            raise user_error(e) from None
        return {
            chips: token_chips_html(state.records, selected=i), status: status_markdown(state, index=i),
            **step_views(state, i),
        }

    live = [chips, status, stage_plot, draw_plot, run_state, scrub, run_plot]
    # preprocess=False: the raw values reach parse_request, whose messages name the control, before
    # Gradio's own component checks ("Value 3.0 is greater than maximum value 2.") can answer for us
    gen_event = generate_btn.click(generate, controls, live, api_name="generate", show_progress="hidden",
                                   preprocess=False)
    step_btn.click(step, [run_state, *controls], live, api_name="step", show_progress="hidden", preprocess=False)
    stop_btn.click(stop_run, run_state, [chips, status, stage_plot, draw_plot, scrub, run_plot], cancels=[gen_event],
                   api_name="stop", queue=False)
    # release (mouse), and change from the keyboard: arrow keys and Enter move the step at once
    gr.on([scrub.release, scrub.input], scrub_to, [scrub, run_state], [chips, status, stage_plot, draw_plot],
          api_name="scrub", show_progress="hidden", trigger_mode="always_last", preprocess=False)
    order.change(lambda o: ORDER_NOTES.get(o, ""), order, order_note, api_visibility="private", show_progress="hidden")

    return {
        "prompt": prompt, "chat": chat, "temperature": temperature, "top_k": top_k, "top_p": top_p,
        "min_p": min_p, "seed": seed, "max_new_tokens": max_new, "stop": stop, "order": order,
        "run_state": run_state, "chips": chips, "status": status, "scrub": scrub,
    }
