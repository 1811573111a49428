"""Waiting in tests: for a condition, never for a budget. Each deadline here only fails a hang (a test that fails on
a busy machine but not on an idle one is a bug), so it is minutes, not seconds; a speed promise lives in bench/."""

from __future__ import annotations

import threading
import time

HANG_SECONDS = 180.0  # far beyond any honest wait on CI's two loaded cores; reached only when something hangs


def wait_until(condition, what: str = "the condition", timeout: float = HANG_SECONDS, interval: float = 0.01):
    """Poll `condition` until it returns something truthy, which is returned; fail naming `what` on a hang."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never came true in {timeout:.0f} s (a hang)")
        time.sleep(interval)
    return value


def finishes(call, what: str = "the call", timeout: float = HANG_SECONDS):
    """Run `call()` in a thread and return its result (or raise its exception); fail naming `what` if it hangs,
    rather than hanging the whole suite."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as e:  # handed to the test's thread below
            outcome["error"] = e

    worker = threading.Thread(target=run, daemon=True, name=f"finishes: {what}")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise AssertionError(f"{what} did not finish in {timeout:.0f} s (a hang)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
