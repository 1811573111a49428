"""The lab's Branches panel: pick a candidate of the step on screen, force it, and the model continues
from there with the run's settings and seed. The panel keeps the tree of branches (the run Generate drew,
then each forced one); picking a branch puts it in the lab, where the scrubber, Step and the charts work
as on any run, and each branch has its own link (settings + seed + `branch=step:token,...`).

Here the panel's components (BranchPanel), its handlers (each takes the panel first, bound to it, and returns
{component: value}) and its events; paths and forced records are in `branches`, the model work in `branch_run`.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, replace
from urllib.parse import urlencode

import gradio as gr

from model_service.records import validation
from model_service.records.step import StepRecord

from ..common.errors import unchanged, user_error
from ..common.handlers import bind
from ..common.i18n import T, tr
from ..common.lab_link import lab_query
from ..common.text import escape_html, pct, piece_label, show_token
from . import charts
from .branch_run import branch_records
from .branches import (
    Branch,
    Tree,
    branch_label,
    branch_note,
    candidate_index,
    child_path,
    format_path,
    last_switch,
    parent_of,
    parse_path,
    switch_path,
)
from .chips import token_chips_html
from .components import LabComponents
from .deep_link import link_value, switch_between, switched
from .export import controls_of
from .request import field_labels, parse_request
from .run import Pace, Run, new_tag, status_markdown
from .scrubber import scrub_index, scrub_update


def candidate_choices(record: StepRecord, lang: str = "en") -> list[tuple[str, int]]:
    """The step's candidates as the dropdown lists them: rank, token, probability under the model."""
    raw = record.stages[0].probs if record.stages else ()
    before = bytes.fromhex(record.pending_hex)
    out = []
    for i, c in enumerate(record.candidates):
        p = f" · {pct(raw[i])}" if i < len(raw) else ""
        mark = " ✓" if c.id == record.token_id else ""
        out.append((f"#{i + 1} {piece_label(show_token(c, before, lang=lang), 24)}{p}{mark}", c.id))
    return out


@dataclass(frozen=True)
class BranchPanel:
    """The panel's components, the lab's it sets, and what its handlers read besides (the service, the language)."""

    service: object
    lab: LabComponents
    language: gr.Radio | gr.State
    tree_state: gr.State  # the Tree (branches.py) of the run on screen
    candidate: gr.Dropdown
    force_button: gr.Button
    note: gr.Markdown
    tree_list: gr.Radio
    path: gr.Textbox
    link_button: gr.Button
    link: gr.Textbox

    @property
    def outputs(self) -> list:
        """What showing a branch sets: the lab's run and views, then the panel's own."""
        lab = self.lab
        return [lab.run_state, lab.chips, lab.status, lab.stage_plot, lab.draw_plot, lab.scrub, lab.run_plot,
                self.tree_state, self.tree_list, self.path, self.note, self.candidate]

    def wire_replay(self, event) -> None:
        """After `event` (the page's link applied): a link with `branch=` runs its branch in the panel."""
        event.then(bind(replay, self), [*self.lab.controls, self.language], self.outputs,
                   api_visibility="private", show_progress="hidden")


def build_branch_panel(service, lab: LabComponents, language) -> BranchPanel:
    """Build the panel under the lab (inside its tab) and wire it to the lab's components."""
    tree_state = gr.State(Tree())
    with gr.Accordion(T("branch.accordion"), open=True, elem_id="branch-panel"):
        gr.Markdown(T("branch.help"), elem_classes=["ntp-note"])
        with gr.Row():
            candidate = gr.Dropdown([], value=None, label=T("branch.candidate"), elem_id="branch-candidate", scale=3)
            force_btn = gr.Button(T("branch.force"), variant="primary", elem_id="branch-force", scale=1)
        note = gr.Markdown("", elem_id="branch-note")
        tree_list = gr.Radio([], value=None, label=T("branch.list"), elem_id="branch-list")
        with gr.Row():
            path = gr.Textbox("", label=T("branch.path"), interactive=False, elem_id="branch-path", scale=2)
            link_btn = gr.Button(T("branch.link"), size="sm", scale=0, elem_id="branch-link-button")
            link = gr.Textbox(show_label=False, buttons=["copy"], scale=4, elem_id="branch-link")
    panel = BranchPanel(service, lab, language, tree_state, candidate, force_btn, note, tree_list, path, link_btn, link)
    wire(panel)
    return panel


def wire(panel: BranchPanel) -> None:
    """The panel's events; each handler is bound to the panel (Gradio reads the rest of its signature)."""
    bound = lambda handler: bind(handler, panel)
    lab, language = panel.lab, panel.language
    # preprocess=False: the dropdown's choices are set on the server, and the force handler checks the token itself
    panel.force_button.click(bound(force), [lab.scrub, panel.candidate, lab.run_state, panel.tree_state, language],
                             panel.outputs, api_name="branch_force", show_progress="hidden", preprocess=False)
    panel.tree_list.input(bound(select), [panel.tree_list, panel.tree_state, language], panel.outputs,
                          api_name="branch_select", show_progress="hidden", preprocess=False)
    lab.scrub.change(bound(candidates_of), [lab.scrub, lab.run_state, language], panel.candidate,
                     api_visibility="private", show_progress="hidden")
    on_new_run = bound(reset)  # one handler for both buttons, as one function is one concurrency group
    for button in (lab.generate_button, lab.step_button):  # a new run: a new tree
        button.click(on_new_run, None, [panel.tree_state, panel.tree_list, panel.path, panel.note, panel.link],
                     api_visibility="private", queue=False)
    for event in lab.events.get("continued", ()):  # Continue from here, streamed or stopped: a branch of the tree
        event.then(bound(adopt), [lab.run_state, panel.tree_state, language],
                   [panel.tree_state, panel.tree_list, panel.path, panel.note], api_visibility="private",
                   show_progress="hidden")
    stopped = lab.events.get("stopped")
    if stopped is not None:  # a Stop that came as a branch's last update left: the tree keeps what the page showed
        stopped.then(bound(cut_short), [lab.run_state, panel.tree_state, language],
                     [panel.tree_state, panel.tree_list, panel.note], api_visibility="private", show_progress="hidden")
    panel.link_button.click(bound(make_link), [panel.tree_state, language], panel.link, api_name="branch_link",
                            show_progress="hidden")
    if isinstance(language, gr.Radio):
        language.change(bound(rerender), [language, panel.tree_state, lab.run_state],
                        [panel.tree_list, panel.note, panel.candidate], api_visibility="private", show_progress="hidden",
                        trigger_mode="multiple")


def model_name(panel: BranchPanel, lang):
    try:
        return panel.service.info.name
    except RuntimeError as e:
        raise user_error(e, lang) from None


def eos_ids(panel: BranchPanel):
    return set(panel.service.info.eos_token_ids)


def run_of(panel: BranchPanel, tree: Tree, records, lang, path=()):
    """The lab's Run of a branch's records: its request is the settings it draws with at its end."""
    return Run(switched(tree.request, last_switch(path)), list(records), lang=lang, model=model_name(panel, lang),
               branch_root=tree.request if path else None, branch_path=tuple(path))


def tree_choices(tree: Tree, lang: str) -> list[tuple[str, int]]:
    return [(branch_label(tree, k, lang), k) for k in range(len(tree.branches))]


def show(panel: BranchPanel, run: Run, tree: Tree, lang: str, index: int | None = None) -> dict:
    """The lab's views of a branch (at its last step), and the panel's list and path."""
    lab, n = panel.lab, len(run.records)
    i = n - 1 if index is None else index
    r = run.records[i]
    b = tree.branches[tree.current] if tree.branches else None
    return {
        lab.run_state: run, lab.chips: token_chips_html(run.records, lang=lang, tag=run.tag),
        lab.status: status_markdown(run, lang=lang),
        lab.stage_plot: charts.stage_figure(r, lang=lang), lab.draw_plot: charts.draw_figure(r, lang=lang),
        lab.scrub: scrub_update(run.records, i),
        lab.run_plot: charts.run_figure(run.records, lang=lang), panel.tree_state: tree,
        panel.tree_list: gr.Radio(choices=tree_choices(tree, lang), value=tree.current),
        panel.path: format_path(b.path) if b else "",
        panel.note: escape_html(branch_note(b, lang)) if b is not None else "",
        panel.candidate: gr.Dropdown(choices=candidate_choices(r, lang), value=None),
    }


def forced_step(current: Run, index, token, lang) -> tuple[int, int]:
    """(the step's index in the run, the token id) the learner asked to force; raises gr.Error naming the field."""
    if not current.records or current.request is None:
        raise user_error(tr(lang, "branch.error.no_run"))
    try:
        i = validation.number("scrub step", index, integer=True, low=1, high=len(current.records)) - 1
        if validation.is_blank(token):
            raise ValueError(tr(lang, "branch.error.no_candidate"))
        token = validation.number("branch token", token, integer=True, low=0)
        candidate_index(current.records[i], token)
    except ValueError as e:
        raise user_error(e, lang, field_labels(lang)) from None
    return i, token


def force(panel: BranchPanel, index, token, current: Run, tree: Tree, lang):
    i, token = forced_step(current, index, token, lang)
    tokens = [r.token_id for r in current.records]
    if tree.request is None or tree.branches[tree.current].tokens != tokens:  # a new run: a new tree
        seed = current.records[0].seed
        request = replace(current.request, settings=current.request.settings.with_seed(seed))
        tree = Tree(request, [Branch((), tuple(current.records))])
    parent = tree.branches[tree.current]
    new_path = child_path(parent.path, i, token)
    # the branch streams into the lab's views from the run on screen: the lab's Stop finds it there (stop_run)
    presses, current.streaming, current.tag, current.page_chips = current.stop_presses, "branch", new_tag(), None
    records = []
    try:
        stream = branch_records(panel.service, tree.request, new_path, parent.records, eos_ids(panel), parent.path)
        yield from stream_branch(panel, current, stream, i, records, presses, lang)
    except (ValueError, RuntimeError) as e:
        current.streaming = ""
        raise user_error(e, lang, field_labels(lang)) from None
    except BaseException:
        current.streaming = ""
        raise
    try:
        current.stop_looked = current.stop_presses
        stopped = current.stop_looked > presses
        yield shown_branch(panel, current, tree, new_path, records, lang, stopped)
        current.stop_looked = current.stop_presses  # its last look (Stop reads it once streaming is "")
        if not stopped and current.stop_looked > presses:  # Stop came while that update was on its way: the
            yield shown_branch(panel, current, tree, new_path, records, lang, True)  # branch as far as the page had it
    finally:
        current.streaming = ""  # (after the update has gone out: the lab's Stop waits for this)


def stream_branch(panel: BranchPanel, current: Run, stream, i: int, records: list, presses: int, lang):
    """The branch's chips as its records come (into `records`), from its forced step on, at most PAGE_AHEAD updates
    ahead of the page (run.Pace); after a press of Stop, not one more."""
    pace, lab = Pace(lambda: current.page_chips), panel.lab
    with closing(stream):  # its model rows leave the batch even when the branch stops early
        for record in stream:
            if current.stop_presses > presses:
                return
            records.append(record)
            if record.stop_reason is not None and pace.last(lambda: current.stop_presses > presses):
                return  # Stop, pressed while the page caught up with the branch
            if len(records) > i and (record.stop_reason is not None or not pace.behind()):
                pace.went(len(records))
                yield {lab.chips: token_chips_html(records, lang=lang, tag=current.tag)}


def shown_branch(panel: BranchPanel, current: Run, tree: Tree, path, records: list, lang, stopped: bool) -> dict:
    """The branch in the tree and the lab. Stopped (Stop pressed while it streamed): as far as the page showed
    it, or, if the page showed none of it, the run it was forced from, as it was."""
    seen = current.stop_seen if stopped else None
    keep = len(records) if seen is None else min(seen[1], len(records)) if seen[0] == current.tag else 0
    if keep == 0:
        current.successor = run_of(panel, tree, current.records, lang, tree.branches[tree.current].path)
        return show(panel, current.successor, tree, lang)
    try:
        tree.add(Branch(path, tuple(records[:keep]), parent_of(tree, path)))
    except ValueError as e:
        raise user_error(e, lang, field_labels(lang)) from None
    run = run_of(panel, tree, records[:keep], lang, path)
    # its chips keep the branch's tag: a Stop pressed as this update left still cuts the branch where the page was
    # (handlers.stop_run, then cut_short)
    run.stop_requested, run.tag, current.successor = stopped, current.tag, run
    return show(panel, run, tree, lang)


def select(panel: BranchPanel, k, tree: Tree, lang):
    if not tree.branches or k is None:
        return unchanged(panel.lab.chips)
    try:
        k = validation.number("branch", k, integer=True, low=0, high=len(tree.branches) - 1)
    except ValueError as e:
        raise user_error(e, lang) from None
    tree.current = k
    return show(panel, run_of(panel, tree, tree.branches[k].records, lang, tree.branches[k].path), tree, lang)


def candidates_of(panel: BranchPanel, index, current: Run, lang):
    i = scrub_index(index, current.records) if current is not None else None
    if i is None:
        return {panel.candidate: gr.Dropdown(choices=[], value=None)}
    r = current.records[i]
    return {panel.candidate: gr.Dropdown(choices=candidate_choices(r, lang), value=None)}


def reset(panel: BranchPanel):
    return {panel.tree_state: Tree(), panel.tree_list: gr.Radio(choices=[], value=None), panel.path: "",
            panel.note: "", panel.link: ""}


def replay(panel: BranchPanel, request: gr.Request, *values):  # Gradio gives the request only to a parameter before *values
    """A link with `branch=`: run its root, then the branch, with the lab's settings as the link set them
    (they need a seed). The page has already reported a malformed branch= (links.parse_query)."""
    *controls, lang = values  # the lab's controls in parse_request's order, then the page's language
    branch_text = dict(request.query_params).get("branch") if request else None
    if validation.is_blank(branch_text):
        return unchanged(panel.lab.chips)
    try:
        request = parse_request(*controls)
        path = parse_path(branch_text, check=link_value)
        root = list(branch_records(panel.service, request, (), (), eos_ids(panel)))
        tree = Tree(request, [Branch((), tuple(root))])
        records = list(branch_records(panel.service, request, path, root, eos_ids(panel)))
        tree.add(Branch(path, tuple(records), 0))
    except (ValueError, RuntimeError) as e:
        raise user_error(e, lang, field_labels(lang)) from None
    return show(panel, run_of(panel, tree, records, lang, path), tree, lang)


def adopt(panel: BranchPanel, current: Run, tree: Tree, lang):
    """After Continue from here (what_if.continue_run): the continued run joins the tree as a branch that switches
    settings at the step it continued from, under the run it continued (a new tree when that run was none of
    this one's). Continuing with the run's own settings adds nothing: it is the same run."""
    origin = current.continued_from if current is not None else None
    if origin is None or not current.records or current.mid_stream:
        return unchanged(panel.tree_state)
    parent_request, parent_records, i = origin
    tokens = [r.token_id for r in parent_records]
    if tree.request is None or tree.branches[tree.current].tokens != tokens:
        tree = Tree(parent_request, [Branch((), tuple(parent_records))])
    parent = tree.branches[tree.current]
    switch = switch_between(tree.request, current.request)
    if switch is None:
        return unchanged(panel.tree_state)
    path = switch_path(parent.path, i, switch)
    try:
        tree.add(Branch(path, tuple(current.records), parent_of(tree, path)))
    except ValueError as e:
        raise user_error(e, lang, field_labels(lang)) from None
    b = tree.branches[tree.current]
    current.branch_root, current.branch_path = tree.request, path  # what its run file says (export.run_json)
    return {panel.tree_state: tree, panel.tree_list: gr.Radio(choices=tree_choices(tree, lang), value=tree.current),
            panel.path: format_path(b.path), panel.note: escape_html(branch_note(b, lang))}


def cut_short(panel: BranchPanel, current: Run, tree: Tree, lang):
    """After Stop: a branch of the tree that the lab's Stop cut (pressed as the branch's last update left, the
    page showing fewer of its chips: handlers.stop_run) keeps the steps the page showed, as a branch stopped while
    it streamed does (shown_branch)."""
    b = tree.branches[tree.current] if tree.branches and current is not None else None
    if b is None or not current.stop_requested or current.branch_path != b.path or not current.records:
        return unchanged(panel.tree_state)
    kept = tuple(current.records)
    if len(kept) >= len(b.records) or [r.token_id for r in kept] != list(b.tokens[:len(kept)]):
        return unchanged(panel.tree_state)
    tree.add(replace(b, records=kept))
    b = tree.branches[tree.current]
    return {panel.tree_state: tree, panel.tree_list: gr.Radio(choices=tree_choices(tree, lang), value=tree.current),
            panel.note: escape_html(branch_note(b, lang))}


def make_link(panel: BranchPanel, tree: Tree, lang, request: gr.Request = None):
    if tree.request is None:
        return {panel.link: ""}
    q, b = tree.request, tree.branches[tree.current]
    values = {**controls_of(q), "seed": str(q.settings.seed)}
    page = (request.headers.get("referer") or "").split("?")[0] if request else ""
    query = lab_query(values, lang=lang)
    return {panel.link: f"{page}?{query}&{urlencode({'branch': format_path(b.path)})}" if b.path else f"{page}?{query}"}


def rerender(panel: BranchPanel, lang, tree: Tree, current: Run):
    """The page's language changed: the list, the note and the candidates at the step the lab shows
    (Run.shown_step: the scrubber's value this event carries may be older than the run)."""
    out = {panel.tree_list: gr.Radio(choices=tree_choices(tree, lang), value=tree.current if tree.branches else None)}
    b = tree.branches[tree.current] if tree.branches else None
    if b is not None and b.path:
        out[panel.note] = escape_html(branch_note(b, lang))
    if current is None or not current.records:
        return out | candidates_of(panel, None, current, lang)
    step = current.shown_step()
    return out | candidates_of(panel, len(current.records) if step is None else step + 1, current, lang)
