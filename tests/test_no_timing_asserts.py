"""No test asserts a wall-clock budget: a test waits for a condition, with a deadline that only fails a hang, and a
speed promise lives in bench/. A budget ("this took under 2 s") fails on a busy machine and passes on an idle one,
which makes it a flake by construction.

This scans every test module's syntax tree for an `assert` that compares a clock reading (time.time(),
time.monotonic(), time.perf_counter(), their _ns forms, or a name bound from an expression that reads one) as the
smaller side (a duration held under a number of seconds; tests/timing_assert_cases.txt has examples). A lower bound (a deliberate
delay the product promises) cannot fail because a machine is busy, so it is allowed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLOCKS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns", "process_time"}
SMALLER_LEFT = (ast.Lt, ast.LtE)  # left < right: the left side is bounded from above
SMALLER_RIGHT = (ast.Gt, ast.GtE)  # left > right: the right side is bounded from above


def _reads_clock(node: ast.AST, timed: set[str]) -> bool:
    """Whether an expression reads a clock, directly or through a name bound from one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in CLOCKS:
                return True
        if isinstance(sub, ast.Name) and sub.id in timed:
            return True
    return False


def _durations(scope: ast.AST) -> set[str]:
    """Names bound (in this function or module) to a difference that reads a clock: `elapsed = monotonic() - t0`.
    A bare reading (`started = monotonic()`) is a point in time, not a duration; it counts only inside a difference."""
    timed: set[str] = set()
    for _ in range(3):  # a duration computed from another (ms = elapsed * 1000)
        for sub in ast.walk(scope):
            if isinstance(sub, (ast.Assign, ast.AnnAssign)) and sub.value is not None:
                value = sub.value
                is_duration = (isinstance(value, ast.Name) and value.id in timed) or any(
                    isinstance(b, ast.BinOp) and (isinstance(b.op, ast.Sub) and _reads_clock(b, set()) or _names(b) & timed)
                    for b in ast.walk(value))
                if is_duration:
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    timed |= {t.id for t in targets if isinstance(t, ast.Name)}
    return timed


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def budget_asserts(source: str, filename: str = "<test>") -> list[str]:
    """`file:line` of every assert that bounds a clock reading from above."""
    tree = ast.parse(source, filename)
    found = []
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:
        timed = _durations(scope)
        for node in ast.walk(scope):
            if not isinstance(node, ast.Assert):
                continue
            for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                sides = [cmp.left, *cmp.comparators]
                for i, op in enumerate(cmp.ops):
                    bounded = sides[i] if isinstance(op, SMALLER_LEFT) else sides[i + 1] if isinstance(
                        op, SMALLER_RIGHT) else None
                    if bounded is not None and _reads_clock(bounded, timed) and not _is_bare_reading(bounded):
                        found.append(f"{filename}:{node.lineno}")
    return sorted(set(found))


def _is_bare_reading(node: ast.AST) -> bool:
    """`time.monotonic() < deadline` compares two points in time (a loop's guard written as an assert), not a
    duration against a budget."""
    return isinstance(node, ast.Call)


def test_no_test_asserts_a_wall_clock_budget():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += budget_asserts(path.read_text(), str(path.relative_to(TESTS.parent)))
    assert not found, ("these asserts bound a wall-clock time from above; wait for the condition instead (a deadline "
                       "that only fails a hang) and put the speed promise in bench/:\n  " + "\n  ".join(found))


CASES = TESTS / "timing_assert_cases.txt"


def cases(kind: str) -> list[str]:
    """The example modules of one kind from CASES (a line '=== <kind>' opens each; CHECK stands for assert)."""
    lines = (line.replace("CHECK ", "assert ", 1) for line in CASES.read_text().splitlines() if not line.startswith("#"))
    text = "\n".join(lines)
    return [body.split("\n", 1)[1] for body in text.split("=== ")[1:] if body.startswith(kind + "\n")]


@pytest.mark.parametrize("source", cases("budget"))
def test_the_scan_finds_a_budget(source):
    line = next(i for i, text in enumerate(source.splitlines(), 1) if text.strip().startswith("assert"))
    assert budget_asserts(source) == [f"<test>:{line}"]


@pytest.mark.parametrize("source", cases("allowed"))
def test_the_scan_lets_a_lower_bound_or_a_deadline_pass(source):
    assert budget_asserts(source) == []


def test_the_cases_are_all_read():
    assert len(cases("budget")) == 5 and len(cases("allowed")) == 5
