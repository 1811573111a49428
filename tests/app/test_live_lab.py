"""The live lab through gradio_client (a script's session, as a learner's page): a run, then /what_if redraws its
last step from the logits the service kept for this session (no forward pass), Continue from here goes on from it,
and bad knob values are named."""

from __future__ import annotations

import json
import math

import pytest
from gradio_client.exceptions import AppError

from .lab_args import KNOBS_OFF_BY_NAME, untagged

LESSON = "The capital of France is"
ARGS = dict(chat=False, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed="5", max_new=6, stop="", order="hf",
            **KNOBS_OFF_BY_NAME)


def args(**changed):
    return (LESSON, *{**ARGS, **changed}.values())


def test_a_what_if_redraws_the_runs_last_step_from_its_kept_logits(client):
    chips, status, *_ = client.predict(*args(), api_name="/generate")
    assert "stopped" in status
    status, figures = client.predict(*args(temperature=0.5), api_name="/what_if")
    assert status.startswith("**What if** T 0.5 · this run drew with T 1 · step 6"), status
    assert "recomputed" not in status  # this session's run was kept: no forward pass
    figures = json.loads(figures)  # what the page draws itself (what_if.DRAW_JS): both figures as Plotly JSON
    stage = figures["stage"]
    titles = [a["text"] for a in stage["layout"]["annotations"] if a.get("text", "").startswith("after temperature")]
    assert titles and stage["data"] and figures["draw"]["data"]
    status, *_ = client.predict(*args(), api_name="/what_if")  # back at the run's own settings: its own step
    assert status.startswith("**Step 6** of 6"), status


@pytest.mark.parametrize("k", [1, 4, 8])
def test_continue_from_here_with_the_runs_own_settings_draws_the_run_again(client, k):
    """Continue from step k keeps steps 1..k-1 and draws on with the run's seed stream: with the run's own settings
    (sampled, T 1.5: most steps have many candidates) every token after k is the run's own."""
    chips, status, *_ = client.predict(*args(temperature=1.5, max_new=8), api_name="/generate")
    assert "stopped" in status
    client.predict(k, api_name="/scrub")  # the step on screen
    again, status, *_ = client.predict(*args(temperature=1.5, max_new=8), api_name="/continue_run")
    assert "stopped" in status
    assert untagged(again) == untagged(chips)
    other, *_ = client.predict(*args(temperature=1.5, max_new=8, seed="6"), api_name="/generate")
    assert untagged(other) != untagged(chips)  # (another seed draws another run: the check can fail)


def test_a_bad_knob_value_is_named(client):
    with pytest.raises(AppError, match="top-p"):
        client.predict(*args(top_p=7), api_name="/what_if")


def test_the_custom_order_chosen_before_its_chain_is_written_waits_for_it(client):
    """Choosing "Custom" fires a what-if while the chain box is still empty: no error toast for a chain the learner
    is about to write (it once said "a custom chain needs at least one stage" at the click). Generate names it."""
    client.predict(*args(), api_name="/generate")
    status, _ = client.predict(*args(order="custom"), api_name="/what_if")
    assert status in ("", {"__type__": "update"}) or "Step 6" in str(status)
    with pytest.raises(AppError, match="custom chain"):
        client.predict(*args(order="custom"), api_name="/generate")
    status, _ = client.predict(*args(order="custom", chain="top_k > temperature", top_k=5), api_name="/what_if")
    assert "top-k 5" in status and "order custom" in status, status  # a chain written: the what-if of it


def stage_top(figure: dict, stage: str) -> float:
    """The top bar of a stage's panel in a stage figure's JSON (the panels' titles are its annotations, in order)."""
    titles = [a.get("text", "") for a in figure["layout"]["annotations"]]
    panel = next(i for i, text in enumerate(titles) if text.startswith(f"after {stage}"))
    axis = "x" if panel == 0 else f"x{panel + 1}"
    return max(max(t["x"]) for t in figure["data"] if t.get("type") == "bar" and t.get("xaxis", "x") == axis)


def test_sweep_t_plays_the_step_on_screen_at_every_temperature(client):
    assert client.predict(*args(), api_name="/sweep_t") in ("", {"__type__": "update"})  # no run yet: nothing
    client.predict(*args(), api_name="/generate")
    sweep = json.loads(client.predict(*args(top_k=40), api_name="/sweep_t"))
    assert sweep["step"] == 6 and [f["t"] for f in sweep["frames"]] == [round(0.1 * k, 1) for k in range(1, 21)]
    tops = [stage_top(f, "temperature") for f in sweep["frames"]]
    assert all(a >= b - 1e-6 for a, b in zip(tops, tops[1:])) and tops[0] > tops[-1]  # sharpens, then flattens
    assert sweep["frames"][4]["label"] == "T = 0.5"
    assert "top-k" in " ".join(a.get("text", "") for a in sweep["frames"][0]["layout"]["annotations"])  # knobs as set
    status, figures = client.predict(*args(temperature=0.5, top_k=40), api_name="/what_if")
    assert math.isclose(stage_top(json.loads(figures)["stage"], "temperature"), tops[4], rel_tol=1e-6)  # exact
