"""One home per knob: a sampling knob is declared by its row (model_service/records/knobs.py) and computed by its
math (model_service/sampling/); every other module gets it from the rows. This counts, for each knob beyond the
lesson's four, the product modules that spell its name, and fails on one that is not its row, its math, the settings
that hold it (records/settings.py) or a reader listed here with its reason. Top-H, the knob added as the proof,
is named by its row and its math alone."""

from __future__ import annotations

import re

from model_service.records.knobs import KNOBS

from .test_shape import sources

HOMES = ("model_service.records.knobs", "model_service.records.settings")  # the rows, and the settings they make
MATH = "model_service.sampling"
# Words that also mean something else in the code ("chain": any chain of stages; "mirostat": its mu, a record's
# field and the charts' line): their name alone says nothing about where the knob is read.
COMMON_WORDS = ("chain", "mirostat")
# The modules that name a knob besides its home and its math, and why.
READERS = {
    # its validator, its text form (links, the lab's box, tables), the bar a click bans, OpenAI's own field
    "logit_bias": {"model_service.records.validation", "model_service.service", "playground.api",
                   "playground.common.tables", "playground.lab.ban", "playground.lab.deep_link",
                   "playground.lab.inspect_charts", "playground.common.lab_link", "playground.lab.tab",
                   "playground.openai_api.schema"},
    # the Engine tab's per-row line; OpenAI's own names (frequency, presence) beside vLLM's (repetition)
    "repetition_penalty": {"playground.engine.views", "playground.openai_api.schema"},
    "frequency_penalty": {"playground.engine.views", "playground.openai_api.schema"},
    "presence_penalty": {"playground.engine.views", "playground.openai_api.schema"},
    # their limits, named for the knob
    "penalty_last_n": {"model_service.limits"},
    "xtc_threshold": {"model_service.limits"},
    "no_repeat_ngram_size": {"model_service.limits", "playground.api"},  # and /stream_records' docstring
    # the engine counts the tokens a row has made, and holds its end tokens back until then
    "min_tokens": {"model_service.limits", "playground.api", "model_service.engine.step",
                   "model_service.engine.text_stream", "model_service.forward_pass.batch_effect",
                   "model_service.service"},
    # the tables' docstring's example of the "more samplers" cell
    "typical_p": {"playground.common.tables"},
    "dry_multiplier": {"playground.common.tables"},
    # XTC's chance: drawn per step, carried by a record, shown on its panel
    "xtc_probability": {"model_service.records.step", "playground.lab.stage_panels"},
    # the breakers are text: the engine turns them into token ids once per row; their text form (links, tables)
    "dry_sequence_breakers": {"model_service.engine.step", "model_service.service", "playground.common.tables",
                              "playground.lab.deep_link", "playground.common.lab_link"},
}


def named(name: str) -> set[str]:
    pattern = re.compile(rf"\b{name}\b")
    return {module for module, path in sources().items() if pattern.search(path.read_text(encoding="utf-8"))}


def test_each_knob_is_named_only_by_its_row_its_math_and_the_readers_listed():
    for knob in KNOBS:
        if knob.group == "lesson" or knob.name in COMMON_WORDS:
            continue
        elsewhere = {m for m in named(knob.name) if m not in HOMES and not m.startswith(MATH)}
        assert elsewhere <= READERS.get(knob.name, set()), (knob.name, sorted(elsewhere - READERS.get(knob.name, set())))


def test_top_h_the_knob_added_as_the_proof_is_named_by_its_row_and_its_math_alone():
    assert named("top_h") == {"model_service.records.knobs", "model_service.sampling.transforms"}


def test_the_test_finds_a_knob_named_in_a_new_module(tmp_path, monkeypatch):
    extra = tmp_path / "stray.py"
    extra.write_text("X = 'top_h'\n")
    real = sources()
    monkeypatch.setattr(f"{__name__}.sources", lambda: {**real, "playground.stray": extra})
    assert "playground.stray" in named("top_h")
