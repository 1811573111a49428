"""The Sampling lab tab: lesson 13 on the live model.

Layout and wiring only. The service streams StepRecords; this module turns each into chips, charts
and a status line. Text goes out on every token; charts at most every CHART_INTERVAL seconds (and
always on the last step), because each Plotly update re-sends and re-draws the whole figure.
Finished runs live in gr.State as records, so scrubbing back never recomputes anything, and a change of
the page's language redraws every view from them (a run still streaming switches language at its next step).
Handlers return {component: value}; a component left out keeps what it shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import gradio as gr

from model_service import limits
from model_service.records import validation
from model_service.records.step import StepRecord

from ..common.errors import unchanged, user_error
from ..common.i18n import LESSON_PROMPTS, T, swapped_default, tr
from ..common.text import escape_html, prob_text, show_steps, stop_reason
from .chips import chips_prefix, new_chips, token_chips_html
from .inspect import build_inspect
from .request import DEFAULTS, ORDER_LABELS, ORDER_NOTES, RunRequest, field_labels, parse_request
from .scrubber import scrub_update
from .view import View, draw_chart, placeholders, run_chart, stage_chart

CHART_INTERVAL = 0.5  # seconds: a six-panel Plotly redraw costs the browser ~100+ ms; 2 a second stays live


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


def build_lab(service, language: gr.Radio | None = None) -> dict:
    """Create the tab's components inside the current Blocks context and wire their events.
    `language`: the page's picker (None: English). Returns the components other tabs and the page read."""
    language = language if language is not None else gr.State("en")
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
            order = gr.Radio([(label, key) for key, label in ORDER_LABELS.items()], value=DEFAULTS["order"],
                             label=T("lab.order"), elem_id="order")
            order_note = gr.Markdown(order_note_text(DEFAULTS["order"]), elem_id="order-note")
            seed = gr.Textbox("", label=T("lab.seed"), placeholder=T("lab.seed.placeholder"), elem_id="seed")
            max_new = gr.Slider(1, limits.MAX_NEW_TOKENS, DEFAULTS["max_new_tokens"], step=1, label=T("lab.max_new"),
                                elem_id="max-new")
            stop = gr.Textbox("", label=T("lab.stop"), placeholder=T("lab.stop.placeholder"), lines=1,
                              elem_id="stop-strings")
            with gr.Row(elem_id="lab-buttons"):
                generate_btn = gr.Button(T("lab.generate"), variant="primary", elem_id="generate")
                step_btn = gr.Button(T("lab.step"), elem_id="step")
                stop_btn = gr.Button(T("lab.stop_button"), variant="stop", elem_id="stop")
            gr.Markdown(T("lab.defaults_note"), elem_classes=["ntp-note"])
        with gr.Column(scale=3):
            chips = gr.HTML(token_chips_html([]), elem_id="chips")
            status = gr.Markdown(status_markdown(Run()), elem_id="run-status")
            stage_plot = gr.Plot(stage_empty, show_label=False, elem_id="stage-plot")
            draw_plot = gr.Plot(draw_empty, show_label=False, elem_id="draw-plot")
            scrub = gr.Slider(1, 2, 1, step=1, label=T("lab.scrub"), visible=False, elem_id="scrub")
            run_plot = gr.Plot(run_empty, show_label=False, elem_id="run-plot")
            build_inspect(service, language, run_state, scrub, run_plot)  # "Look inside this step" (issue 14)

    controls = [prompt, chat, temperature, top_k, top_p, min_p, seed, max_new, stop, order]

    def bad(error, lang):
        """The error as a toast in the page's language, naming the control as the learner reads it."""
        return user_error(error, lang, field_labels(lang))

    def request_of(*values, lang: str) -> RunRequest:
        try:
            return parse_request(*values)
        except ValueError as e:
            raise bad(e, lang) from None

    def open_stream(request: RunRequest, lang: str, continue_from=()):
        try:
            return service.generate(
                request.prompt, request.settings, max_new_tokens=request.max_new_tokens, stop=request.stop,
                chat=request.chat, continue_from=continue_from, report_waiting=True,
            )
        except (ValueError, RuntimeError) as e:  # bad input, or the model still loading
            raise bad(e, lang) from None

    def step_views(run: Run, index: int | None = None, shown: View = View()) -> dict:
        """The stage and draw figures of one step of a run, in the run's language, drawn for the page's view."""
        r = run.records[-1 if index is None else index]
        return {stage_plot: stage_chart(r, shown, run.lang), draw_plot: draw_chart(r, shown, run.lang)}

    def model_name(lang: str) -> str:
        try:
            return service.info.name
        except RuntimeError as e:  # loading, or the host switching the model
            raise bad(e, lang) from None

    def generate(*values):
        *values, lang, shown = values
        request = request_of(*values, lang=lang)
        run = Run(request, lang=lang, model=model_name(lang), view=shown)
        stream = open_stream(request, lang)
        started = last_chart = time.monotonic()
        chips_html, chips_lang, chipped = chips_prefix(lang), lang, 0  # chipped: chips sent (a split character waits)
        try:  # (a page closed at any yield must still close the stream: every yield is inside)
            # the run before this one leaves the page at once: its charts and scrubber would read as this run's
            yield {scrub: gr.update(visible=False, value=1), status: tr(lang, "lab.status.starting"), chips: chips_html,
                   run_state: run, **dict(zip((stage_plot, draw_plot, run_plot), placeholder_figures(lang, shown)))}
            for record in stream:
                if run.stop_requested:  # Stop was pressed: this record is never shown
                    break
                if not isinstance(record, StepRecord):  # waiting for a row in the shared batch
                    yield {status: waiting_markdown(record, run.lang)}
                    continue
                run.records.append(record)  # the State holds this same object: no copy per token
                now = time.monotonic()
                if run.lang != chips_lang:  # the language changed mid-run: the chips' hover text follows
                    chips_lang = run.lang
                    chips_html = chips_prefix(run.lang) + new_chips(run.records[:chipped], 0, True, run.lang)[0]
                # O(1) per token, same HTML as token_chips_html
                more, chipped = new_chips(run.records, chipped, final=record.stop_reason is not None, lang=run.lang)
                chips_html += more
                out = {chips: chips_html, run_state: run}
                if record.stop_reason or now - last_chart >= CHART_INTERVAL:
                    # the status line re-renders as Markdown in the browser: it keeps the charts' pace
                    last_chart = now
                    run.rate = len(run.records) / max(now - started, 1e-6)
                    out |= {status: status_markdown(run, rate=run.rate, lang=run.lang), **step_views(run, None, run.view)}
                if record.stop_reason:  # here, not in a follow-up event, so API callers can scrub too
                    out |= finish(run, run.view)
                yield out
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # frees this run's row in the model's batch at the next step boundary

    def step(state: Run, *values):
        *values, lang, shown = values
        request = request_of(*values, lang=lang)
        model = model_name(lang)
        same_run = state.request is not None and not state.finished and state.model == model and (
            (state.request.prompt, state.request.chat) == (request.prompt, request.chat)
        )
        taken = [r.token_id for r in state.records] if same_run else []
        if same_run and request.settings.seed is None:  # blank seed: keep following the run's own
            request = replace(request, settings=replace(request.settings, seed=state.records[0].seed))
        stream = open_stream(request, lang, continue_from=taken)
        try:
            record = next(r for r in stream if isinstance(r, StepRecord))  # past any Waiting
        finally:
            getattr(stream, "close", lambda: None)()
        run = Run(request, (state.records if same_run else []) + [record], lang=lang, model=model, view=shown)
        return {
            chips: token_chips_html(run.records, lang=lang), status: status_markdown(run, lang=lang),
            **step_views(run, None, shown), run_state: run, scrub: scrub_update(run.records),
            run_plot: run_chart(run.records, None, shown, lang),
        }

    def finish(state: Run, shown: View = View()):
        """After a run: the scrub slider and the over-the-run chart, from the records."""
        if not state.records:
            return unchanged(scrub, run_plot)
        return {scrub: scrub_update(state.records), run_plot: run_chart(state.records, None, shown, state.lang)}

    def stop_run(state: Run, lang, shown: View = View()):
        """Stop: the streaming handler sees the flag before its next record; the page freezes on the
        records it has shown, and the scrubber and run chart appear for them."""
        state.stop_requested, state.lang = True, lang
        if not state.records:
            return unchanged(chips)
        return {
            chips: token_chips_html(state.records, lang=lang), status: status_markdown(state, lang=lang),
            **step_views(state, None, shown), **finish(state, shown),
        }

    def scrub_to(index, state: Run, lang, shown: View = View()):
        if not state.records:
            return unchanged(chips)
        try:
            i = validation.number("scrub step", index, integer=True, low=1, high=len(state.records)) - 1
        except ValueError as e:
            raise bad(e, lang) from None
        state.lang = lang
        return {
            chips: token_chips_html(state.records, selected=i, lang=lang),
            status: status_markdown(state, index=i, lang=lang), **step_views(state, i, shown),
            run_plot: run_chart(state.records, i, shown, lang),
        }

    def rerender(lang, state: Run, index, order_key, current_prompt, shown: View = View(), request: gr.Request = None):
        """The page's language changed: every server-built view again, from the records the page keeps
        (no model work), and the lesson prompt in the new language unless the learner or a link set it."""
        out = {order_note: order_note_text(order_key, lang)}
        query = dict(request.query_params) if request else {}
        swapped = None if "prompt" in query else swapped_default(current_prompt, lang, LESSON_PROMPTS)
        if swapped is not None:
            out[prompt] = swapped
        state.lang = lang  # a run still streaming uses it from its next step on
        if not state.records:
            return out | dict(zip((chips, status, stage_plot, draw_plot, run_plot),
                                  (token_chips_html([], lang=lang), status_markdown(state, lang=lang),
                                   *placeholder_figures(lang, shown))))
        try:  # the step the scrubber shows, if the learner moved it back from the last one
            i = int(index) - 1 if state.finished and 1 <= int(index) < len(state.records) else None
        except (TypeError, ValueError):
            i = None
        return out | {
            chips: token_chips_html(state.records, selected=i, lang=lang),
            status: status_markdown(state, index=i, rate=state.rate if i is None else None, lang=lang),
            **step_views(state, i, shown), run_plot: run_chart(state.records, i, shown, lang),
        }

    live = [chips, status, stage_plot, draw_plot, run_state, scrub, run_plot]

    def new_model(info, first: bool, lang="en") -> dict:
        """The host switched the room's model: the run on the page was drawn by the old one."""
        if first:
            return {}
        stage_empty, draw_empty, run_empty = placeholder_figures(lang)
        return {
            run_state: Run(lang=lang), chips: token_chips_html([], lang=lang), scrub: gr.update(visible=False, value=1),
            status: tr(lang, "lab.status.new_model", model=escape_html(info.name)),
            stage_plot: stage_empty, draw_plot: draw_empty, run_plot: run_empty,
        }

    # preprocess=False: the raw values reach parse_request, whose messages name the control, before
    # Gradio's own component checks ("Value 3.0 is greater than maximum value 2.") can answer for us.
    # The language comes last: API callers that leave it out get English.
    gen_event = generate_btn.click(generate, [*controls, language, view], live, api_name="generate", show_progress="hidden",
                                   preprocess=False)
    step_btn.click(step, [run_state, *controls, language, view], live, api_name="step", show_progress="hidden",
                   preprocess=False)
    stop_btn.click(stop_run, [run_state, language, view], [chips, status, stage_plot, draw_plot, scrub, run_plot],
                   cancels=[gen_event], api_name="stop", queue=False)
    # release (mouse), and change from the keyboard: arrow keys and Enter move the step at once
    gr.on([scrub.release, scrub.input], scrub_to, [scrub, run_state, language, view], [chips, status, stage_plot, draw_plot, run_plot],
          api_name="scrub", show_progress="hidden", trigger_mode="always_last", preprocess=False)
    order.change(order_note_text, [order, language], order_note, api_visibility="private", show_progress="hidden")
    if isinstance(language, gr.Radio):
        language.change(rerender, [language, run_state, scrub, order, prompt, view],
                        [chips, status, stage_plot, draw_plot, run_plot, order_note, prompt],
                        api_visibility="private", show_progress="hidden", preprocess=False)

    return {
        "prompt": prompt, "chat": chat, "temperature": temperature, "top_k": top_k, "top_p": top_p,
        "min_p": min_p, "seed": seed, "max_new_tokens": max_new, "stop": stop, "order": order,
        "run_state": run_state, "chips": chips, "status": status, "scrub": scrub, "view": view, "rerender": rerender,
        "generate": generate_btn, "step": step_btn,  # the branch panel starts a new tree on each
        "stage_plot": stage_plot, "draw_plot": draw_plot, "run_plot": run_plot,
        "watch": ([run_state, chips, scrub, status, stage_plot, draw_plot, run_plot], new_model),
    }
