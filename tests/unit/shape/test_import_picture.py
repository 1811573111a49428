"""The boundary is the service against the page, not torch against the rest: the service names no page concept,
the HTTP API reaches no tab's or workshop's module, and the start is configured once."""

from __future__ import annotations

import ast
import re

from .test_shape import graph, sources

# what only the page knows: follow rooms and their codes, the host's key, run files, scenes, the lessons' prompt,
# the tabs' sizes, links, Gradio's queue, the HTTP API's caps
PAGE_WORD = re.compile(r"(?i)(follow_room|room_code|host_key|run_file|scene|lesson_prompt)")
PAGE_LIMIT = re.compile(r"^(FOLLOW|COMPARE|FORWARD|TOY|LINK|GRADIO|API)_|ENGINE_ROWS|MODEL_WATCH|KNIFE_EDGE|HOST_PUBLISH")
PAGE_VARIABLES = ("NTP_HOST", "NTP_PORT", "NTP_SHARE", "NTP_LANG", "NTP_HOST_KEY", "NTP_SERVICE", "NTP_SCENES",
                  "NTP_API_KEY")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def named(tree: ast.AST) -> list[str]:
    """What a module names in its code: identifiers, attributes, definitions, arguments and string constants
    (docstrings and comments are prose, not names)."""
    prose, names = _docstrings(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.arg):
            names.append(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.append(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            names.extend(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
    return names


def page_concepts(source: str) -> list[str]:
    return sorted({name for name in named(ast.parse(source))
                   if PAGE_WORD.search(name) or PAGE_LIMIT.search(name) or name in PAGE_VARIABLES})


def test_no_service_module_names_a_page_concept():
    found = {name: hits for name, path in sources().items() if name.startswith("model_service")
             if (hits := page_concepts(path.read_text(encoding="utf-8")))}
    assert not found, f"the service names the page's concepts: {found}"


def test_the_scan_finds_a_page_concept_where_one_is_named():
    assert page_concepts("ROOM_CODE_LENGTH = 5") == ["ROOM_CODE_LENGTH"]
    assert page_concepts('MESSAGES = {"host_key": "host key: that is not the host key"}') == ["host_key"]
    assert page_concepts("def load(scene_paths): pass") == ["scene_paths"]
    assert page_concepts("forward_ms = 1.0; MAX_ROWS_CPU = 16") == []
    assert page_concepts('SHARE = "NTP_SHARE"') == ["NTP_SHARE"]
    assert page_concepts('"""A room code is read aloud (prose)."""\n# a scene\nx = 1') == []


def test_the_http_api_imports_no_tab_and_no_workshop_module():
    edges, reached = graph(), set()
    todo = [name for name in edges if name.startswith("playground.openai_api")]
    while todo:  # everything it imports, and what those import
        name = todo.pop()
        for target in edges.get(name, ()):
            if target not in reached:
                reached.add(target)
                todo.append(target)
    tabs = ("playground.lab", "playground.workshop", "playground.softmax", "playground.engine", "playground.compare",
            "playground.forward", "playground.page")
    bad = sorted(t for t in reached if t.startswith(tabs))
    assert not bad, f"the HTTP API reaches page modules: {bad}"


def test_the_start_reads_its_configuration_once():
    """app.py takes its flags and the page's variables from one Config (playground/config.py); nothing below it
    reads a page variable or parses flags of its own."""
    readers = {name for name, path in sources().items()  # a string that is a page variable's name: where it is read
               if any(isinstance(node, ast.Constant) and node.value in PAGE_VARIABLES
                      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))}
    assert readers == {"playground.config"}, readers
    parsers = {name for name, path in sources().items() if "argparse" in path.read_text(encoding="utf-8")}
    # the start's (app.py asks config.py), and the service's two programs of its own (its command line, Ray Serve)
    assert parsers == {"playground.config", "model_service.__main__", "model_service.deploy.ray_serve"}, parsers
