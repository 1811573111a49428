"""Running a branch: the records of a run with some steps forced, through the service's public generate().

"Continue from step k with token t forced" is a request whose already-generated tokens are the run's
tokens[:k] + [t], with the same seed: the service advances the seeded generator by one draw per token
given (model_service/engine/step.py:RowState), so the continuation uses the u's the original run would
have used from step k + 1 on, and replaying the same path gives the same tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import replace

from model_service.records.step import StepRecord

from .branches import forced_record
from .request import continued


def _stream(service, request, records: list[StepRecord], max_new: int) -> Iterator[StepRecord]:
    """The run continued after `records` (mirostat's mu from the last of them), to max_new steps in all."""
    stream = service.generate(request.prompt, continued(request.settings, records), max_new_tokens=max_new,
                              stop=request.stop, chat=request.chat, continue_from=[r.token_id for r in records])
    with closing(stream):  # the row leaves the room's batch even if the caller stops reading
        yield from (r for r in stream if isinstance(r, StepRecord))


def branch_records(service, request, path, known: Sequence[StepRecord] = (), eos_ids=()) -> Iterator[StepRecord]:
    """Yield the records of `request` (a RunRequest with a seed) with `path` forced, in step order.

    known: records of a run that shares the start (the parent branch): reused while they agree, so a
    branch made from the page runs the model only from the forced step on. A ValueError (naming the
    branch) when the run stops before a forced step, or a forced token is not among the step's candidates."""
    if request.settings.seed is None:
        raise ValueError("branch needs a seed: the same seed gives the same draws, so the branch can be replayed")
    records: list[StepRecord] = []
    for step, token in path:
        if step > request.max_new_tokens:
            raise ValueError(f"branch step {step} is past max new tokens ({request.max_new_tokens})")
        k = step - 1
        if len(known) > k and [r.token_id for r in known[: len(records)]] == [r.token_id for r in records]:
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
