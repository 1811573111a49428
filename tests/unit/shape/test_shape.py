"""The house's shape, checked: no import cycle (imports inside functions count), the page imports only the
torch-free records, the client interface and the catalog of model_service, no module over 400 lines, no
function over 100, and the environment read in one module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ...conftest import ROOT

PACKAGES = ("model_service", "playground")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 100
# what the page may import of model_service: the torch-free contract, the client interface, the catalog,
# the limits and the environment's reader (docs/layout.md)
PAGE_MAY_IMPORT = ("model_service", "model_service.records", "model_service.client", "model_service.limits",
                   "model_service.env", "model_service.models.catalog")


def sources() -> dict[str, Path]:
    """module name -> file, for app.py and both packages"""
    out = {"app": ROOT / "app.py"}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports, anywhere in it (top level or inside a function)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                   for n in ast.walk(block)}  # imports for annotations only: not run, so no cycle
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    modules = sources()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def test_no_import_cycle():
    edges = graph()
    # a package's __init__ is not an import of its modules' content: drop edges to bare package names
    packages = {n for n, p in sources().items() if p.name == "__init__.py"}
    edges = {n: {t for t in ts if t not in packages} for n, ts in edges.items()}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_page_imports_only_the_contract_the_client_and_the_catalog():
    bad = {}
    for name, targets in graph().items():
        if name.startswith("playground") or name == "app":
            if name == "app":
                continue  # the start script builds the service: it is the one place that may
            reaching = sorted(t for t in targets if t.startswith("model_service")
                              and not any(t == ok or t.startswith(ok + ".") and ok == "model_service.records"
                                          for ok in PAGE_MAY_IMPORT))
            if reaching:
                bad[name] = reaching
    assert not bad, f"the page reaches into the service: {bad}"


def test_no_module_over_400_lines_and_no_function_over_100():
    long_modules, long_functions = [], []
    for name, path in sources().items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{name} ({len(text.splitlines())})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}.{node.name} ({length})")
    assert not long_modules, f"modules over {MAX_MODULE_LINES} lines: {long_modules}"
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"


def test_the_environment_is_read_in_one_module():
    readers = [name for name, path in sources().items()
               if re.search(r"os\.environ|os\.getenv|getenv\(", path.read_text(encoding="utf-8"))]
    assert readers == ["model_service.env"], readers
