"""A failure explains itself: this pytest plugin keeps what a reader of a failed run needs under artifacts/.

- artifacts/pytest-progress.log: one line as each test starts and one as each ends (seconds since the start
  first), flushed at once, and a last line when the session ends. If the process dies without pytest's summary (killed, out of memory, a crash in
  native code, an os._exit), scripts/run_tests.py reads this file and says which test was running and what had
  failed before it.
- artifacts/failures/<test>/output.txt for each failed test: the error, then everything the test and the app
  under test (which runs in this process) printed and logged meanwhile; app-log.txt: the last 300 log records of
  the whole session up to the failure (the app's, the server's, the model service's), so what went wrong while a
  shared app was being set up for earlier tests shows too. Browser tests add a screenshot and a Playwright trace
  of each open page (tests/browser/conftest.py, through `failure_folder`).
- At the end, the folders of the failed tests are listed after the summary.
"""

from __future__ import annotations

import collections
import logging
import re
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
PROGRESS = ARTIFACTS / "pytest-progress.log"
FAILURES = ARTIFACTS / "failures"
FINISHED = "session finished"
_written: dict[str, Path] = {}  # nodeid -> its failure folder, in order of failure
_progress = None
_started = time.monotonic()
APP_LOGGERS = ("model_service", "playground", "app", "gradio", "uvicorn", "ray")  # kept at INFO


class LogTail(logging.Handler):
    """The last records the process logged: the app's and its server's at INFO, anyone's at WARNING."""

    def __init__(self, size: int = 300):
        super().__init__(logging.INFO)
        self.records = collections.deque(maxlen=size)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record):
        if record.levelno >= logging.WARNING or record.name.split(".")[0] in APP_LOGGERS:
            self.records.append(self.format(record))


_log_tail = LogTail()


def failure_folder(nodeid: str) -> Path:
    """The folder that keeps one failed test's artifacts (made on first use)."""
    folder = _written.get(nodeid)
    if folder is None:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.replace("tests/", "", 1)).strip("_")[:150]
        folder = _written[nodeid] = FAILURES / name
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def discard(nodeid: str) -> None:
    """Forget a test's failure folder: what was kept for it while it ran, and it passed after all."""
    folder = _written.pop(nodeid, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _note(line: str) -> None:
    if _progress is not None:
        _progress.write(f"{time.monotonic() - _started:9.1f} {line}\n")
        _progress.flush()


def pytest_configure(config):
    global _progress
    shutil.rmtree(FAILURES, ignore_errors=True)  # the last run's failures are not this run's
    ARTIFACTS.mkdir(exist_ok=True)
    _progress = PROGRESS.open("w", encoding="utf-8", buffering=1)
    logging.getLogger().addHandler(_log_tail)
    for name in APP_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)


def pytest_collection_finish(session):
    _note(f"collected {len(session.items)}")


def pytest_runtest_logstart(nodeid, location):
    _note(f"start {nodeid}")


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _note(f"{report.outcome} {report.when} {report.nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        folder = failure_folder(item.nodeid)
        parts = [f"{item.nodeid} failed in {report.when}\n\n{report.longreprtext}\n"]
        parts += [f"\n----- {title} -----\n{text}" for title, text in report.sections]
        with (folder / "output.txt").open("a", encoding="utf-8") as out:
            out.write("".join(parts))
        (folder / "app-log.txt").write_text("\n".join(_log_tail.records) + "\n", encoding="utf-8")


def pytest_sessionfinish(session, exitstatus):
    _note(f"{FINISHED} {int(exitstatus)}")


def pytest_unconfigure(config):
    global _progress
    if _progress is not None:
        _progress.close()
        _progress = None
    logging.getLogger().removeHandler(_log_tail)


def pytest_terminal_summary(terminalreporter):
    if _written:
        terminalreporter.section("artifacts of the failed tests")
        for nodeid, folder in _written.items():
            files = ", ".join(sorted(p.name for p in folder.iterdir()))
            terminalreporter.write_line(f"{nodeid}\n    {folder.relative_to(ROOT)}/: {files}")
