"""Rooms that follow a host: a short code, the host's page state, and the host's last run, in server memory.

The host opens a room and gets its code and a secret token (kept in the host's page session, and in the host
tab's sessionStorage so a reloaded page can present it again: `resume`); only a caller with the token may publish
to it, close it or resume hosting it. Followers read a room by its code: a Snapshot of the state (a
dict of link fields plus the tab and the step, see playground/workshop/follow/state.py) and the host's finished run (the
StepRecords the host's page already holds: followers show them without running the model). Every publish
that changes something bumps the room's version; a follower redraws when the version it saw is older.

Bounded: at most limits.MAX_FOLLOW_ROOMS rooms; a room no one published to for limits.FOLLOW_ROOM_IDLE_SECONDS is closed,
and when the server is full the oldest idle room makes way only if it has expired. Thread-safe (the host's
events run in Gradio's worker threads, followers' streams on its event loop). No gradio, no torch here.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

from playground import limits

from ..common.page_errors import PageInputError, PageUnavailable


@dataclass(frozen=True)
class Snapshot:
    """What a follower reads: the room's version, the host's state and run (records, None without one)."""

    code: str
    version: int
    state: dict
    run: tuple | None = None
    run_version: int = 0  # bumps only when the run changes: a follower redraws the run chart only then


@dataclass
class _FollowRoom:
    code: str
    token: str
    touched: float
    version: int = 0
    state: dict = field(default_factory=dict)
    run: tuple | None = None
    run_version: int = 0
    followers: int = 0  # pages following now (their streams join and leave)

    def snapshot(self) -> Snapshot:
        return Snapshot(self.code, self.version, dict(self.state), self.run, self.run_version)


def _same_run(a: tuple | None, b: tuple | None) -> bool:
    """The same records, object by object (the host's page keeps its run's record objects; comparing them by
    value at every publish would walk every stage of every step)."""
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def state_chars(state: dict) -> int:
    """A state's size as the room bounds it: the characters of its fields' names and values."""
    return sum(len(k) + len(v) for k, v in state.items())


def checked_state(state) -> dict:
    """A copy of a published state: a dict of text fields of at most limits.MAX_FOLLOW_STATE_CHARS characters.
    Raises PageInputError naming what is wrong (the room keeps the host's previous state)."""
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in state.items()):
        raise PageInputError("room_state", got=type(state).__name__)
    chars = state_chars(state)
    if chars > limits.MAX_FOLLOW_STATE_CHARS:
        raise PageInputError("room_state_long", count=chars, limit=limits.MAX_FOLLOW_STATE_CHARS)
    return dict(state)


def normalise_code(raw) -> str:
    """A typed or linked code as the registry keys it: upper case, spaces and dashes dropped. Raises
    PageInputError naming the field when it cannot be a code (wrong length or a letter not in the alphabet)."""
    if not isinstance(raw, str):
        raise PageInputError("room_code", got=repr(raw)[:40], length=limits.FOLLOW_CODE_LENGTH)
    code = raw.strip().upper().replace(" ", "").replace("-", "")
    if len(code) != limits.FOLLOW_CODE_LENGTH or any(c not in limits.FOLLOW_CODE_ALPHABET for c in code):
        raise PageInputError("room_code", got=repr(raw)[:40], length=limits.FOLLOW_CODE_LENGTH)
    return code


class FollowRooms:
    """The server's rooms. `clock` is injectable so tests can expire rooms without waiting."""

    def __init__(self, max_rooms: int = limits.MAX_FOLLOW_ROOMS, idle_seconds: float = limits.FOLLOW_ROOM_IDLE_SECONDS,
                 clock=time.monotonic):
        self.max_rooms, self.idle_seconds, self.clock = max_rooms, idle_seconds, clock
        self._rooms: dict[str, _FollowRoom] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._rooms)

    def _expire(self) -> None:
        now = self.clock()
        for code in [c for c, r in self._rooms.items() if now - r.touched > self.idle_seconds]:
            del self._rooms[code]

    def _new_code(self) -> str:
        while True:  # at most MAX_FOLLOW_ROOMS of ~6 million codes are taken: a clash is rare, a retry cheap
            code = "".join(secrets.choice(limits.FOLLOW_CODE_ALPHABET) for _ in range(limits.FOLLOW_CODE_LENGTH))
            if code not in self._rooms:
                return code

    def open(self, state: dict | None = None) -> tuple[str, str]:
        """A new room: (code, host token). Raises PageUnavailable when the server holds max_rooms live rooms."""
        with self._lock:
            self._expire()
            if len(self._rooms) >= self.max_rooms:
                raise PageUnavailable("rooms_full", limit=self.max_rooms)
            state = checked_state(state or {})
            code, token = self._new_code(), secrets.token_urlsafe(16)
            self._rooms[code] = _FollowRoom(code, token, self.clock(), state=state)
            return code, token

    def _room(self, code) -> _FollowRoom:
        room = self._rooms.get(normalise_code(code))
        if room is None:
            raise PageInputError("room_unknown", code=normalise_code(code))
        return room

    def _hosted(self, code, token) -> _FollowRoom:
        room = self._room(code)
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), room.token.encode()):
            raise PageInputError("room_not_host", code=room.code)
        return room

    def publish(self, code, token, state: dict | None = None, run=...) -> int:
        """The host's page now shows `state` (and `run`, a sequence of records, or None for no run; left out:
        unchanged). Only the token's holder may publish. Returns the room's version (bumped on a change)."""
        with self._lock:
            self._expire()
            room = self._hosted(code, token)
            state = None if state is None else checked_state(state)
            room.touched = self.clock()
            changed = False
            if state is not None and state != room.state:
                room.state, changed = state, True
            if run is not ...:
                run = None if run is None else tuple(run)
                if not _same_run(run, room.run):
                    room.run, room.run_version, changed = run, room.run_version + 1, True
            if changed:
                room.version += 1
            return room.version

    def resume(self, code, token) -> Snapshot:
        """The host's page came back (a reload, a laptop waking) with the token it kept: what the room shows
        now, for the page to show it again before it publishes. Raises PageInputError for an unknown or expired
        room, or a token that is not the room's; touches the room like a publish."""
        with self._lock:
            self._expire()
            room = self._hosted(code, token)
            room.touched = self.clock()
            return room.snapshot()

    def close(self, code, token) -> None:
        with self._lock:
            room = self._hosted(code, token)
            del self._rooms[room.code]

    def snapshot(self, code) -> Snapshot:
        """What a follower of `code` shows now. Raises PageInputError for a bad, unknown or expired code."""
        with self._lock:
            self._expire()
            room = self._room(code)
            return room.snapshot()

    def join(self, code: str) -> None:
        """A follower's stream started (`code` as a snapshot names it); the host's bar counts them."""
        with self._lock:
            if code in self._rooms:
                self._rooms[code].followers += 1

    def leave(self, code: str) -> None:
        with self._lock:
            if code in self._rooms:
                self._rooms[code].followers = max(0, self._rooms[code].followers - 1)

    def followers(self, code: str) -> int:
        with self._lock:
            room = self._rooms.get(code)
            return room.followers if room else 0

    def version(self, code) -> int | None:
        """The room's version, or None once it is closed or expired: a follower's cheap look between redraws."""
        with self._lock:
            room = self._rooms.get(code)
            if room is None or self.clock() - room.touched > self.idle_seconds:
                return None
            return room.version
