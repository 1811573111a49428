"""A Vietnamese prompt on the embedded SmolLM2: its byte-level BPE cuts letters such as "ủ" and "đ"
into byte pieces. Every piece in the records (prompt tokens, generated tokens, candidates, the
trace's top-N and logit lens) must read as characters; byte escapes only in the hover detail."""

from __future__ import annotations

import json

import pytest

from model_service import SamplingSettings, StepRecord
from model_service.records.trace import Trace
from model_service.records.utf8 import incomplete_tail
from playground.common.text import Shown, show_steps, show_token, show_tokens, token_bytes

PROMPT = "Thủ đô của Pháp là"
GREEDY = SamplingSettings(temperature=0)


def plain(shown: Shown) -> str:
    """A shown text back to the text it stands for (the visible marks undone)."""
    return shown.text.replace("␣", " ").replace("↵", "\n").replace("⇥", "\t")


def assert_readable(shown: Shown) -> None:
    assert "\\x" not in shown.text + shown.mark + shown.words, shown
    if shown.mark:  # a split character keeps its bytes, for the hover
        assert "\\x" in shown.hover


@pytest.fixture(scope="module")
def run(embedded) -> list[StepRecord]:
    return list(embedded.generate(PROMPT, GREEDY, max_new_tokens=24))


@pytest.fixture(scope="module")
def trace(embedded) -> Trace:
    return embedded.trace(PROMPT)


def test_the_prompt_reads_as_vietnamese_letters(trace):
    shown = show_tokens(trace.tokens)
    assert [s.text for s in shown] == ["Th", "ủ", "ủ", "␣đ", "đ", "ô", "␣c", "ủ", "ủ", "a", "␣Ph", "á", "p", "␣l", "à"]
    assert [s.mark for s in shown[:6]] == ["", "1–2/3", "3/3", "1/2", "2/2", ""]
    assert any(t.bytes_hex for t in trace.tokens)  # the tokenizer did cut characters
    for s in shown:
        assert_readable(s)


def test_every_piece_of_the_trace_reads_without_escapes(trace):
    data = [token_bytes(t) for t in trace.tokens]
    for p in trace.predictions:
        for c in p.top:
            assert_readable(show_token(c, b"".join(data[: p.position + 1])))
    for layer in trace.lens.layers:
        for c in layer.top:
            assert_readable(show_token(c, b"".join(data)))


def test_every_generated_token_and_candidate_reads_without_escapes(run):
    written = b""
    for record, shown in zip(run, show_steps(run)):
        assert record.pending_hex == incomplete_tail(written).hex()
        assert_readable(shown)
        for c in record.candidates:
            assert_readable(show_token(c, bytes.fromhex(record.pending_hex)))
        written += token_bytes(record)
        assert StepRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    assert any(r.bytes_hex for r in run) and any(r.pending_hex for r in run)
    # each generated token reads as the characters it helps write: a piece of the generated text
    text = run[-1].text
    for shown in show_steps(run):
        if "…" not in shown.text:  # not a character the run left unfinished
            assert plain(shown) in text
