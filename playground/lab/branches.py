"""Branch on any token: force one of a step's candidates and let the model continue from there.

A branch is a run's settings and seed plus a *forced path*: the steps where a token was forced, as
(1-based step, token id) pairs, written `5:1234,9:42` in a link. Because every step draws one u from the
row's seeded generator (forced or not, model_service/sampling/pipeline.py:draw), a branch continues with the same
u's as its parent: what changes after the forced step comes from the new context, not from new luck.

Only a step's top-N candidates (the bars of the stage chart) can be forced: their probability and rank
under the model are in the step's record, so "you forced a 0.3 % token" needs no extra forward pass.

A path may also switch settings: "Continue from here with these settings" (what_if.py) is the step
(1-based) from which on the run draws with other knobs, written `7@temperature=0.5;top_k=10` in a link: the
controls that differ from the root's, each value percent-quoted. It too keeps the u's of the root's seed.
Pure functions here (no gradio, no model): the panel that runs branches is playground/lab/branch_panel.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from urllib.parse import quote, unquote

from model_service.records import validation
from model_service.records.step import DrawInfo, StepRecord, r6
from playground import limits

from ..common.i18n import tr
from ..common.lab_link import LINK_FIELDS
from ..common.text import pct, show_token

MAX_FORCED = limits.MAX_FORCED_STEPS
MAX_BRANCHES = limits.MAX_BRANCHES


# what a switch may change: the lab's controls but the run's prompt, its chat template and its seed (the u's stay)
SWITCHABLE = tuple(name for name in LINK_FIELDS if name not in ("prompt", "chat", "seed", "branch"))


@dataclass(frozen=True)
class Switch:
    """From this step on, these controls (name, value as a link writes it), over the root run's."""

    controls: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        return ";".join(f"{name}={quote(value, safe='')}" for name, value in self.controls)

    def label(self) -> str:
        """"temperature 0.5 · top_k 10": what the branch list and the note show (not escaped)."""
        return " · ".join(f"{name} {value}" for name, value in self.controls)


def parse_switch(text: str, check: Callable[[str, str], str] | None = None) -> Switch:
    """`"temperature=0.5;top_k=10"` -> Switch; `check(name, value)` reads a value as a link's (deep_link.FIELDS)."""
    controls = []
    for part in text.split(";"):
        name, sep, value = part.partition("=")
        if not sep or name not in SWITCHABLE:
            raise ValueError(f"branch settings must be name=value pairs of {', '.join(SWITCHABLE)}, got {part[:40]!r}")
        value = unquote(value)
        try:
            controls.append((name, str(check(name, value)) if check else value))
        except ValueError as e:
            raise ValueError(f"branch settings: {e}") from None
    if not controls or len({n for n, _ in controls}) < len(controls):
        raise ValueError("branch settings must name each control once")
    return Switch(tuple(controls))


def parse_path(text, max_step: int = limits.MAX_NEW_TOKENS, check: Callable[[str, str], str] | None = None) -> tuple:
    """`"5:1234,9:42"` -> ((5, 1234), (9, 42)): steps 1-based and increasing; `7@temperature=0.5` -> (7, Switch),
    which may share its step with the forced token after it. Blank -> (). A ValueError names the field `branch`
    and says what is wrong; `check` reads a switch's values (parse_switch)."""
    if validation.is_blank(text):
        return ()
    if not isinstance(text, str):
        raise ValueError(f"branch must be text like 5:1234,9:42, got {type(text).__name__}")
    pairs = []
    for part in text.split(","):
        step, sep, rest = part.strip().partition(":")
        if not sep and "@" in part:
            step, _, settings = part.strip().partition("@")
            pairs.append((validation.number("branch step", step, integer=True, low=1, high=max_step),
                          parse_switch(settings, check)))
            continue
        if not sep:
            raise ValueError(f"branch must be step:token pairs like 5:1234,9:42, got {part.strip()[:40]!r}")
        pairs.append((validation.number("branch step", step, integer=True, low=1, high=max_step),
                      validation.number("branch token", rest, integer=True, low=0)))
    if len(pairs) > MAX_FORCED:
        raise ValueError(f"branch may force at most {MAX_FORCED} steps, got {len(pairs)}")
    if any(b[0] < a[0] or (b[0] == a[0] and not (is_switch(a) and not is_switch(b))) for a, b in zip(pairs, pairs[1:])):
        raise ValueError("branch steps must increase from left to right, each step once (a switch may come "
                         "before the token forced at its step)")
    return tuple(pairs)


def is_switch(element) -> bool:
    return isinstance(element[1], Switch)


def format_path(path) -> str:
    return ",".join(f"{step}@{what.text}" if isinstance(what, Switch) else f"{step}:{what}" for step, what in path)


def last_switch(path) -> Switch | None:
    """The settings the branch draws with at its end (None: the root's)."""
    return next((what for _, what in reversed(path) if isinstance(what, Switch)), None)


def valid_known(known_path, path) -> int:
    """How many steps of a branch with `known_path` a branch with `path` shares (their records are the same):
    up to the first element where the paths part. A token forced only on `path` keeps its step (the forced record
    is made from the drawn one); a switch on either, or a token forced only on the known one, does not."""
    for a, b in zip(known_path, path):
        if a != b:
            return min(a[0] - 1, b[0] - (1 if is_switch(b) else 0))
    if len(known_path) > len(path):
        return known_path[len(path)][0] - 1
    if len(path) > len(known_path):
        b = path[len(known_path)]
        return b[0] - (1 if is_switch(b) else 0)
    return limits.MAX_NEW_TOKENS


def candidate_index(record: StepRecord, token_id: int) -> int:
    """Where token_id stands among the step's candidates (its 0-based rank under the raw logits)."""
    for i, c in enumerate(record.candidates):
        if c.id == token_id:
            return i
    raise ValueError(f"branch token {token_id} is not among step {record.step + 1}'s top {len(record.candidates)} "
                     "candidates: only those can be forced")


def forced_record(record: StepRecord, token_id: int, text_before: str = "") -> StepRecord:
    """The step's record as if token_id had been drawn: the same distributions (the context is the same),
    the forced token's piece, rank and per-stage probabilities, and the u the step drew, kept to show it
    was not used. Its text is the text before it (`text_before`: the previous record's; the next record's
    text has the forced token in it)."""
    i = candidate_index(record, token_id)
    token = record.candidates[i]
    stages = tuple(replace(s, chosen_prob=s.probs[i] if i < len(s.probs) else 0.0) for s in record.stages)
    final = stages[-1].probs if stages else ()
    low = r6(sum(final[:i])) if final else 0.0
    high = r6(low + final[i]) if final and i < len(final) else low
    return replace(record, token_id=token.id, piece=token.piece, special=token.special, bytes_hex=token.bytes_hex,
                   chosen_rank=i, stages=stages, stop_reason=None, draw=DrawInfo(record.draw.u, i, low, high),
                   text=text_before)


def forced_raw_prob(record: StepRecord) -> float | None:
    """The forced (or chosen) token's probability under the model itself: the raw stage."""
    return record.stages[0].chosen_prob if record.stages else None


@dataclass(frozen=True)
class Branch:
    """One run of the tree: the path forced from the root's settings, its records, and its parent."""

    path: tuple  # (step, token id) forced, (step, Switch) settings switched
    records: tuple[StepRecord, ...]
    parent: int | None = None  # index in the tree; None for the root (the run Generate drew)

    @property
    def tokens(self) -> list[int]:
        return [r.token_id for r in self.records]


@dataclass
class Tree:
    """The branches of one run, root first. `request`: the root's RunRequest with its seed filled in."""

    request: object = None
    branches: list[Branch] = field(default_factory=list)
    current: int = 0

    def add(self, branch: Branch) -> int:
        """Add a branch (or find the same path) and make it current; returns its index."""
        for i, b in enumerate(self.branches):
            if b.path == branch.path:
                self.branches[i] = branch
                self.current = i
                return i
        if len(self.branches) >= MAX_BRANCHES:
            raise ValueError(f"a run keeps at most {MAX_BRANCHES} branches: generate again for a new tree")
        self.branches.append(branch)
        self.current = len(self.branches) - 1
        return self.current


def child_path(path, step_index: int, token_id: int) -> tuple:
    """The path of forcing token_id at 0-based step_index of a branch with `path`: what comes before it kept (a
    switch at that very step too: the step's distribution is the switched one's)."""
    kept = tuple(e for e in path if e[0] - 1 < step_index or (e[0] - 1 == step_index and is_switch(e)))
    return kept + ((step_index + 1, int(token_id)),)


def switch_path(path, step_index: int, switch: Switch) -> tuple:
    """The path of drawing with `switch` from 0-based step_index on, in a branch with `path`: what comes before it
    kept."""
    return tuple(e for e in path if e[0] - 1 < step_index) + ((step_index + 1, switch),)


def parent_of(tree: Tree, path) -> int | None:
    """The branch whose path is the longest proper prefix of `path` (the root's is empty)."""
    best, length = None, -1
    for i, b in enumerate(tree.branches):
        n = len(b.path)
        if n < len(path) and tuple(path[:n]) == b.path and n > length:
            best, length = i, n
    return best


def branch_label(tree: Tree, index: int, lang: str = "en") -> str:
    """How the branch list names a branch: the root, or its last forced step, token, rank and probability."""
    b = tree.branches[index]
    if not b.path:
        return tr(lang, "branch.label.root", tokens=len(b.records))
    step, what = b.path[-1]
    if isinstance(what, Switch):
        return tr(lang, "branch.label.switched", n=index, step=step, settings=what.label(), tokens=len(b.records))
    record = b.records[step - 1]
    p = forced_raw_prob(record)
    return tr(lang, "branch.label.forced", n=index, step=step, piece=show_token(record, lang=lang).text,
              rank=record.chosen_rank + 1, p=pct(p) if p is not None else "?", tokens=len(b.records))


def forced_note(record: StepRecord, lang: str = "en") -> str:
    """"You forced ' London' at step 3: rank 4, 0.3 % under the model." (not escaped: the caller escapes)."""
    p = forced_raw_prob(record)
    return tr(lang, "branch.forced", piece=show_token(record, lang=lang).text, step=record.step + 1,
              rank=record.chosen_rank + 1, p=pct(p) if p is not None else "?")


def branch_note(branch: Branch, lang: str = "en") -> str:
    """What the panel says of the branch on screen: its forced token, or the settings it switched to (not
    escaped: the caller escapes)."""
    if not branch.path:
        return ""
    step, what = branch.path[-1]
    if isinstance(what, Switch):
        return tr(lang, "branch.switched", step=step, settings=what.label())
    return forced_note(branch.records[step - 1], lang)
