"""A step of a run redrawn with other settings, from the logits it was drawn from: the live lab's what-if.

The record is the one a run with the new settings would give at that step after the same tokens:

    the run's tokens before the step ──► RowState (what the penalties, DRY, the bans and the stop strings read)
    the step's own logits (kept)     ──► choose: the pipeline in the new settings' order
    the step's own u (the seed's)    ──►         the draw on the new cumulative bar
                                     ──► summarise_chosen, record: the same summary as a run's step

No forward pass when the run's logits were kept (engine/kept.py); one, as a row of the room, when they were not.
Mirostat's mu starts from the settings' (a continued run's: the mu the run reached, records/settings.py:with_mu).
"""

from __future__ import annotations

import torch

from ..records.step import StepRecord
from .step import RowState, choose, summarise_chosen


@torch.inference_mode()
def redraw(loaded, checked, seed: int, logits: torch.Tensor, u: float, forward_ms: float = 0.0) -> StepRecord:
    """The record of the step after checked.prefix (a service.CheckedGenerate), drawn at `u` from `logits` ((V,)
    or (1, V)) with checked.settings, for a run seeded `seed`."""
    row = RowState(loaded, checked.settings, checked.max_new_tokens, checked.stop, checked.prefix, seed=seed,
                   device="cpu")
    row.prompt = tuple(checked.ids)  # what a Job sets for a run: its penalties count the prompt too
    chosen = choose(logits.reshape(1, -1), [row], checked.top_n, us=[u])
    summaries, summary_ms = summarise_chosen(chosen)
    return row.record(len(checked.prefix), chosen.tokens[0], chosen.draws[0], summaries[0], forward_ms,
                      chosen.ms + summary_ms)


__all__ = ["redraw"]
