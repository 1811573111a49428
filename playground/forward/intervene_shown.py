"""What the Intervene section shows on one page, kept live: its results for the section's file and what each of its
prompt-made views was last asked for.

The section's handlers run side by side on one page: a scene sets the tab's prompt and presses Patch every cell, and
the trace of that prompt lands while the patch is computed, starting new_trace (its attribution, and blank views for
a new prompt). A State handed to a handler is its value when the handler started, so a handler that folded its result
into that value would undo what another handler kept meanwhile, and a trace could not know that a patch for its own
prompt was on its way: it blanked the grid the patch had just drawn. So the section's State holds one `Shown` per page
(gr.State copies its initial value for each page) that its handlers change in place as they end: `keep` folds a
result into the latest results (intervene_files.remember), and `ask` notes, as a knock-out's or a patch's request
starts, the (model, prompt, chat) it is for. A trace keeps a view that holds, or is about to hold, its own prompt's
result (`holds`).
"""

from __future__ import annotations

from .intervene_files import remember

ASKED = ("knockout", "patch")  # the views made on the tab's prompt that a new trace blanks


class Shown:
    """One page's Intervene results (`results`: intervene_files.remember's dict, None: none yet) and, per view in
    ASKED, the (model, prompt, chat) its latest request was for (None: it failed, or none was made)."""

    def __init__(self, results: dict | None = None):
        self.results = results
        self.asked: dict[str, tuple | None] = {}

    def keep(self, kind: str, inputs: dict, record) -> Shown:
        """`record` as the latest of `kind` (None: that view cleared), folded into the results as they are now."""
        self.results = remember(self.results, kind, inputs, record)
        return self

    def ask(self, kind: str, key: tuple | None) -> None:
        """A request for `kind`'s view starts for key = (model, prompt, chat); None: it failed."""
        if kind not in ASKED:
            raise ValueError(f"kind must be one of {', '.join(ASKED)}, got {kind!r}")
        self.asked[kind] = key

    def holds(self, kind: str, key: tuple) -> bool:
        """Whether `kind`'s view shows a result for key = (model, prompt, chat), or one asked for it is on its way."""
        r = self.results
        kept = bool(r) and r.get(kind) is not None and (r["model"], r["prompt"], r["chat"]) == key
        return kept or self.asked.get(kind) == key

    def loaded(self, results: dict) -> Shown:
        """A file's results in place of the page's (nothing asked since)."""
        self.results, self.asked = results, {}
        return self


__all__ = ["ASKED", "Shown"]
