"""The house style is checked with the tests: `ruff check` over the whole project (config: ruff.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from .conftest import ROOT


def test_ruff_check_is_clean():
    ruff = shutil.which("ruff", path=str(ROOT / ".venv" / "bin")) or shutil.which("ruff")
    command = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    out = subprocess.run([*command, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_module_grows_past_400_lines():
    too_long = {}
    for folder in ("model_service", "playground"):
        for path in (ROOT / folder).rglob("*.py"):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > 400:
                too_long[str(path.relative_to(ROOT))] = n
    assert too_long == {}
