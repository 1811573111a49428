"""Who may call the API: open when the app is reachable from this machine only; with the host's key
(NTP_API_KEY, playground/config.py) when it serves a room (any other address, a public --share link, a Space).

A room with no key set does not open the API to the internet: every call is answered 403, saying the host must
set NTP_API_KEY. Keys are compared in constant time; a wrong key waits limits.HOST_KEY_DELAY_SECONDS before its
401, as the host key of the model picker does, so guessing it is slow.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from ..config import API_KEY
from ..hosting import Machine
from .errors import ApiError

# the addresses that reach this machine only (as hosting.switch_policy reads --host)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
CHALLENGE = {"WWW-Authenticate": "Bearer"}


@dataclass(frozen=True)
class Access:
    """mode: "open" (this machine only), "key" (a room: Authorization: Bearer <key>), "unset" (a room whose
    host set no key: the API is off)."""

    mode: str
    key: str | None = None

    def refusal(self, authorization: str | None) -> tuple[ApiError, bool] | None:
        """None when the request may go on; else the error and whether it waits first (a wrong key)."""
        if self.mode == "open":
            return None
        if self.mode != "key" or not self.key:
            return ApiError(403, f"this app serves a room, so its OpenAI-compatible API needs a key, and the host "
                                 f"has not set one: the host sets {API_KEY} and restarts the app",
                            "permission_error", None, "api_key_not_set"), False
        scheme, _, given = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return ApiError(401, "this room's API needs its key: send Authorization: Bearer <key> (the host's "
                                 f"{API_KEY}; with the openai package, api_key=...)",
                            "authentication_error", None, "missing_api_key", CHALLENGE), False
        if not hmac.compare_digest(given.strip().encode("utf-8"), self.key.encode("utf-8")):
            return ApiError(401, "that is not this room's API key (ask the host)", "authentication_error", None,
                            "invalid_api_key", CHALLENGE), True
        return None


def access_for(where: Machine, *, bind: str, share: bool, key: str | None) -> Access:
    """The rule for this start: app.py passes its --host, --share, where it runs and the key its Config read."""
    if not where.on_space and not share and bind in LOOPBACK:
        return Access("open")
    return Access("key", key) if key else Access("unset")


__all__ = ["Access", "LOOPBACK", "access_for"]
