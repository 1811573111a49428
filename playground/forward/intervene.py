"""The Forward pass tab's section 6, "Intervene": who pushed the next token up, and a part knocked out.

    a new trace (the tab's State) ──► attribute(): candidate and rival = its top two; the bars, the heads, the line
    Candidate / Against changed, Who pushed it up?  ──► attribute() for those two, the heads of the knock-out block
    Knock it out ──► knock_out(the box's prompt, part, the lab's settings) ──► before → after, the lab's stages on it
    Restore ──► the model as it is (nothing to compute: the before is the trace's)
    a click on a grid's cell, Patch every cell ──► intervene_patch.py ──► the grid of p(the source's answer)
    Steer ──► steer(its prompt, towards − away after a block, scale, the lab's settings) ──► both runs' texts

The attribution costs one traced pass and a knock-out two (the model as it is, then without the part), each a
prompt's prefill: on the service's lock as a trace, never in the room's queue. The lab's settings come from the lab's
own controls (parse_request, as a run reads them), so "what top-p keeps now" is the lab's top-p.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from model_service.records import validation
from model_service.records.intervention import KINDS, MODES, Knockout
from playground import limits

from ..common.errors import unchanged, user_error
from ..common.figures import empty_figure
from ..common.i18n import DEFAULT, PATCH_SOURCES, STEER_AWAY, STEER_PROMPTS, STEER_TOWARDS, T, swapped_default, tr
from ..common.text import escape_html
from ..lab.request import field_labels, parse_request
from ..lab.view import View, stage_chart
from . import intervene_charts as charts
from . import intervene_text as text
from .intervene_patch import blank_grid, candidate_id, patch_cell, patch_every_cell
from .intervene_shown import Shown

KEEP = object()  # attribution_views: the kept results left as they are


@dataclass(frozen=True)
class InterveneComponents:
    state: gr.State  # {"key": (prompt, chat, model) it was made for, "attribution": the Attribution on screen}
    lesson_md: gr.Markdown
    candidate: gr.Dropdown
    rival: gr.Dropdown
    attribute_btn: gr.Button
    attribution_md: gr.Markdown
    attribution_plot: gr.Plot
    kind: gr.Radio
    block: gr.Slider
    head: gr.Number
    mode: gr.Radio
    knock_btn: gr.Button
    restore_btn: gr.Button
    knockout_md: gr.Markdown
    knockout_plot: gr.Plot
    stages_plot: gr.Plot
    source: gr.Textbox
    patch_btn: gr.Button
    patch_md: gr.Markdown
    patch_plot: gr.Plot
    patch_state: gr.State  # the cells patched so far, with what they were computed for (intervene_patch.py)
    patch_cell: gr.Textbox  # a clicked cell, written by the page (intervene_patch.PATCH_CLICK_JS)
    results: gr.State  # the page's Shown: the latest result of each kind, what each view was asked for
    steer_prompt: gr.Textbox
    towards: gr.Textbox
    away: gr.Textbox
    steer_block: gr.Slider
    scale: gr.Slider
    steer_btn: gr.Button
    steer_md: gr.Markdown

    @property
    def attribution_views(self) -> list:
        return [self.state, self.candidate, self.rival, self.attribution_md, self.attribution_plot, self.head,
                self.results]

    @property
    def knockout_views(self) -> list:
        return [self.knockout_md, self.knockout_plot, self.stages_plot]


def kind_choices(lang: str) -> list:
    return [(tr(lang, f"intervene.kind.{k}"), k) for k in KINDS]


def mode_choices(lang: str) -> list:
    return [(tr(lang, f"intervene.mode.{m}"), m) for m in MODES]


def build(blocks: int) -> InterveneComponents:
    """The section's components, in the current Blocks context (under the logit lens)."""
    gr.Markdown(T("forward.section.intervene"))
    lesson_md = gr.Markdown(T("intervene.lesson"), elem_id="iv-lesson")
    with gr.Row(equal_height=True):
        candidate = gr.Dropdown([], label=T("intervene.candidate"), elem_id="iv-candidate", scale=2)
        rival = gr.Dropdown([], label=T("intervene.rival"), elem_id="iv-rival", scale=2)
        attribute_btn = gr.Button(T("intervene.attribute"), elem_id="iv-attribute", scale=1, min_width=160)
    attribution_md = gr.Markdown(elem_id="iv-attribution-text")
    attribution_plot = gr.Plot(empty_figure(tr(DEFAULT, "intervene.empty.attribution"), 420), show_label=False,
                               elem_id="iv-attribution")
    with gr.Row(equal_height=True):
        kind = gr.Radio(kind_choices(DEFAULT), value="mlp", label=T("intervene.kind"), elem_id="iv-kind", scale=3)
        block = gr.Slider(1, blocks, blocks, step=1, label=T("intervene.block"), elem_id="iv-block", scale=2)
        head = gr.Number(1, label=T("intervene.head"), precision=0, minimum=1, elem_id="iv-head", scale=1, min_width=90)
    with gr.Row(equal_height=True):
        mode = gr.Radio(mode_choices(DEFAULT), value="zero", label=T("intervene.mode"), elem_id="iv-mode", scale=3)
        knock_btn = gr.Button(T("intervene.knock_out"), variant="primary", elem_id="iv-knock", scale=1, min_width=140)
        restore_btn = gr.Button(T("intervene.restore"), elem_id="iv-restore", scale=1, min_width=120)
    knockout_md = gr.Markdown(elem_id="iv-knockout-text")
    knockout_plot = gr.Plot(empty_figure(tr(DEFAULT, "intervene.empty.knockout"), 320), show_label=False,
                            elem_id="iv-knockout")
    stages_plot = gr.Plot(empty_figure(tr(DEFAULT, "intervene.empty.stages"), 200), show_label=False, elem_id="iv-stages")
    gr.Markdown(T("intervene.patch.lesson"), elem_id="iv-patch-lesson")
    with gr.Row(equal_height=True):
        source = gr.Textbox(PATCH_SOURCES[DEFAULT], label=T("intervene.source"), lines=1, scale=4, elem_id="iv-source")
        patch_btn = gr.Button(T("intervene.patch"), elem_id="iv-patch", scale=1, min_width=160)
    # the grid, then its line: a click's answer grows the line, not the space above the cells the learner clicks
    patch_plot = gr.Plot(empty_figure(tr(DEFAULT, "intervene.empty.patch"), 240), show_label=False, elem_id="iv-patch-grid")
    patch_md = gr.Markdown(elem_id="iv-patch-text")
    patch_cell = gr.Textbox("", visible="hidden", elem_id="iv-patch-cell")
    steer = build_steer(blocks)
    return InterveneComponents(gr.State(None), lesson_md, candidate, rival, attribute_btn, attribution_md,
                               attribution_plot, kind, block, head, mode, knock_btn, restore_btn, knockout_md,
                               knockout_plot, stages_plot, source, patch_btn, patch_md, patch_plot, gr.State(None),
                               patch_cell, gr.State(Shown()), *steer)


def build_steer(blocks: int) -> tuple:
    """Steer: a prompt, the two prompts whose difference is the direction, where and how hard; the two runs."""
    gr.Markdown(T("intervene.steer.lesson"), elem_id="iv-steer-lesson")
    prompt = gr.Textbox(STEER_PROMPTS[DEFAULT], label=T("intervene.steer.prompt"), lines=1, elem_id="iv-steer-prompt")
    with gr.Row(equal_height=True):
        towards = gr.Textbox(STEER_TOWARDS[DEFAULT], label=T("intervene.steer.towards"), lines=1, elem_id="iv-towards")
        away = gr.Textbox(STEER_AWAY[DEFAULT], label=T("intervene.steer.away"), lines=1, elem_id="iv-away")
    with gr.Row(equal_height=True):
        block = gr.Slider(1, blocks, min(limits.STEER_BLOCK, blocks), step=1, label=T("intervene.block"),
                          elem_id="iv-steer-block", scale=2)
        scale = gr.Slider(-limits.STEER_SLIDER, limits.STEER_SLIDER, 1.0, step=0.25, label=T("intervene.steer.scale"),
                          elem_id="iv-scale", scale=2)
        button = gr.Button(T("intervene.steer"), elem_id="iv-steer", scale=1, min_width=160)
    return prompt, towards, away, block, scale, button, gr.Markdown(elem_id="iv-steer-text")


# ---- the handlers ---------------------------------------------------------------------------------------------


def candidate_choices(trace, lang: str) -> list:
    """The next token's most probable candidates (the trace's last position): (label, id)."""
    if trace is None or not trace.predictions:
        return []
    return [(f"{text.show_token(c, lang=lang).text} · {c.prob:.1%}", c.id) for c in trace.predictions[-1].top]


def attribution_views(iv: InterveneComponents, trace, a, lang: str, kept: Shown | object = KEEP) -> dict:
    """The attribution's views; with the page's Shown given, `a` kept in it (a redraw keeps it as it is)."""
    choices = candidate_choices(trace, lang)
    known = {i for _, i in choices}
    extra = [(f"{text.show_token(t, lang=lang).text}", t.id) for t in (a.candidate, a.rival) if t.id not in known]
    return {iv.state: {"key": (trace.prompt, trace.chat, trace.model), "attribution": a},
            iv.candidate: gr.update(choices=choices + extra, value=a.candidate.id),
            iv.rival: gr.update(choices=choices + extra, value=a.rival.id),
            iv.head: gr.update(maximum=len(a.heads) or None),
            iv.attribution_md: text.attribution_markdown(a, lang), iv.attribution_plot: charts.attribution_figure(a, lang),
            **({} if kept is KEEP else
               {iv.results: kept.keep("attribution", {"prompt": trace.prompt, "chat": trace.chat, "model": trace.model},
                                      a)})}


def attribute(iv: InterveneComponents, service, trace, candidate, rival, block, kept, lang="en"):
    """Who pushed the candidate up against the rival, on the prompt traced on screen; the heads of the knock-out's
    block."""
    if trace is None:
        raise user_error(tr(lang, "intervene.status.no_trace"))
    try:
        a = service.attribute(trace.prompt, trace.chat, candidate_id(candidate), candidate_id(rival),
                              validation.number("block", block, integer=True, low=1, high=trace.num_layers, blank=None))
    except (ValueError, RuntimeError) as e:
        raise user_error(e, lang) from None
    return attribution_views(iv, trace, a, lang, kept)


def heads_of(iv: InterveneComponents, service, current, trace, candidate, rival, block, kept, lang="en"):
    """The knock-out's block moved: the same attribution, that block's heads (nothing before the first one)."""
    if current is None or trace is None:
        return unchanged(iv.state)
    return attribute(iv, service, trace, candidate, rival, block, kept, lang)


def within(block, blocks: int, default: int) -> int:
    """A block slider's value on a model of `blocks` blocks: the same block where it has it, its last one past it."""
    try:
        return min(int(validation.number("block", block, integer=True, low=1)), blocks)
    except ValueError:
        return default


def new_trace(iv: InterveneComponents, service, trace, current, block, steer_block, kept, lang="en"):
    """A trace came (a new prompt, a link, another block's attention): its top two, unless this prompt's
    attribution is on screen already; the knock-out's views go back to the model as it is and the patching grid
    blank (unless made for this prompt), its block slider to the model's depth (the block it showed, where the model
    has it)."""
    if trace is None:
        return unchanged(iv.state)
    if current is not None and current["key"] == (trace.prompt, trace.chat, trace.model):
        return unchanged(iv.state)
    block = within(block, trace.num_layers, trace.num_layers)
    steer_block = within(steer_block, trace.num_layers, min(limits.STEER_BLOCK, trace.num_layers))
    try:
        a = service.attribute(trace.prompt, trace.chat)
    except (ValueError, RuntimeError) as e:  # another model now, or a prompt the tracer took and this one did not
        return {iv.attribution_md: escape_html(str(e))}
    # a knock-out or a grid made for this very prompt stays, or one asked for it and still on its way (a scene's,
    # pressed while its prompt was being traced: it lands after this)
    key = (trace.model, trace.prompt, trace.chat)
    out = {iv.block: gr.update(maximum=trace.num_layers, value=block),
           iv.steer_block: gr.update(maximum=trace.num_layers, value=steer_block)}
    for kind, blank in (("knockout", restored(iv, lang)), ("patch", blank_grid(iv, trace, lang))):
        if not kept.holds(kind, key):
            kept.keep(kind, {}, None)
            out |= blank
    return out | attribution_views(iv, trace, a, lang, kept)


def knock_out(iv: InterveneComponents, service, prompt, chat, kind, block, head, mode, candidate, view, kept, lang,
              *controls):
    """The prompt in the tab's box (the one traced, or a scene's still being traced) with one part knocked out."""
    try:
        prompt, chat = validation.text("prompt", prompt), validation.boolean("chat template", chat)
        settings = parse_request(*controls).settings
        target = Knockout(kind, block, head if kind == "head" else None, mode)  # checked by the service, on the model
        kept.ask("knockout", (service.info.name, prompt, chat))
        result = service.knock_out(prompt, target, settings, chat, candidate_id(candidate))
    except (ValueError, RuntimeError) as e:
        kept.ask("knockout", None)
        raise user_error(e, lang, field_labels(lang)) from None
    return {iv.knockout_md: text.knockout_markdown(result, lang), iv.knockout_plot: charts.knockout_figure(result, lang),
            iv.stages_plot: stage_chart(result.after, view if isinstance(view, View) else View(), lang),
            iv.results: kept.keep("knockout", {"prompt": prompt, "chat": chat, "model": service.info.name}, result)}


def steer(iv: InterveneComponents, service, prompt, towards, away, block, scale, kept, lang, *controls):
    """The steer prompt run twice with the lab's settings and one seed: as it is, and with the direction added."""
    try:
        prompt = validation.text("prompt", prompt)
        settings = parse_request(*controls).settings
        result = service.steer(prompt, towards, away, block, scale, settings, limits.STEER_TOKENS)
    except (ValueError, RuntimeError) as e:
        raise user_error(e, lang, field_labels(lang)) from None
    return {iv.steer_md: text.steer_markdown(result, lang),
            iv.results: kept.keep("steer", {"prompt": prompt, "towards": towards, "away": away,
                                            "model": service.info.name}, result)}


def restored(iv: InterveneComponents, lang="en") -> dict:
    return {iv.knockout_md: tr(lang, "intervene.restored"),
            iv.knockout_plot: empty_figure(tr(lang, "intervene.empty.knockout"), 320),
            iv.stages_plot: empty_figure(tr(lang, "intervene.empty.stages"), 200)}


def restore(iv: InterveneComponents, kept, lang="en") -> dict:
    """Restore: the model as it is (nothing to compute), the knock-out no longer kept for the section's file."""
    kept.ask("knockout", None)
    return restored(iv, lang) | {iv.results: kept.keep("knockout", {}, None)}


def relabel(iv: InterveneComponents, trace, current, source, steer_prompt, towards, away, lang="en") -> dict:
    """The page's language changed: the attribution redrawn from the State, the choices' labels in `lang`, the
    source prompt in `lang` unless the learner typed another."""
    out = {iv.kind: gr.update(choices=kind_choices(lang)), iv.mode: gr.update(choices=mode_choices(lang))}
    for box, value, versions in ((iv.source, source, PATCH_SOURCES), (iv.steer_prompt, steer_prompt, STEER_PROMPTS),
                                 (iv.towards, towards, STEER_TOWARDS), (iv.away, away, STEER_AWAY)):
        swapped = swapped_default(value, lang, versions)
        out |= {box: swapped} if swapped is not None else {}
    if current is None or trace is None:
        return out | {iv.attribution_plot: empty_figure(tr(lang, "intervene.empty.attribution"), 420)}
    return out | attribution_views(iv, trace, current["attribution"], lang)


# ---- the events -----------------------------------------------------------------------------------------------


def wire(iv: InterveneComponents, service, trace_state: gr.State, prompt: gr.Textbox, chat: gr.Checkbox,
         language: gr.Radio | None, lab) -> None:
    from ..common.handlers import bind

    lang = [language] if language is not None else []
    hidden = dict(api_visibility="private", show_progress="hidden")
    trace_state.change(bind(new_trace, iv, service), [trace_state, iv.state, iv.block, iv.steer_block, iv.results,
                                                      *lang],
                       [*iv.attribution_views, *iv.knockout_views, iv.block, iv.steer_block, iv.patch_md, iv.patch_plot,
                        iv.patch_state],
                       **hidden)
    asked = [trace_state, iv.candidate, iv.rival, iv.block, iv.results, *lang]
    # (scripts: attribution_record and knockout_record in playground/api.py take a prompt, not the page's trace)
    iv.attribute_btn.click(bind(attribute, iv, service), asked, iv.attribution_views, api_visibility="private",
                           preprocess=False)
    # another block to knock out: its heads' shares, for the head to pick
    iv.block.release(bind(heads_of, iv, service), [iv.state, *asked], iv.attribution_views, preprocess=False,
                     trigger_mode="always_last", **hidden)
    # the lab's settings and the page's view (a phone's stage chart stacks its panels)
    controls, view = (lab.controls, lab.view) if lab is not None else ([], gr.State(View()))
    iv.knock_btn.click(bind(knock_out, iv, service), [prompt, chat, iv.kind, iv.block, iv.head, iv.mode, iv.candidate,
                                                      view, iv.results, *(lang or [gr.State("en")]), *controls],
                       [*iv.knockout_views, iv.results], api_visibility="private", preprocess=False)
    iv.restore_btn.click(bind(restore, iv), [iv.results, *lang], [*iv.knockout_views, iv.results], queue=False, **hidden)
    patched = [iv.patch_md, iv.patch_plot, iv.patch_state, iv.results]
    iv.patch_btn.click(bind(patch_every_cell, iv, service), [prompt, chat, iv.source, iv.candidate, iv.results, *lang],
                       patched,
                       api_visibility="private", preprocess=False)
    # a click on a cell (the page writes it: PATCH_CLICK_JS, loaded once by page.py)
    iv.patch_cell.change(bind(patch_cell, iv, service), [prompt, chat, iv.source, iv.candidate, iv.patch_cell,
                                                         iv.patch_state, iv.results, *lang], patched, preprocess=False,
                         trigger_mode="multiple", **hidden)  # (each click its cell, in turn: none dropped)
    iv.steer_btn.click(bind(steer, iv, service), [iv.steer_prompt, iv.towards, iv.away, iv.steer_block, iv.scale,
                                                  iv.results, *(lang or [gr.State("en")]), *controls],
                       [iv.steer_md, iv.results],
                       api_visibility="private", preprocess=False)
    if language is not None:
        boxes = [iv.source, iv.steer_prompt, iv.towards, iv.away]
        language.change(bind(relabel, iv), [trace_state, iv.state, *boxes, language],
                        [iv.kind, iv.mode, *boxes, *iv.attribution_views], trigger_mode="multiple", **hidden)


__all__ = ["InterveneComponents", "build", "wire"]
