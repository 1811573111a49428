"""The room registry: codes, the host's token, expiry, the bound on rooms."""

import pytest

from model_service.records.validation import InputError, Unavailable
from playground import limits
from playground.workshop.follow_rooms import FollowRooms, normalise_code


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_codes_are_short_and_free_of_letters_people_confuse():
    registry = FollowRooms(max_rooms=200)
    codes = {registry.open()[0] for _ in range(200)}
    assert len(codes) == 200  # unique
    for code in codes:
        assert len(code) == limits.FOLLOW_CODE_LENGTH
        assert set(code) <= set(limits.FOLLOW_CODE_ALPHABET)
    assert not set("0O1IL5S2Z8BUV") & set(limits.FOLLOW_CODE_ALPHABET)


@pytest.mark.parametrize("typed", [" 4kx7p ", "4KX-7P", "4k x7p"])
def test_a_code_is_read_as_typed_on_a_phone(typed):
    assert normalise_code(typed) == "4KX7P"


@pytest.mark.parametrize("typed", ["", "4KX7", "4KX7PP", "4KX0P", "<b>x</b>", None, 12345])
def test_a_bad_code_is_refused_naming_the_field(typed):
    with pytest.raises(InputError, match="room code must be 5 letters"):
        normalise_code(typed)


def test_only_the_hosts_token_publishes_and_closes():
    registry = FollowRooms()
    code, token = registry.open({"tab": "lab"})
    assert registry.snapshot(code).state == {"tab": "lab"}
    with pytest.raises(InputError, match=f"only the host of room {code}"):
        registry.publish(code, "guess", {"tab": "engine"})
    with pytest.raises(InputError, match="only the host"):
        registry.publish(code, None, {"tab": "engine"})
    with pytest.raises(InputError, match="only the host"):
        registry.close(code, token[:-1])
    assert registry.snapshot(code).state == {"tab": "lab"}
    other_code, other_token = registry.open()
    with pytest.raises(InputError, match="only the host"):  # another room's token is not this room's
        registry.publish(code, other_token, {"tab": "engine"})
    registry.publish(code, token, {"tab": "engine"})
    assert registry.snapshot(code.lower()).state == {"tab": "engine"}
    registry.close(code, token)
    with pytest.raises(InputError, match=f"there is no open room {code}"):
        registry.snapshot(code)


def test_the_version_bumps_only_on_a_change_and_the_run_separately():
    registry = FollowRooms()
    code, token = registry.open({"tab": "lab"})
    v0 = registry.version(code)
    assert registry.publish(code, token, {"tab": "lab"}) == v0  # the host's timer sends the same state: no redraw
    assert registry.publish(code, token, {"tab": "lab", "step": "1"}) == v0 + 1
    records = [object(), object()]
    v2 = registry.publish(code, token, run=records)
    snap = registry.snapshot(code)
    assert v2 == v0 + 2 and snap.run_version == 1 and snap.run == tuple(records)
    assert registry.publish(code, token, {"tab": "lab", "step": "1"}, run=list(records)) == v2  # same objects
    assert registry.publish(code, token, run=None) == v2 + 1 and registry.snapshot(code).run_version == 2
    snap.state["tab"] = "x"  # a follower's copy: the room is not changed through it
    assert registry.snapshot(code).state["tab"] == "lab"


def test_an_idle_room_expires_and_a_publishing_host_keeps_it_open():
    clock = Clock()
    registry = FollowRooms(idle_seconds=60, clock=clock)
    kept, token = registry.open()
    idle, _ = registry.open()
    clock.now += 50
    registry.publish(kept, token, {"tab": "lab"})
    clock.now += 30
    assert registry.version(idle) is None and registry.version(kept) is not None
    with pytest.raises(InputError, match="no open room"):
        registry.snapshot(idle)
    assert len(registry) == 1
    clock.now += 61
    assert len(registry) == 0
    with pytest.raises(InputError, match="no open room"):
        registry.publish(kept, token, {"tab": "lab"})


def test_the_number_of_rooms_is_bounded_and_expired_rooms_make_way():
    clock = Clock()
    registry = FollowRooms(max_rooms=3, idle_seconds=60, clock=clock)
    for _ in range(3):
        registry.open()
    with pytest.raises(Unavailable, match="already has 3 open rooms"):
        registry.open()
    clock.now += 61
    assert registry.open()[0]


def test_the_host_sees_how_many_pages_follow():
    registry = FollowRooms()
    code, token = registry.open()
    registry.join(code)
    registry.join(code)
    registry.leave(code)
    assert registry.followers(code) == 1
    registry.leave(code)
    registry.leave(code)  # a stream that ends twice never counts below zero
    assert registry.followers(code) == 0
    registry.close(code, token)
    registry.leave(code)  # a stream ending after its room closed
    assert registry.followers(code) == 0


def test_a_reloaded_hosts_page_resumes_with_its_token_only():
    clock = Clock()
    registry = FollowRooms(idle_seconds=60, clock=clock)
    code, token = registry.open({"tab": "engine"})
    registry.publish(code, token, run=[object()])
    clock.now += 50
    snap = registry.resume(code.lower(), token)  # the key as the tab kept it
    assert (snap.code, snap.state, snap.run_version) == (code, {"tab": "engine"}, 1)
    clock.now += 50  # resuming touched the room: it is still open 100 s after the last publish
    assert registry.version(code) is not None
    for wrong in ("", token[:-1], None, "x" * 5000, registry.open()[1]):
        with pytest.raises(InputError, match=f"only the host of room {code}"):
            registry.resume(code, wrong)
    with pytest.raises(InputError, match="room code must be"):
        registry.resume("<b>", token)
    clock.now += 61
    with pytest.raises(InputError, match=f"there is no open room {code}"):
        registry.resume(code, token)


def test_a_state_too_long_or_not_text_is_refused_naming_its_size_and_the_room_keeps_the_last():
    registry = FollowRooms()
    code, token = registry.open({"tab": "lab"})
    big = {"prompt": "x" * limits.MAX_FOLLOW_STATE_CHARS}
    with pytest.raises(InputError, match=f"has {limits.MAX_FOLLOW_STATE_CHARS + 6} characters, more than a room carries"):
        registry.publish(code, token, big)
    with pytest.raises(InputError, match="more than a room carries"):
        registry.open(big)
    with pytest.raises(InputError, match="must be a dict of text fields, got list"):
        registry.publish(code, token, ["tab", "lab"])
    with pytest.raises(InputError, match="must be a dict of text fields, got dict"):
        registry.publish(code, token, {"step": 3})
    assert registry.snapshot(code).state == {"tab": "lab"}
    registry.publish(code, token, {"prompt": "x" * (limits.MAX_FOLLOW_STATE_CHARS - 6)})  # exactly the limit
