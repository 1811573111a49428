"""The page's own errors: the ones only the page can make (a follow room's code, the host's key, a run file), keyed
like the service's (model_service/records/validation.py) so that the page says them in its language from the
same catalogue ("error.<key>"), and the service's list names no page concept."""

from __future__ import annotations

from model_service.records import validation

# key -> the English message; the page's catalogues have "error.<key>" with the same {placeholders}
PAGE_MESSAGES = {
    "switch_off": "switching the model is off here (the Model panel says why)",
    "host_key": "host key: that is not the host's key",
    "room_code": "room code must be {length} letters and digits from the host's screen, got {got}",
    "room_unknown": "there is no open room {code}: check the code with the host (rooms close after hours without the host)",
    "room_not_host": "only the host of room {code} may change what it shows",
    "room_state": "a room's state must be a dict of text fields, got {got}",
    "room_state_long": "the page's state has {count} characters, more than a room carries ({limit}): shorten a prompt or the engine table",
    "rooms_full": "this server already has {limit} open rooms: close one, or try again later",
    "run_json": "the run file is not JSON: {error}",
    "run_size": "the run file has {size} bytes; the limit here is {limit}",
    "run_field": "the run file's {field} must be {expected}, got {got}",
    "run_missing": "the run file has no {field}",
    "run_unknown": "the run file's {field} is not part of a run (expected: {known})",
    "iv_file_json": "the intervention file is not JSON: {error}",
    "iv_file_size": "the intervention file has {size} bytes; the limit here is {limit}",
    "iv_file_field": "the intervention file's {field} must be {expected}, got {got}",
    "iv_file_missing": "the intervention file has no {field}",
    "iv_file_unknown": "the intervention file's {field} is not part of it (expected: {known})",
}
_ALL = {**validation.MESSAGES, **PAGE_MESSAGES}
assert not set(PAGE_MESSAGES) & set(validation.MESSAGES)


class PageInputError(validation.InputError):
    """Bad input to the page (a room code, a run file): the message names the field and the value."""

    MESSAGES = _ALL


class PageUnavailable(validation.Unavailable):
    """Good input the page cannot take now (switching is off, every room is open)."""

    MESSAGES = _ALL


__all__ = ["PAGE_MESSAGES", "PageInputError", "PageUnavailable"]
