"""Running a branch: the records of a run with some steps forced, through the service's public generate().

"Continue from step k with token t forced" is a request whose already-generated tokens are the run's
tokens[:k] + [t], with the same seed: the service advances the seeded generator by one draw per token
given (model_service/engine/step.py:RowState), so the continuation uses the u's the original run would
have used from step k + 1 on, and replaying the same path gives the same tokens. A switch of settings at step k
(Continue from here) is the same request with other knobs from step k on, over the same seed's u's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import replace

from model_service.records.step import StepRecord

from .branches import forced_record, is_switch, valid_known
from .deep_link import switched
from .request import continued


def _stream(service, request, records: list[StepRecord], max_new: int) -> Iterator[StepRecord]:
    """The run continued after `records` (mirostat's mu from the last of them), to max_new steps in all."""
    stream = service.generate(request.prompt, continued(request.settings, records), max_new_tokens=max_new,
                              stop=request.stop, chat=request.chat, continue_from=[r.token_id for r in records])
    with closing(stream):  # the row leaves the room's batch even if the caller stops reading
        yield from (r for r in stream if isinstance(r, StepRecord))


def branch_records(service, root, path, known: Sequence[StepRecord] = (), eos_ids=(),
                   known_path=()) -> Iterator[StepRecord]:
    """Yield the records of `root` (a RunRequest with a seed) with `path` forced and switched, in step order.

    known: records of a branch that shares the start (the parent, whose path is `known_path`): reused as far as
    the two paths agree (branches.valid_known), so a branch made from the page runs the model only from its
    forced or switched step on. A ValueError (naming the branch) when the run stops before a forced step, or a
    forced token is not among the step's candidates."""
    if root.settings.seed is None:
        raise ValueError("branch needs a seed: the same seed gives the same draws, so the branch can be replayed")
    known = known[: valid_known(known_path, path)]
    records: list[StepRecord] = []
    request = root
    for step, token in path:
        if step > request.max_new_tokens:
            raise ValueError(f"branch step {step} is past max new tokens ({request.max_new_tokens})")
        k = step - 1
        if is_switch((step, token)):  # the steps before it as they were, then the switched settings from it on
            before = list(known[len(records): k]) if len(known) >= k else list(_stream(service, request, records, k))
            if before and before[-1].stop_reason == "max_tokens" and k < request.max_new_tokens:
                before[-1] = replace(before[-1], stop_reason=None)  # streamed to k steps only: the run goes on
            if len(records) + len(before) < k or any(r.stop_reason for r in before):
                raise ValueError(f"branch step {step}: the run stopped before it")
            yield from before
            records.extend(before)
            request = switched(root, token)
            continue
        if len(known) > k:
            new = list(known[len(records): k + 1])
        else:
            new = list(_stream(service, request, records, k + 1))
        ended = next((r for r in [*records, *new][:k] if r.stop_reason is not None), None)
        if ended is not None or len(records) + len(new) <= k:
            at = ended.step + 1 if ended is not None else len(records) + len(new)
            raise ValueError(f"branch step {step}: the run stopped at step {at}, before it")
        yield from new[:-1]
        records.extend(new[:-1])
        forced = forced_record(new[-1], token, records[-1].text if records else "")
        if forced.mirostat_mu is not None:  # mu moves by the forced token's surprise, not the drawn one's
            used, p = forced.stage("mirostat").applied, forced.stages[-1].chosen_prob
            forced = replace(forced, mirostat_mu=request.settings.next_mu(used, p))
        last = token in eos_ids or step == request.max_new_tokens
        if last:
            reason = "eos" if token in eos_ids else "max_tokens"
            forced = replace(forced, stop_reason=reason)
        records.append(forced)
        yield forced
        if last:
            if (step, token) != tuple(path[-1]):
                raise ValueError(f"branch step {step}: the run ends with the forced token, nothing after it to force")
            return
    yield from _stream(service, request, records, request.max_new_tokens)
