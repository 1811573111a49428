"""Compare and Branch on the tiny random Llama: common random numbers and forced tokens, checked against
solo runs through the same service (the room's scheduler)."""

from __future__ import annotations

import pytest

from model_service import BatchStep, SamplingSettings
from playground.compare.columns import first_divergence, parse_comparison
from playground.lab.branch_run import branch_records
from playground.lab.request import RunRequest

PROMPT = "Hello there"


def columns(service, comparison):
    out = [[] for _ in comparison.requests]
    for step in service.generate_batch(comparison.requests, top_n=20):
        if isinstance(step, BatchStep):
            for column, record in zip(out, step.rows):
                if record is not None:
                    column.append(record)
    return out


def solo(service, settings, n, continue_from=()):
    return list(service.generate(PROMPT, settings, n, continue_from=continue_from))


def test_columns_with_identical_settings_are_identical(tiny_service):
    comparison = parse_comparison(PROMPT, [[1.2, 0, 1, 0, "hf"]] * 3, "11", 16)
    a, b, c = columns(tiny_service, comparison)
    assert [r.token_id for r in a] == [r.token_id for r in b] == [r.token_id for r in c]
    assert [r.draw.u for r in a] == [r.draw.u for r in b]
    assert first_divergence([[r.token_id for r in col] for col in (a, b, c)]) is None


def test_every_column_draws_the_same_u_and_equals_its_solo_run_with_that_seed(tiny_service):
    rows = [[0.5, 0, 1, 0, "hf"], [1.5, 0, 1, 0, "hf"], [1, 20, 0.9, 0, "vllm"], [0, 0, 1, 0, "hf"]]
    comparison = parse_comparison(PROMPT, rows, "3", 16)
    cols = columns(tiny_service, comparison)
    drawn = [[r.draw.u for r in col] for col in cols[:3]]
    assert drawn[0] == drawn[1] == drawn[2]  # common random numbers
    assert all(r.draw.u is None for r in cols[3])  # greedy: the u is drawn and not used
    for request, col in zip(comparison.requests, cols):
        alone = solo(tiny_service, request.settings, 16)
        assert [r.token_id for r in col] == [r.token_id for r in alone]
    assert first_divergence([[r.token_id for r in col] for col in cols]) is not None  # the settings matter here


def test_the_order_of_the_columns_does_not_change_any_columns_tokens(tiny_service):
    rows = [[0.5, 0, 1, 0, "hf"], [1.5, 0, 1, 0, "hf"], [1, 0, 1, 0.1, "llama.cpp"]]
    forward = columns(tiny_service, parse_comparison(PROMPT, rows, "5", 12))
    backward = columns(tiny_service, parse_comparison(PROMPT, rows[::-1], "5", 12))
    assert [[r.token_id for r in c] for c in forward] == [[r.token_id for r in c] for c in backward[::-1]]


@pytest.fixture(scope="module")
def root(tiny_service):
    request = RunRequest(PROMPT, False, SamplingSettings(temperature=1.0, seed=7), 14, ())
    return request, list(branch_records(tiny_service, request, ()))


def test_a_branch_is_the_solo_run_with_that_prefix_and_the_same_seed(tiny_service, root):
    request, records = root
    assert [r.token_id for r in records] == [r.token_id for r in solo(tiny_service, request.settings, 14)]
    token = next(c.id for c in records[4].candidates if c.id != records[4].token_id)
    branch = list(branch_records(tiny_service, request, ((5, token),), records))
    prefix = [r.token_id for r in records[:4]] + [token]
    after = solo(tiny_service, request.settings, 14, continue_from=prefix)
    assert [r.token_id for r in branch] == prefix + [r.token_id for r in after]
    assert [r.draw.u for r in branch[5:]] == [r.draw.u for r in records[5:]]  # the same u's after the fork
    forced = branch[4]
    rank = [c.id for c in records[4].candidates].index(token)
    assert forced.chosen_rank == rank and forced.stages[0].chosen_prob == records[4].stages[0].probs[rank]


def test_a_branch_replays_from_its_path_alone_and_forcings_compose(tiny_service, root):
    request, records = root
    first = records[2].candidates[3].id
    one = list(branch_records(tiny_service, request, ((3, first),), records))
    second = one[8].candidates[1].id
    two = list(branch_records(tiny_service, request, ((3, first), (9, second)), one))
    replayed = list(branch_records(tiny_service, request, ((3, first), (9, second))))  # no records known: a link
    assert [r.token_id for r in replayed] == [r.token_id for r in two]
    assert [r.token_id for r in two[:8]] == [r.token_id for r in one[:8]] and two[8].token_id == second
    assert two[-1].stop_reason == "max_tokens" and len(two) == 14


def test_a_branch_that_cannot_be_run_says_why(tiny_service, root):
    request, records = root
    with pytest.raises(ValueError, match="top 20 candidates"):
        list(branch_records(tiny_service, request, ((2, 99999),), records))
    with pytest.raises(ValueError, match="past max new tokens"):
        list(branch_records(tiny_service, request, ((15, 3),), records))
    unseeded = RunRequest(PROMPT, False, SamplingSettings(), 5, ())
    with pytest.raises(ValueError, match="needs a seed"):
        list(branch_records(tiny_service, unseeded, ((2, 3),)))


def test_forcing_the_last_step_or_end_of_text_ends_the_branch(tiny_service, root):
    request, records = root
    last = records[13].candidates[2].id
    branch = list(branch_records(tiny_service, request, ((14, last),), records))
    assert len(branch) == 14 and branch[-1].token_id == last and branch[-1].stop_reason == "max_tokens"
    end = records[3].candidates[1].id  # stands for end-of-text (the tiny model's own rarely ranks in the top 20)
    ended = list(branch_records(tiny_service, request, ((4, end),), records, eos_ids={end}))
    assert len(ended) == 4 and ended[-1].stop_reason == "eos"
    with pytest.raises(ValueError, match="nothing after it to force"):
        list(branch_records(tiny_service, request, ((4, end), (6, 1)), records, eos_ids={end}))


def test_a_switch_of_settings_is_the_run_continued_with_them_and_the_same_us(tiny_service, root):
    from playground.lab.branches import Switch
    from playground.lab.deep_link import switch_between, switched

    request, records = root
    switch = Switch((("temperature", "0.4"), ("top_k", "5")))
    new = switched(request, switch)
    assert new.settings.temperature == 0.4 and new.settings.top_k == 5 and new.settings.seed == 7
    assert switch_between(request, new) == switch and switch_between(request, request) is None
    branch = list(branch_records(tiny_service, request, ((6, switch),), records))
    after = solo(tiny_service, new.settings, 14, continue_from=[r.token_id for r in records[:5]])
    assert branch[:5] == records[:5] and [r.token_id for r in branch[5:]] == [r.token_id for r in after]
    assert [r.draw.u for r in branch] == [r.draw.u for r in records]  # the seed's u's, step by step
    assert all(s.name != "top_k" or s.kept_count <= 5 for r in branch[5:] for s in r.stages)
    assert [r.token_id for r in branch] != [r.token_id for r in records]  # the settings changed the text
    replayed = list(branch_records(tiny_service, request, ((6, switch),)))  # from a link: nothing known
    assert [r.token_id for r in replayed] == [r.token_id for r in branch]
    # a token forced after the switch is drawn among the switched step's candidates, and the known branch reused
    forced = branch[8].candidates[1].id
    path = ((6, switch), (9, forced))
    child = list(branch_records(tiny_service, request, path, branch, known_path=((6, switch),)))
    assert child[:8] == branch[:8] and child[8].token_id == forced
    assert [r.token_id for r in child] == [r.token_id for r in branch_records(tiny_service, request, path)]
    # the root's records are no help past the switch: the known run's steps after it are not this branch's
    assert [r.token_id for r in branch_records(tiny_service, request, path, records)] == [r.token_id for r in child]
