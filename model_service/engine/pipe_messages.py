"""What crosses the pipe between the web process and the scheduler process (engine/scheduler_process.py): one
small frozen dataclass per kind of message, named for what it says. Errors cross in the one codec's form
(records/wire.py), so a learner-facing error keeps its key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# ---- web process -> scheduler process ---------------------------------------------------------------------


@dataclass(frozen=True)
class RowRequest:
    """What the scheduler process needs to rebuild one Job: its seed (drawn in the web process for an unseeded
    request, so both sides agree) beside its settings as the caller gave them (the room shows whether a
    learner chose a seed)."""

    rid: int  # the request's id, the same on both sides
    caller: int  # a caller's requests share a sink, as in the web process
    ids: list[int]
    first_step: int
    top_n: int
    capture: bool
    index: int
    keep_logits: bool
    settings: Any  # SamplingSettings
    seed: int
    max_new_tokens: int
    stop: tuple[str, ...]
    prefix: tuple[int, ...]
    ignore_eos: bool
    report_waiting: bool


@dataclass(frozen=True)
class Submit:
    call: int  # answered by a Reply with this call id
    requests: list[RowRequest]


@dataclass(frozen=True)
class Cancel:
    rids: list[int]


@dataclass(frozen=True)
class RoomQuery:
    call: int


@dataclass(frozen=True)
class Stop:
    reason: dict  # wire.encode_error


# ---- scheduler process -> web process ---------------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    """The model is loaded; requests may come."""


@dataclass(frozen=True)
class LoadFailed:
    error: dict  # wire.encode_error


@dataclass(frozen=True)
class Reply:
    call: int
    value: Any  # a Room, None (submitted) or an encoded error (refused)


@dataclass(frozen=True)
class StepDone:
    """One scheduler step's records for every caller, as Scheduler._step hands them to its sinks."""

    records: list  # (rid, StepRecord, the step's kept (logits row, u) or None)
    vocab: int
    forward_ms: float
    sampling_ms: float
    steps: int  # the scheduler's step counter after this step


@dataclass(frozen=True)
class RowFailed:
    rid: int
    error: dict  # wire.encode_error


@dataclass(frozen=True)
class QueuePlace:
    rid: int  # the caller's first request
    waiting: Any  # records.step.Waiting


__all__ = ["Cancel", "LoadFailed", "QueuePlace", "Ready", "Reply", "RoomQuery", "RowFailed", "RowRequest", "StepDone",
           "Stop", "Submit"]
