"""docs/layout.md's map of the house, checked against the tree so it cannot drift: every module of model_service/ and
playground/ is named under its folder's entry, and every module an entry names is there."""

from __future__ import annotations

import re

from ...conftest import ROOT

PACKAGES = ("model_service", "playground")


def entries() -> dict[str, str]:
    """The map's code block: folder (e.g. "model_service/records") -> the text of its entry, its own line and the
    lines that continue it. A top-level entry starts at column 0, a folder inside it at column 2."""
    block = re.search(r"^```\n(.*?)^```", (ROOT / "docs" / "layout.md").read_text(encoding="utf-8"), re.S | re.M)
    out: dict[str, str] = {}
    top = current = ""
    for line in block.group(1).splitlines():
        indent = len(line) - len(line.lstrip(" "))
        name = line.split()[0] if line.strip() else ""
        if indent == 0 and name:
            top = current = name.rstrip("/")
        elif indent == 2 and name:
            current = f"{top}/{name.rstrip('/')}" if name.endswith("/") else top  # a module: its package's
        out[current] = out.get(current, "") + " " + line
    return out


def named(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w./-])([a-z0-9_]+\.py)\b", text))


def modules() -> dict[str, set[str]]:
    """Each package folder's modules, by the folder that holds them in the map: a package's own subfolders; a module
    deeper than that (workshop/follow/seat.py) under the subfolder that contains it."""
    out: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "__init__.py":
                continue
            parts = path.relative_to(ROOT).parts
            folder = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
            out.setdefault(folder, set()).add(path.name)
    return out


def test_every_module_is_on_the_map_under_its_folder():
    docs = entries()
    missing = {folder: sorted(names - named(docs.get(folder, ""))) for folder, names in modules().items()}
    assert not {f: m for f, m in missing.items() if m}, missing


def test_every_module_the_map_names_is_in_its_folder():
    tree, docs = modules(), entries()
    stray = {folder: sorted(named(text) - tree[folder]) for folder, text in docs.items() if folder in tree}
    assert not {f: s for f, s in stray.items() if s}, stray
