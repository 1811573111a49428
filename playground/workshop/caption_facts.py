"""A caption's numbers about the model, read from the scene's own run, so the caption holds for whichever model
serves the room (no gradio here).

A scene's caption names a fact as {name}; its `facts` say what each one reads, at a step of the run (1-based), e.g.

    "facts": {"top": {"show": "token_p", "step": 1, "at": "raw"},
              "after": {"show": "p", "step": 1, "at": "penalties", "rank_at": "raw"},
              "picked": {"show": "token", "pick": "chosen"}}

    show     token (the token, as the charts write it), p (its probability at `at`), token_p (both), removed (the
             tokens stage `at` removed, each with its probability before it), kept / mass (stage `at`'s title
             figures), shift (how far the bias, penalties and DRY moved the token's logit), text (the run's text),
             mu_low / mu_high (the lowest and highest mirostat mu from `step` on, in bits)
    pick     top (the most probable token at `rank_at`, default `at`) or chosen (the token the step drew)
    at       a stage of the run ("raw", "penalties", "dry", "xtc", "no_repeat_ngram", ...)

A fact the run cannot give (its stage is not in the run, its token is not among the step's candidates) reads as
such, never as a number from another model. The values are escaped for the caption's Markdown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..common.i18n import tr
from ..common.text import escape_html, pct, shorten, show_token

PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]{0,31})\}")
SHOWS = ("token", "p", "token_p", "removed", "kept", "mass", "shift", "text", "mu_low", "mu_high")
PICKS = ("top", "chosen")
KEYS = {"show", "step", "pick", "at", "rank_at"}
TEXT_CHARS = 80  # a run's text in a caption, at most


@dataclass(frozen=True)
class Fact:
    show: str
    step: int = 1
    pick: str = "top"
    at: str = "raw"
    rank_at: str | None = None

    def to_dict(self) -> dict:
        return {"show": self.show, "step": self.step, "pick": self.pick, "at": self.at, "rank_at": self.rank_at}


def parse_facts(raw, captions: Mapping[str, str], where: str) -> dict[str, Fact]:
    """A scene's `facts`, checked against its captions (every {name} in every language declared, every fact
    used); raises ValueError naming the field."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: field 'facts' must be an object of name -> fact")
    facts = {}
    for name, spec in raw.items():
        at = f"{where}: fact {name!r}"
        if not isinstance(name, str) or not PLACEHOLDER.fullmatch("{" + name + "}"):
            raise ValueError(f"{at}: a fact's name is lowercase letters, digits and '_' (at most 32)")
        if not isinstance(spec, dict) or spec.get("show") not in SHOWS:
            raise ValueError(f"{at}: field 'show' must be one of {', '.join(SHOWS)}, got "
                             f"{json.dumps(spec.get('show') if isinstance(spec, dict) else spec)}")
        unknown = sorted(set(spec) - KEYS)
        if unknown:
            raise ValueError(f"{at}: unknown field {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
        step = spec.get("step", 1)
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise ValueError(f"{at}: field 'step' must be a whole number of at least 1, got {json.dumps(step)}")
        if spec.get("pick", "top") not in PICKS:
            raise ValueError(f"{at}: field 'pick' must be one of {', '.join(PICKS)}, got {json.dumps(spec['pick'])}")
        for key in ("at", "rank_at"):
            if key in spec and not (isinstance(spec[key], str) and re.fullmatch(r"[a-z_]{1,32}", spec[key])):
                raise ValueError(f"{at}: field {key!r} must be a stage's name, got {json.dumps(spec[key])}")
        facts[name] = Fact(spec["show"], step, spec.get("pick", "top"), spec.get("at", "raw"), spec.get("rank_at"))
    for code, text in captions.items():
        for name in PLACEHOLDER.findall(text):
            if name not in facts:
                raise ValueError(f"{where}: the {code} caption names {{{name}}}, which field 'facts' does not declare")
    for name in facts:
        if not all(f"{{{name}}}" in text for text in captions.values()):
            raise ValueError(f"{where}: fact {name!r} must appear in the caption of every language")
    return facts


def fill(text: str, facts: Mapping[str, Fact], records: Sequence | None, lang: str = "en") -> str:
    """The caption (already escaped) with each {name} of `facts` read from `records` (None: no run yet: each reads
    as "see the run")."""
    if not facts:
        return text

    def value(match: re.Match) -> str:
        fact = facts.get(match[1])
        if fact is None:  # not a fact: the host's own braces, as written
            return match[0]
        if not records:
            return tr(lang, "scenes.fact.pending")
        shown = read(fact, records, lang)
        return tr(lang, "scenes.fact.missing") if shown is None else shown

    return PLACEHOLDER.sub(value, text)


def read(fact: Fact, records: Sequence, lang: str = "en") -> str | None:
    """What `fact` says of the run, as the caption writes it (escaped); None if the run cannot say."""
    if fact.show == "text":
        return quoted(shorten(records[-1].text, TEXT_CHARS))
    if fact.show in ("mu_low", "mu_high"):
        mus = [r.mirostat_mu for r in records[fact.step - 1:] if r.mirostat_mu is not None]
        return f"{(min if fact.show == 'mu_low' else max)(mus):.1f}" if mus else None
    if fact.step > len(records):
        return None
    record = records[fact.step - 1]
    stage = stage_named(record, fact.at)
    if stage is None:
        return None
    if fact.show == "kept":
        return f"{stage.kept_count:,}"
    if fact.show == "mass":
        return f"{stage.kept_mass:.2f}"
    if fact.show == "removed":
        return removed(record, fact.at, lang)
    row = picked(record, fact)
    if row is None:
        return None
    token = token_text(record, row, lang)
    if fact.show == "token":
        return token
    if fact.show == "shift":
        moved = dict(record.adjusted).get(record.candidates[row].id, 0.0)
        return None if moved is None else f"{abs(moved):.2f}"
    p = pct(stage.probs[row])
    return p if fact.show == "p" else f"{token} ({p})"


def stage_named(record, name: str):
    return next((s for s in record.stages if s.name == name), None)


def picked(record, fact: Fact) -> int | None:
    """The row (an index into the step's candidates) of the token the fact is about."""
    if fact.pick == "chosen":
        ids = [t.id for t in record.candidates]
        return ids.index(record.token_id) if record.token_id in ids else None
    ranking = stage_named(record, fact.rank_at or fact.at)
    if ranking is None or not ranking.probs:
        return None
    return max(range(len(ranking.probs)), key=lambda i: ranking.probs[i])


def removed(record, name: str, lang: str) -> str | None:
    """The tokens stage `name` removed, most probable first, each with its probability at the stage before."""
    names = [s.name for s in record.stages]
    if name not in names or names.index(name) == 0:
        return None
    before, after = record.stages[names.index(name) - 1], record.stages[names.index(name)]
    rows = sorted((i for i, (b, a) in enumerate(zip(before.probs, after.probs)) if b > 0 and a == 0),
                  key=lambda i: -before.probs[i])
    if not rows:
        return None
    items = [f"{token_text(record, i, lang)} ({pct(before.probs[i])})" for i in rows[:4]]
    return items[0] if len(items) == 1 else tr(lang, "scenes.fact.and", first=", ".join(items[:-1]), last=items[-1])


def token_text(record, row: int, lang: str) -> str:
    """A candidate as the charts write it (a space as ␣), quoted."""
    before = bytes.fromhex(record.pending_hex)
    return quoted(show_token(record.candidates[row], before, lang=lang).text)


def quoted(text: str) -> str:
    """Model text in a caption: escaped for HTML and for Markdown's emphasis, in quotes."""
    return '"' + re.sub(r"([\\`*_\[\]])", r"\\\1", escape_html(text)) + '"'


__all__ = ["Fact", "fill", "parse_facts", "read"]
