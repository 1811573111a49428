"""The lab's Branches panel: pick a candidate of the step on screen, force it, and the model continues
from there with the run's settings and seed. The panel keeps the tree of branches (the run Generate drew,
then each forced one); picking a branch puts it in the lab, where the scrubber, Step and the charts work
as on any run, and each branch has its own link (settings + seed + `branch=step:token,...`).

Layout and wiring only: paths and forced records in `branches`, the model work in `branch_run`.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import gradio as gr

from model_service.records import validation
from model_service.records.step import StepRecord

from ..common.errors import unchanged, user_error
from ..common.i18n import T, tr
from ..common.text import escape_html, pct, piece_label, show_token
from . import charts
from .branch_run import branch_records
from .branches import (
    Branch,
    Tree,
    branch_label,
    candidate_index,
    child_path,
    forced_note,
    format_path,
    parent_of,
    parse_path,
)
from .chips import token_chips_html
from .deep_link import make_query
from .request import field_labels, parse_request
from .scrubber import scrub_index, scrub_update
from .tab import Run, status_markdown


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


def build_branch_panel(service, lab: dict, language) -> dict:
    """Build the panel under the lab (inside its tab) and wire it to the lab's components."""
    run_state, chips, scrub, status, stage_plot, draw_plot, run_plot = lab["watch"][0]
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
    lab_views = [run_state, chips, status, stage_plot, draw_plot, scrub, run_plot]
    outputs = [*lab_views, tree_state, tree_list, path, note, candidate]

    def model_name(lang):
        try:
            return service.info.name
        except RuntimeError as e:
            raise user_error(e, lang) from None

    def show(run: Run, tree: Tree, lang: str, index: int | None = None) -> dict:
        """The lab's views of a branch (at its last step), and the panel's list and path."""
        n = len(run.records)
        i = n - 1 if index is None else index
        r = run.records[i]
        b = tree.branches[tree.current] if tree.branches else None
        forced = b.records[b.path[-1][0] - 1] if b and b.path else None
        return {
            run_state: run, chips: token_chips_html(run.records, lang=lang), status: status_markdown(run, lang=lang),
            stage_plot: charts.stage_figure(r, lang=lang), draw_plot: charts.draw_figure(r, lang=lang),
            scrub: scrub_update(run.records, i),
            run_plot: charts.run_figure(run.records, lang=lang), tree_state: tree,
            tree_list: gr.Radio(choices=[(branch_label(tree, k, lang), k) for k in range(len(tree.branches))],
                                value=tree.current),
            path: format_path(b.path) if b else "",
            note: escape_html(forced_note(forced, lang)) if forced is not None else "",
            candidate: gr.Dropdown(choices=candidate_choices(r, lang), value=None),
        }

    def eos_ids():
        return set(service.info.eos_token_ids)

    def run_of(tree: Tree, records, lang):
        return Run(tree.request, list(records), lang=lang, model=model_name(lang))

    def force(index, token, current: Run, tree: Tree, lang):
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
        tokens = [r.token_id for r in current.records]
        if tree.request is None or tree.branches[tree.current].tokens != tokens:  # a new run: a new tree
            seed = current.records[0].seed
            request = replace(current.request, settings=replace(current.request.settings, seed=seed))
            tree = Tree(request, [Branch((), tuple(current.records))])
        parent = tree.branches[tree.current]
        new_path = child_path(parent.path, i, token)
        records = []
        try:
            for record in branch_records(service, tree.request, new_path, parent.records, eos_ids()):
                records.append(record)
                if len(records) > i:
                    yield {chips: token_chips_html(records, lang=lang)}
            tree.add(Branch(new_path, tuple(records), parent_of(tree, new_path)))
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang, field_labels(lang)) from None
        yield show(run_of(tree, records, lang), tree, lang)

    def select(k, tree: Tree, lang):
        if not tree.branches or k is None:
            return unchanged(chips)
        try:
            k = validation.number("branch", k, integer=True, low=0, high=len(tree.branches) - 1)
        except ValueError as e:
            raise user_error(e, lang) from None
        tree.current = k
        return show(run_of(tree, tree.branches[k].records, lang), tree, lang)

    def candidates_of(index, current: Run, lang):
        i = scrub_index(index, current.records) if current is not None else None
        if i is None:
            return {candidate: gr.Dropdown(choices=[], value=None)}
        r = current.records[i]
        return {candidate: gr.Dropdown(choices=candidate_choices(r, lang), value=None)}

    def reset():
        return {tree_state: Tree(), tree_list: gr.Radio(choices=[], value=None), path: "", note: "", link: ""}

    def replay(request: gr.Request, *values):  # Gradio gives the request only to a parameter before *values
        """A link with `branch=`: run its root, then the branch, with the lab's settings as the link set them
        (they need a seed). The page has already reported a malformed branch= (links.parse_query)."""
        *values, lang = values
        branch_text = dict(request.query_params).get("branch") if request else None
        if validation.is_blank(branch_text):
            return unchanged(chips)
        try:
            request = parse_request(*values)
            forced = parse_path(branch_text, request.max_new_tokens)
            root = list(branch_records(service, request, (), (), eos_ids()))
            tree = Tree(request, [Branch((), tuple(root))])
            records = list(branch_records(service, request, forced, root, eos_ids()))
            tree.add(Branch(forced, tuple(records), 0))
        except (ValueError, RuntimeError) as e:
            raise user_error(e, lang, field_labels(lang)) from None
        return show(run_of(tree, records, lang), tree, lang)

    def make_link(tree: Tree, lang, request: gr.Request = None):
        if tree.request is None:
            return {link: ""}
        q, b = tree.request, tree.branches[tree.current]
        s = q.settings
        values = dict(prompt=q.prompt, chat=q.chat, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                      min_p=s.min_p, seed=str(s.seed), max_new_tokens=q.max_new_tokens,
                      stop=validation.format_stop_text(q.stop), order=s.order)
        page = (request.headers.get("referer") or "").split("?")[0] if request else ""
        query = make_query(values, lang=lang)
        return {link: f"{page}?{query}&{urlencode({'branch': format_path(b.path)})}" if b.path else f"{page}?{query}"}

    # preprocess=False: the dropdown's choices are set on the server, and the force handler checks the token itself
    force_btn.click(force, [scrub, candidate, run_state, tree_state, language], outputs, api_name="branch_force",
                    show_progress="hidden", preprocess=False)
    tree_list.input(select, [tree_list, tree_state, language], outputs, api_name="branch_select", show_progress="hidden",
                    preprocess=False)
    scrub.change(candidates_of, [scrub, run_state, language], candidate, api_visibility="private",
                 show_progress="hidden")
    for button in (lab["generate"], lab["step"]):
        button.click(reset, None, [tree_state, tree_list, path, note, link], api_visibility="private", queue=False)
    link_btn.click(make_link, [tree_state, language], link, api_name="branch_link", show_progress="hidden")

    def rerender(lang, tree: Tree, index, current: Run):
        out = {tree_list: gr.Radio(choices=[(branch_label(tree, k, lang), k) for k in range(len(tree.branches))],
                                   value=tree.current if tree.branches else None)}
        b = tree.branches[tree.current] if tree.branches else None
        if b is not None and b.path:
            out[note] = escape_html(forced_note(b.records[b.path[-1][0] - 1], lang))
        return out | candidates_of(index, current, lang)

    if isinstance(language, gr.Radio):
        language.change(rerender, [language, tree_state, scrub, run_state], [tree_list, note, candidate],
                        api_visibility="private", show_progress="hidden")
    controls = [lab[k] for k in ("prompt", "chat", "temperature", "top_k", "top_p", "min_p", "seed", "max_new_tokens",
                                 "stop", "order")]
    return {"branch": path, "tree": tree_state, "candidate": candidate, "force": force_btn, "list": tree_list,
            "link": link, "wire_replay": lambda event: event.then(replay, [*controls, language], outputs,
                                                                  api_visibility="private", show_progress="hidden")}
