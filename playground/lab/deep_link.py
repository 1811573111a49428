"""Every Sampling-lab setting as a link: a host prepares one URL per scenario and the room opens it.

    http://host:7860/?prompt=The+capital+of+France+is&temperature=0.5&top_p=0.9&seed=1&lang=vi

Pure functions: query parameters <-> control values, checked with the same validators as the lab's
Generate and within the sliders' ranges. A bad or unknown parameter is reported (the page warns, naming
it) and the control keeps its default; it is never fatal. Problems quote the visitor's text: the page
escapes them before showing them (links are shared with strangers).
"""

from __future__ import annotations

from dataclasses import replace

from model_service.records import validation
from model_service.records.knobs import KNOBS
from model_service.records.settings import ORDERS, parse_chain
from playground import limits

from ..common.errors import in_language
from ..common.i18n import tr
from ..common.lab_link import LINK_FIELDS, run_controls
from .branches import SWITCHABLE, Switch, format_path, parse_path
from .request import SLIDERS, RunRequest, parse_request

IGNORED = ("__theme", "view", "lang", "follow", "present")  # Gradio's and the page's own (the page reads lang and present, the room follow)


def _ranged(name: str, integer: bool = False):
    low, high, _ = SLIDERS[name]
    return lambda v: validation.number(name, v, integer=integer, low=low, high=high)


# the text knobs' readers: a link's text -> the control's text
TEXT_FIELDS = {
    "logit_bias": lambda v: validation.format_logit_bias(validation.logit_bias("logit_bias", v)),
    "dry_sequence_breakers": lambda v: validation.format_stop_text(validation.strings(
        "dry_sequence_breakers", v, limit=limits.MAX_DRY_BREAKERS, chars=limits.MAX_DRY_BREAKER_CHARS)),
    "chain": lambda v: ", ".join(parse_chain("chain", v)),
}


def _knob_field(knob):
    """A knob's reader: within its slider where it has one, else within the API's range; the text knobs' own."""
    if knob.control == "text":
        return TEXT_FIELDS[knob.name]
    if knob.slider is not None:
        return _ranged(knob.name, integer=knob.integer)
    return lambda v: validation.number(knob.name, v, **knob.range)


# query name = the control's key -> parser of the raw text (raises ValueError naming the parameter)
FIELDS = {
    "prompt": lambda v: validation.text("prompt", v),
    "chat": lambda v: validation.boolean("chat", v),
    "temperature": _ranged("temperature"),
    "top_k": _ranged("top_k", integer=True),
    "top_p": _ranged("top_p"),
    "min_p": _ranged("min_p"),
    "seed": lambda v: "" if validation.seed("seed", v) is None else str(validation.seed("seed", v)),
    "max_new_tokens": _ranged("max_new_tokens", integer=True),
    "stop": lambda v: validation.format_stop_text(validation.parse_stop_text("stop", v)),
    "order": lambda v: validation.choice("order", v, ORDERS),
    **{knob.name: _knob_field(knob) for knob in KNOBS if knob.group != "lesson"},
    # forced tokens (step:token_id) and switched settings (step@name=value;...), lab/branches.py
    "branch": lambda v: format_path(parse_path(v, check=link_value)),
}
# the lab's controls a link sets, by name (a link's branch= is no control: the Branches panel runs it)
CONTROLS = tuple(name for name in FIELDS if name != "branch")
assert tuple(FIELDS) == LINK_FIELDS  # the link a run makes (common/lab_link.py) is the link this reads


def parse_query(params: dict) -> tuple[dict, list[str]]:
    """(control key -> value, problems). Each problem names the parameter and says why, in the link's
    language (its `lang`; English without one)."""
    lang = params.get("lang")
    values, problems = {}, []
    for name, raw in params.items():
        if name not in FIELDS:
            if name not in IGNORED:
                problems.append(tr(lang, "lab.link.unknown", name=repr(name), known=", ".join(FIELDS)))
            continue
        try:
            values[name] = FIELDS[name](raw)
        except ValueError as e:
            problems.append(tr(lang, "lab.link.kept", error=in_language(e, lang)))
    return values, problems


def check_controls(values: dict) -> dict:
    """The controls' values, each checked as a link would check it (FIELDS): a ValueError names the first bad
    one. A blank box is left out of a link, so it passes as it is."""
    for name, value in values.items():
        if name in FIELDS and not (value is None or (isinstance(value, str) and not value.strip())):
            FIELDS[name](value)
    return values


def link_value(name: str, value: str):
    """A control's value read as a link reads it (FIELDS): a branch's switch of settings is checked so."""
    return FIELDS[name](value)


def controls_of(request: RunRequest) -> dict:
    """The lab's control values (its keys) that make this request, as the boxes show them."""
    return run_controls(request.prompt, request.chat, request.settings, request.max_new_tokens, request.stop)


def switched(root: RunRequest, switch: Switch | None) -> RunRequest:
    """The root's request with a switch's controls (checked as a link's, then as Generate reads them), its seed
    kept. None: the root's."""
    if switch is None:
        return root
    controls = controls_of(root) | {name: FIELDS[name](value) for name, value in switch.controls}
    request = parse_request(**controls)
    return replace(request, settings=request.settings.with_seed(root.settings.seed))


def switch_between(root: RunRequest, request: RunRequest) -> Switch | None:
    """The switch from the root's request to `request` (the controls that differ, as a link writes them); None when
    nothing but the seed differs."""
    theirs, mine = controls_of(root), controls_of(request)
    changed = tuple((name, str(mine[name]).lower() if isinstance(mine[name], bool) else str(mine[name]))
                    for name in SWITCHABLE if mine[name] != theirs[name])
    return Switch(changed) if changed else None
