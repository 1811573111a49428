"""Every Sampling-lab setting as a link: a host prepares one URL per scenario and the room opens it.

    http://host:7860/?prompt=The+capital+of+France+is&temperature=0.5&top_p=0.9&seed=1

Pure functions: query parameters <-> control values. Unknown or bad parameters are reported, not fatal.
"""

from __future__ import annotations

from urllib.parse import urlencode

from model_service.settings import ORDERS

# query name -> (control key in build_sampling_lab's dict, parser)
FIELDS = {
    "prompt": ("prompt", str),
    "chat": ("chat", lambda v: v.lower() in ("1", "true", "yes", "on")),
    "temperature": ("temperature", float),
    "top_k": ("top_k", int),
    "top_p": ("top_p", float),
    "min_p": ("min_p", float),
    "seed": ("seed", lambda v: str(int(v)) if v.strip() else ""),
    "max_new_tokens": ("max_new_tokens", int),
    "stop": ("stop", str),
    "order": ("order", lambda v: v if v in ORDERS else _bad(v)),
}


def _bad(value):
    raise ValueError(value)


def parse_query(params: dict) -> tuple[dict, list[str]]:
    """(control key -> value, problems). Values are only typed here; the lab validates ranges on Generate."""
    values, problems = {}, []
    for name, raw in params.items():
        if name not in FIELDS:
            if name not in ("__theme", "view"):
                problems.append(f"unknown setting {name!r}")
            continue
        key, parse = FIELDS[name]
        try:
            values[key] = parse(raw)
        except (TypeError, ValueError):
            problems.append(f"{name}={raw!r} is not valid")
    return values, problems


def make_query(values: dict) -> str:
    """The query string for the current controls (defaults left out keeps links short)."""
    defaults = {"chat": False, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": "", "stop": "", "order": "hf"}
    out = {}
    for name, (key, _) in FIELDS.items():
        value = values.get(key)
        if value is None or value == defaults.get(key, object()):
            continue
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return urlencode(out)
