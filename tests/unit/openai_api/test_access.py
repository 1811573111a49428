"""Who may call the API (playground/openai_api/access.py): open on this machine only, the host's key in a room,
closed in a room with no key."""

from __future__ import annotations

import pytest

from playground.hosting import Machine
from playground.openai_api import Access, access_for

SPACE = Machine(space_id="teacher/next-token")


@pytest.mark.parametrize("where, bind, share, key, mode", [
    (Machine(), "127.0.0.1", False, None, "open"),
    (Machine(), "localhost", False, "k", "open"),
    (Machine(), "0.0.0.0", False, "k", "key"),
    (Machine(), "0.0.0.0", False, None, "unset"),
    (Machine(), "192.168.1.20", False, None, "unset"),
    (Machine(), "127.0.0.1", True, "k", "key"),  # a public --share link reaches it from anywhere
    (SPACE, "127.0.0.1", False, None, "unset"),
    (SPACE, "0.0.0.0", False, "k", "key"),
])
def test_the_rule(where, bind, share, key, mode):
    assert access_for(where, bind=bind, share=share, key=key).mode == mode


def test_a_room_takes_only_its_key():
    access = Access("key", "s3cret")
    assert access.refusal("Bearer s3cret") is None and access.refusal("bearer  s3cret ") is None
    missing, slow = access.refusal(None)
    assert missing.status == 401 and missing.code == "missing_api_key" and not slow
    wrong, slow = access.refusal("Bearer s3cre")
    assert wrong.status == 401 and wrong.code == "invalid_api_key" and slow  # a wrong key waits before its answer
    assert access.refusal("Basic s3cret")[0].status == 401
    assert missing.headers == {"WWW-Authenticate": "Bearer"}


def test_a_room_without_a_key_says_the_host_must_set_one():
    error, _ = Access("unset").refusal("Bearer anything")
    assert error.status == 403 and "NTP_API_KEY" in error.message


def test_on_this_machine_it_is_open():
    assert Access("open").refusal(None) is None
