"""`make test`'s runner: pytest, and a summary even when pytest cannot print its own.

pytest prints its summary when it ends normally or on Ctrl-C. When its process dies instead (killed by the kernel
for memory, a crash in native code, an `os._exit` in a library), a run just stops mid-line and make says
"Error 1" or "Killed". Then this reads artifacts/pytest-progress.log (written by tests/reporting.py as the run
goes) and says what pytest could not: how it ended, the test that was running, and what had failed before it.

    python scripts/run_tests.py [pytest arguments]
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRESS = ROOT / "artifacts" / "pytest-progress.log"
FINISHED = "session finished"  # tests/reporting.py's last line


def how_it_ended(code: int) -> str:
    if code < 0:
        name = signal.Signals(-code).name
        why = " (the kernel's out-of-memory killer sends this; see `dmesg`)" if name == "SIGKILL" else ""
        return f"pytest was killed by {name}{why}"
    return f"pytest exited with status {code} without printing its summary (a library called os._exit or exit)"


def explain(code: int, lines: list[str]) -> str:
    """What the progress log says about a run that ended without pytest's summary."""
    collected = next((line.split()[1] for line in lines if line.startswith("collected ")), "?")
    started = [line.split(" ", 1)[1] for line in lines if line.startswith("start ")]
    outcomes = [line.split(" ", 2) for line in lines if not line.startswith(("start ", "collected "))]
    done = {nodeid for _, _, nodeid in outcomes}
    counts = Counter(kind for kind, when, _ in outcomes if when == "call" or kind != "passed")
    failed = [f"  {when:8} {nodeid}" for kind, when, nodeid in outcomes if kind == "failed"]
    running = started[-1] if started and started[-1] not in done else None
    report = [
        "",
        "=" * 30 + " the run ended without pytest's summary " + "=" * 30,
        how_it_ended(code) + ".",
        f"It was running: {running}" if running else "It stopped between tests.",
        f"Tests started: {len(started)} of {collected}; "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) + ".",
    ]
    if failed:
        report += ["Failed before it stopped (each has artifacts/failures/<test>/):", *failed]
    report.append(f"The whole progress log: {PROGRESS.relative_to(ROOT)}")
    return "\n".join(report)


def main(argv: list[str]) -> int:
    PROGRESS.unlink(missing_ok=True)
    pytest = subprocess.Popen([sys.executable, "-m", "pytest", *argv], cwd=ROOT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is pytest's to handle (it prints its summary); wait for it
    code = pytest.wait()
    # each line: seconds since the start, then what happened (tests/reporting.py)
    lines = [line.split(maxsplit=1)[1] for line in PROGRESS.read_text(encoding="utf-8").splitlines()
             if len(line.split(maxsplit=1)) == 2] if PROGRESS.exists() else []
    ended = any(line.startswith(FINISHED) for line in lines)
    if not ended and (lines or code < 0):  # no lines and a status: pytest said why itself
        print(explain(code, lines), file=sys.stderr, flush=True)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
