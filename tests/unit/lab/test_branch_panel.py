"""The Branches panel's handlers without a model: a branch that a late Stop cut (pressed as its last update left,
handlers.stop_run) keeps, in the tree, the steps the page showed."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from playground.lab import handlers
from playground.lab.branch_panel import BranchPanel, cut_short, force
from playground.lab.branches import Branch, Tree
from playground.lab.request import parse_request
from playground.lab.run import Run
from playground.lab.view import View

from .test_charts import make_record
from .test_stop import CONTROLS, FakeStream, Part, chips_in, fake_lab, records, stop_in_thread


@pytest.fixture()
def lab():
    return fake_lab()


def panel():
    return SimpleNamespace(tree_state="tree_state", tree_list="tree_list", note="note")


def tree_with_branch(n: int) -> tuple[Tree, tuple]:
    root = tuple(make_record(step=i) for i in range(n))
    forced = tuple(make_record(step=i, chosen=1 if i == 2 else 0) for i in range(n))
    path = ((3, 101),)
    return Tree(object(), [Branch((), root), Branch(path, forced, 0)], current=1), path


def test_a_branch_cut_by_a_late_stop_keeps_what_the_page_showed_in_the_tree():
    tree, path = tree_with_branch(8)
    run = Run(object(), list(tree.branches[1].records[:5]), stop_requested=True, branch_path=path)
    out = cut_short(panel(), run, tree, "en")
    assert len(tree.branches) == 2 and tree.current == 1 and len(tree.branches[1].records) == 5
    assert out["tree_state"] is tree and "5 tokens" in dict((v, k) for k, v in out["tree_list"].choices)[1]
    assert len(tree.branches[0].records) == 8  # the run it was forced from keeps every step


def test_anything_else_leaves_the_tree_as_it_is():
    tree, path = tree_with_branch(8)
    unchanged = {"tree_state": gr.skip()}
    whole = Run(object(), list(tree.branches[1].records), stop_requested=True, branch_path=path)
    assert cut_short(panel(), whole, tree, "en") == unchanged  # the page had all of it
    not_stopped = Run(object(), list(tree.branches[1].records[:5]), branch_path=path)
    assert cut_short(panel(), not_stopped, tree, "en") == unchanged
    other = Run(object(), list(tree.branches[0].records[:5]), stop_requested=True, branch_path=((4, 100),))
    assert cut_short(panel(), other, tree, "en") == unchanged  # a run that is not the tree's current branch
    assert cut_short(panel(), whole, Tree(), "en") == unchanged  # no tree yet
    assert len(tree.branches[1].records) == 8


def branch_to_its_end(lab) -> tuple:
    """A branch forced at step 4 of an 8-step run, driven to its last update (the branch whole, in the tree):
    (the panel, the run it was forced from, that update, the generator)."""
    service = SimpleNamespace(info=SimpleNamespace(name="fake", eos_token_ids=(0,)))
    service.generate = lambda *a, **k: FakeStream([make_record(step=i) for i in range(3, 12)])
    branch = BranchPanel(service, lab, "en", *(Part(n) for n in ("tree_state", "candidate", "force", "note",
                                                                   "tree_list", "path", "link_button", "link")))
    current = Run(parse_request(*CONTROLS), records(8), lang="en")
    updates = force(branch, 3, 101, current, Tree(), "en")
    out = next(updates)
    while branch.tree_state not in out:  # the branch's chips as they come, then the branch in the tree
        out = next(updates)
    assert len(out[lab.run_state].records) == 12 and current.streaming == "branch"
    return branch, current, out, updates


def test_a_stop_that_comes_while_the_branchs_last_update_leaves_cuts_the_branch_where_the_page_was(lab):
    # the branch decided it was not stopped and sent itself whole; a Stop pressed on its first chips reached the
    # server then (clean run 56: the Stop held in the page while the branch ended), and the lab's Stop, seeing a
    # branch stream, leaves the views to it: the branch must send the cut itself, after that update
    branch, current, out, updates = branch_to_its_end(lab)
    current.stop_seen, current.stop_presses = (current.tag, 5), current.stop_presses + 1  # 5 chips on the page
    out = next(updates)
    assert len(out[lab.run_state].records) == 5 and out[lab.run_state].stop_requested
    assert chips_in(out[lab.chips]) == 5 and len(out[branch.tree_state].branches[1].records) == 5
    with pytest.raises(StopIteration):
        next(updates)
    assert current.streaming == ""


def test_a_stop_past_the_branchs_last_look_cuts_the_run_it_left_on_the_page(lab):
    # the press came after the branch's last look at the presses, before it said it had ended (a CI run's Stop
    # did nothing): the lab's Stop waits, sees the branch did not answer it, and cuts the run the branch left
    branch, current, out, updates = branch_to_its_end(lab)
    shown = out[lab.run_state]
    pressed = stop_in_thread(lab, current, f"{current.tag}:5")
    updates.close()  # the branch ends without one more look
    pressed["thread"].join(5)
    stopped = pressed["out"]
    assert stopped[lab.run_state] is shown and len(shown.records) == 5 and shown.stop_requested
    assert chips_in(stopped[lab.chips]) == 5 and "stopped by you at step 5" in stopped[lab.status]
    cut_short(branch, shown, out[branch.tree_state], "en")  # the tree keeps what the page showed (Stop's .then)
    assert len(out[branch.tree_state].branches[1].records) == 5


def test_a_stop_that_read_the_run_before_its_branch_ended_cuts_the_branch(lab):
    # the press read the run a branch was forced from (the session's then), and the branch ended before Stop ran:
    # the branch's run is on the page, and that one is cut, not the run under it
    branch, current, out, updates = branch_to_its_end(lab)
    with pytest.raises(StopIteration):
        next(updates)
    stopped = handlers.stop_run(lab, current, "en", View(), f"{current.tag}:6")
    assert stopped[lab.run_state] is out[lab.run_state] and len(out[lab.run_state].records) == 6
    assert chips_in(stopped[lab.chips]) == 6 and len(current.records) == 8 and not current.stop_requested
