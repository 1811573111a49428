"""The step loop on a tiny random Llama with a byte-level tokenizer (milliseconds per test)."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
import torch

from model_service import SamplingSettings, StepRecord
from model_service.engine.runner import Decoder
from model_service.records.utf8 import incomplete_tail

GREEDY = SamplingSettings(temperature=0)


def tokens(records):
    return [r.token_id for r in records]


def test_kv_cache_logits_equal_a_full_forward_at_every_position(tiny_service):
    model = tiny_service.model
    prompt = tiny_service.encode("The capital of France is")
    generated = tokens(tiny_service.generate("The capital of France is", GREEDY, max_new_tokens=12))
    decoder = Decoder(model)
    step_logits = [decoder.prefill([prompt])[0]]
    for t in generated[:-1]:
        step_logits.append(decoder.step([t])[0])
    with torch.no_grad():
        full = model(torch.tensor([prompt + generated])).logits[0]  # (T, V)
    for i, logits in enumerate(step_logits):
        torch.testing.assert_close(logits, full[len(prompt) - 1 + i], atol=1e-5, rtol=1e-5)
    # and greedy picked the argmax of the full forward at every step
    assert generated == full[len(prompt) - 1 : -1].argmax(-1).tolist()


def test_prefill_runs_the_lm_head_for_the_last_position_only(tiny_service):
    seen = []
    hook = tiny_service.model.lm_head.register_forward_hook(lambda m, i, o: seen.append(tuple(o.shape)))
    try:
        list(tiny_service.generate("a longer prompt of many bytes", GREEDY, max_new_tokens=2))
    finally:
        hook.remove()
    assert seen == [(1, 1, 258), (1, 1, 258)]


def test_seeded_runs_are_identical_and_seeds_differ(tiny_service):
    run = lambda seed: tokens(tiny_service.generate("hi", SamplingSettings(temperature=1.0, seed=seed), max_new_tokens=16))
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_unseeded_runs_report_the_seed_that_replays_them(tiny_service):
    first = list(tiny_service.generate("hi", SamplingSettings(), max_new_tokens=10))
    seed = first[0].seed
    assert all(r.seed == seed for r in first)
    replay = tiny_service.generate("hi", SamplingSettings(seed=seed), max_new_tokens=10)
    assert tokens(replay) == tokens(first)


def test_capture_off_picks_the_same_tokens(tiny_service):
    s = SamplingSettings(temperature=0.9, top_p=0.8, seed=3)
    on = list(tiny_service.generate("abc", s, max_new_tokens=10))
    off = list(tiny_service.generate("abc", s, max_new_tokens=10, capture=False))
    assert tokens(on) == tokens(off)
    assert off[0].stages == () and len(on[0].stages) == 6  # the lesson's stages: no other knob changed a thing


def test_max_tokens_stops_with_a_reason_on_the_last_step_only(tiny_service):
    records = list(tiny_service.generate("x", GREEDY, max_new_tokens=5))
    assert len(records) == 5
    assert [r.stop_reason for r in records] == [None] * 4 + ["max_tokens"]
    assert [r.step for r in records] == list(range(5))


def test_eos_stops_and_is_not_part_of_the_text(tiny_service, monkeypatch):
    first = next(iter(tiny_service.generate("x", GREEDY, max_new_tokens=1))).token_id
    monkeypatch.setattr(tiny_service.loaded, "eos_token_ids", {first})
    records = list(tiny_service.generate("x", GREEDY, max_new_tokens=5))
    assert len(records) == 1 and records[0].stop_reason == "eos" and records[0].text == ""
    ignored = list(tiny_service.generate("x", GREEDY, max_new_tokens=5, ignore_eos=True))
    assert len(ignored) == 5


def test_stop_string_spanning_tokens_ends_the_run(tiny_service):
    full = list(tiny_service.generate("q", SamplingSettings(seed=1), max_new_tokens=30))
    text = full[-1].text
    # byte tokenizer: any two printable characters are two tokens
    i = next(i for i in range(3, len(text) - 1) if text[i : i + 2].isprintable() and text[i : i + 2].strip() == text[i : i + 2])
    stop = text[i : i + 2]
    cut = list(tiny_service.generate("q", SamplingSettings(seed=1), max_new_tokens=30, stop=[stop]))
    assert cut[-1].stop_reason == "stop_string"
    assert cut[-1].text == text[: text.index(stop)]
    assert all(stop not in r.text for r in cut)


def test_streamed_text_only_grows(tiny_service):
    records = list(tiny_service.generate("hello", SamplingSettings(temperature=1.5, seed=11), max_new_tokens=40))
    for before, after in zip(records, records[1:]):
        assert after.text.startswith(before.text)
    ids = tokens(records)
    assert records[-1].text == tiny_service.decode(ids)


def test_step_record_is_small_picklable_and_round_trips(tiny_service):
    records = list(tiny_service.generate("hello", SamplingSettings(temperature=0.8, top_k=50, seed=1), max_new_tokens=8, top_n=20))
    for r in records:
        d = r.to_dict()
        # to_dict skips asdict's deep copies, and gives the same, but for a stage's `applied` where it has none, and
        # mirostat's mu and the moved logits where there are none
        full = dataclasses.asdict(r)
        assert full.pop("mirostat_mu") is None and full.pop("adjusted") == ()
        assert d == {**full, "stages": tuple({k: v for k, v in s.items() if not (k == "applied" and v is None)}
                                             for s in full["stages"])}
        assert len(json.dumps(d).encode()) <= 8192
        assert StepRecord.from_dict(json.loads(json.dumps(d))) == r
        assert pickle.loads(pickle.dumps(r)) == r
        assert len(r.candidates) == 20 and all(len(s.probs) == 20 for s in r.stages)
        assert [s.name for s in r.stages] == ["raw", "temperature", "top_k", "top_p", "min_p", "final"]
        assert r.stage("top_k").kept_count == 50


def test_each_record_carries_its_bytes_and_the_bytes_pending_before_it(tiny_service):
    """One token per byte: a sampled run writes lead and continuation bytes in any order. Each record
    says which of its bytes are not whole characters and what the run left half-written before it,
    exactly as Python's UTF-8 decoder sees the bytes so far; Step (continue_from) resumes the same."""
    settings = SamplingSettings(temperature=3.0, seed=5)
    records = list(tiny_service.generate("Thủ đô", settings, max_new_tokens=60, ignore_eos=True))
    written = b""
    for r in records:
        data = bytes.fromhex(r.bytes_hex) if r.bytes_hex else r.piece.encode()
        assert bool(r.bytes_hex) == (data[0] >= 0x80)  # a byte past ASCII is never a character alone
        assert r.pending_hex == incomplete_tail(written).hex()
        written += data
    assert any(r.pending_hex for r in records)  # the run did leave characters half-written
    half = next(i for i, r in enumerate(records) if r.pending_hex)
    resumed = next(iter(tiny_service.generate("Thủ đô", settings, max_new_tokens=60, ignore_eos=True,
                                              continue_from=tokens(records[:half]))))
    assert resumed.pending_hex == records[half].pending_hex and resumed.token_id == records[half].token_id


def test_stage_summaries_are_consistent(tiny_service):
    r = next(iter(tiny_service.generate("hello", SamplingSettings(temperature=0.7, top_p=0.5, seed=2), max_new_tokens=1)))
    raw, temp, top_p, final = r.stage("raw"), r.stage("temperature"), r.stage("top_p"), r.stage("final")
    assert raw.kept_count == 258 and raw.kept_mass == 1.0
    assert temp.entropy_bits < raw.entropy_bits  # T < 1 sharpens
    assert top_p.kept_count < 258 and 0.5 <= top_p.kept_mass <= 1.0
    assert final == top_p.__class__(**{**top_p.to_dict(), "name": "final", "kept_mass": final.kept_mass})
    assert r.draw.low <= r.draw.u < r.draw.high
    assert final.chosen_prob == pytest.approx(r.draw.high - r.draw.low, abs=1e-5)
    assert list(raw.probs) == sorted(raw.probs, reverse=True)  # candidates are the raw ranking


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(max_new_tokens=2.5), "max_new_tokens"),
        (dict(top_n=0), "top_n"),
        (dict(stop=[""]), "stop"),
        (dict(settings={"temprature": 1}), "temprature"),
        (dict(settings={"temperature": -1}), "temperature"),
        (dict(prompt=""), "empty"),
        (dict(prompt="x" * 300), "context"),
        (dict(chat=True), "chat template"),
    ],
)
def test_bad_input_is_refused_before_any_work(tiny_service, kwargs, field):
    args = dict(prompt="hello", settings=None, **{k: v for k, v in kwargs.items() if k not in ("prompt", "settings")})
    args["prompt"] = kwargs.get("prompt", "hello")
    args["settings"] = kwargs.get("settings")
    with pytest.raises(ValueError, match=field):
        tiny_service.generate(**args)


def test_stepping_one_token_at_a_time_replays_a_full_run(tiny_service):
    s = SamplingSettings(temperature=1.1, top_p=0.9, seed=21)
    full = list(tiny_service.generate("step", s, max_new_tokens=8))
    stepped = []
    for _ in range(8):
        run = tiny_service.generate("step", s, max_new_tokens=8, continue_from=[x.token_id for x in stepped])
        stepped.append(next(run))  # the Step button takes one record and drops the rest of the run
    # Exact: what was drawn and shown. Approximate: probabilities (a prefill over prompt + prefix
    # and one-token steps round differently in the last bits).
    exact = lambda r: (r.step, r.token_id, r.text, r.stop_reason, r.draw.u, r.chosen_rank, r.seed)
    assert [exact(r) for r in stepped] == [exact(r) for r in full]
    for a, b in zip(stepped, full):
        flat = lambda r: [p for s in r.stages for p in s.probs]
        assert flat(a) == pytest.approx(flat(b), abs=1e-5)


def test_continuing_past_max_tokens_is_refused(tiny_service):
    with pytest.raises(ValueError, match="max_new_tokens"):
        tiny_service.generate("x", GREEDY, max_new_tokens=2, continue_from=[5, 6])
