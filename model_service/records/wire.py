"""What crosses between a model service process and the UI process: records and errors as JSON.

The service sends each record as its `to_dict()` with a `kind`; the UI rebuilds the same frozen
records with their `from_dict`, so a remote service returns exactly what the in-process one does.
Errors cross as their key and values (validation.MESSAGES), so the page can still say them in its
own language; an error without a key crosses as its English text.

    {"kind": "step", ...StepRecord}    {"kind": "batch", ...BatchStep}    {"kind": "waiting", ...Waiting}
    {"kind": "error", "type": "input" | "unavailable" | "value" | "runtime", "key": ..., "values": {...}, "message": ...}
"""

from __future__ import annotations

from . import validation
from .step import BatchStep, ModelInfo, Room, RoomRow, StepRecord, Token, Waiting

KINDS = {StepRecord: "step", BatchStep: "batch", Waiting: "waiting"}


def encode(item) -> dict:
    """A streamed record, or an error, as one JSON object."""
    if isinstance(item, BaseException):
        return encode_error(item)
    return {"kind": KINDS[type(item)], **item.to_dict()}


def decode(data: dict):
    """The record (or the error, returned, not raised) that encode() wrote."""
    kind = data.get("kind")
    body = {k: v for k, v in data.items() if k != "kind"}
    if kind == "step":
        return StepRecord.from_dict(body)
    if kind == "batch":
        return BatchStep.from_dict(body)
    if kind == "waiting":
        return Waiting(**body)
    if kind == "error":
        return decode_error(data)
    raise ValueError(f"the model service sent an unknown record kind: {kind!r}")


def encode_error(error: BaseException) -> dict:
    key = getattr(error, "key", None)
    if isinstance(error, validation.InputError) or (key is None and isinstance(error, ValueError)):
        kind = "input" if key else "value"
    else:
        kind = "unavailable" if isinstance(error, validation.Unavailable) else "runtime"
    return {"kind": "error", "type": kind, "key": key, "values": getattr(error, "values", {}), "message": str(error)}


def decode_error(data: dict) -> Exception:
    kind, key, values = data.get("type"), data.get("key"), data.get("values") or {}
    if key in validation.MESSAGES:
        return (validation.InputError if kind == "input" else validation.Unavailable)(key, **values)
    return (ValueError if kind in ("input", "value") else RuntimeError)(data.get("message") or "the model service failed")


def model_info(data: dict) -> ModelInfo:
    return ModelInfo(**{**data, "eos_token_ids": tuple(data["eos_token_ids"])})


def room(data: dict) -> Room:
    return Room(**{**data, "rows": tuple(RoomRow(**r) for r in data["rows"])})


def token(data: dict) -> Token:
    return Token(**data)
