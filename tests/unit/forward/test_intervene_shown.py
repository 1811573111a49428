"""One page's Intervene results, kept live (playground/forward/intervene_shown.py): a trace that lands while a patch or a
knock-out for its own prompt is being computed leaves that view be, and its attribution is kept beside the patch that
landed meanwhile (a scene sets the prompt and presses the button at once: the trace used to blank the grid the patch
had just drawn, and to drop it from the section's file)."""

from __future__ import annotations

from copy import deepcopy
from types import SimpleNamespace

import gradio as gr
import pytest

from playground.common.i18n import tr
from playground.forward import intervene
from playground.forward.intervene_shown import Shown
from tests.unit.forward.test_intervene_files import PROMPT, SOURCE, attribution, knockout, patch

MODEL = "SmolLM2-135M-Instruct"
KEY = (MODEL, PROMPT, False)


def test_a_view_is_held_for_its_prompt_once_asked_until_its_request_fails():
    shown = Shown()
    assert not shown.holds("patch", KEY)
    shown.ask("patch", KEY)
    assert shown.holds("patch", KEY) and not shown.holds("patch", (MODEL, "Hello", False))
    assert not shown.holds("knockout", KEY)
    shown.ask("patch", None)  # the request failed
    assert not shown.holds("patch", KEY)
    shown.keep("knockout", {"prompt": PROMPT, "chat": False, "model": MODEL}, knockout())
    assert shown.holds("knockout", KEY) and not shown.holds("knockout", (MODEL, PROMPT, True))
    with pytest.raises(ValueError, match="kind must be one of knockout, patch"):
        shown.ask("steer", KEY)
    initial = Shown()
    page = deepcopy(initial)  # gr.State's copy of its initial value for a new page: its own
    page.ask("patch", KEY)
    assert not initial.asked and initial.results is None


@pytest.fixture(scope="module")
def iv():
    with gr.Blocks():
        return intervene.build(2)


class Service:
    """A service whose attribution takes the time a patch needs to land: `meanwhile` runs inside it."""

    def __init__(self, meanwhile=lambda: None):
        self.meanwhile = meanwhile

    def attribute(self, prompt, chat):
        self.meanwhile()
        return attribution()


def trace(prompt=PROMPT):
    return SimpleNamespace(prompt=prompt, chat=False, model=MODEL, num_layers=2, tokens=patch().tokens,
                           predictions=[SimpleNamespace(top=())])


def test_a_trace_landing_while_its_prompts_patch_runs_leaves_the_grid_and_keeps_both(iv):
    shown = Shown()
    shown.ask("patch", KEY)  # Patch every cell pressed: its request has started (intervene_patch.patch_every_cell)
    landed = lambda: shown.keep("patch", {"prompt": PROMPT, "chat": False, "source": SOURCE, "model": MODEL}, patch())
    out = intervene.new_trace(iv, Service(landed), trace(), None, 2, 2, shown)
    assert iv.patch_md not in out and iv.patch_plot not in out and iv.patch_state not in out  # the patch's own
    assert iv.knockout_md in out  # nothing asked for the knock-out: blank
    kept = out[iv.results].results
    assert kept["patch"]["result"] == patch() and kept["attribution"] == attribution()
    # the patch still computing when the trace's attribution is done: it lands after, on a grid left for it
    shown = Shown()
    shown.ask("patch", KEY)
    out = intervene.new_trace(iv, Service(), trace(), None, 2, 2, shown)
    assert iv.patch_md not in out and out[iv.results].results["attribution"] == attribution()


def test_a_trace_of_another_prompt_blanks_the_grid_and_lets_its_result_go(iv):
    shown = Shown()
    shown.ask("patch", (MODEL, "Hello", False))
    shown.keep("patch", {"prompt": "Hello", "chat": False, "source": SOURCE, "model": MODEL}, patch())
    out = intervene.new_trace(iv, Service(), trace(), None, 2, 2, shown)
    assert out[iv.patch_md] == tr("en", "intervene.patch.click") and out[iv.patch_state] is None
    assert out[iv.results].results["patch"] is None and out[iv.results].results["prompt"] == PROMPT


class Refusing:
    info = SimpleNamespace(name=MODEL)

    def knock_out(self, *args):
        raise ValueError("block must be a whole number between 1 and 2")


def test_a_failed_knock_out_is_not_waited_for(iv):
    shown = Shown()
    controls = (PROMPT, False, 1.0, 0, 1.0, 0.0, 7, 8, "", "hf")  # the lab's: prompt … sampler order
    with pytest.raises(gr.Error, match="block must be"):
        intervene.knock_out(iv, Refusing(), PROMPT, False, "mlp", 9, 1, "zero", None, None, shown, "en", *controls)
    assert "knockout" in shown.asked and shown.asked["knockout"] is None  # asked, then let go
    assert iv.knockout_md in intervene.new_trace(iv, Service(), trace(), None, 2, 2, shown)
