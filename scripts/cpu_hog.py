"""Keep one core busy for a while, then stop by itself: the loaded machine a flaky test needs to show itself.

    python scripts/cpu_hog.py 3600 &   # one busy core for an hour (or until killed)
    make test

A test that passes on an idle machine and fails beside this is a bug in the test or in the product (docs/testing.md).
"""

from __future__ import annotations

import sys
import time


def hog(seconds: float) -> int:
    """Spin one core until `seconds` have passed; returns the loops spun (so the work is not optimised away)."""
    end = time.monotonic() + seconds
    loops = 0
    while time.monotonic() < end:
        for _ in range(10_000):
            loops += 1
    return loops


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1800.0
    if not 0 < seconds <= 6 * 3600:
        sys.exit("error: seconds must be between 0 and 21600 (six hours): the hog must stop by itself")
    print(f"cpu_hog: one core busy for {seconds:.0f} s", flush=True)
    hog(seconds)
