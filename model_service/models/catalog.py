"""The models a host may offer in the model picker, and the allowlist a room actually gets.

One model serves the whole room, so the picker never takes free text: a visitor can only choose a key
from the allowlist, and the allowlist is the host's (a flag or NTP_MODELS), never a visitor's. Nothing
here enables trust_remote_code (loading.load never does).

The two offline models run everywhere. Where their packages are not installed (a Hugging Face Space
installs requirements.txt only), the same models come from the Hub instead. The larger ones need a GPU;
the gated ones (Gemma on the Hub, Llama) need a token that has accepted their licence (HF_TOKEN).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

# loading.py (the offline packages, aliases) imports torch: it is imported where needed, so the UI can read
# labels and check a choice without torch.


@dataclass(frozen=True)
class Entry:
    key: str  # what the picker sends and NTP_MODELS lists
    label: str  # what the picker shows
    hub_id: str  # the Hugging Face repository (README front matter: models, preload_from_hub)
    embedded: str | None = None  # the offline package's short name in loading.EMBEDDED, if any
    gpu: bool = False  # offered by default only where a GPU serves the room
    gated: bool = False  # needs HF_TOKEN with the licence accepted
    note: str = ""

    def offline(self) -> bool:
        """Its offline package is installed here (then no download and no token are needed)."""
        if self.embedded is None:
            return False
        from .loading import EMBEDDED

        return importlib.util.find_spec(EMBEDDED[self.embedded].package) is not None

    def needs_token(self) -> bool:
        return self.gated and not self.offline()


CATALOG: dict[str, Entry] = {e.key: e for e in (
    Entry("smollm2", "SmolLM2-135M-Instruct (offline, English)", "HuggingFaceTB/SmolLM2-135M-Instruct",
          embedded="smollm2", note="the embedded default: tiny, fast on a CPU"),
    Entry("gemma3-270m", "Gemma-3-270M (offline, multilingual: the Vietnamese choice)", "google/gemma-3-270m",
          embedded="gemma3-270m", gated=True, note="adds a begin marker; vocabulary of 262,144"),
    Entry("qwen2.5-1.5b", "Qwen2.5-1.5B-Instruct (multilingual)", "Qwen/Qwen2.5-1.5B-Instruct", gpu=True),
    Entry("smollm2-1.7b", "SmolLM2-1.7B-Instruct (English)", "HuggingFaceTB/SmolLM2-1.7B-Instruct", gpu=True),
    Entry("llama-3.2-1b", "Llama-3.2-1B (gated)", "meta-llama/Llama-3.2-1B", gpu=True, gated=True),
    Entry("llama-3.1-8b", "Llama-3.1-8B (gated: the lessons' own model)", "meta-llama/Llama-3.1-8B", gpu=True, gated=True),
)}
SPACE_GPU_MODEL = "qwen2.5-1.5b"  # a Space's default on a GPU: not gated, multilingual, 3 GB at bf16


def canonical(name: str) -> str:
    """A catalog key for a catalog key, an alias or the hub id of a catalog entry; anything else as given."""
    from .loading import ALIASES

    text = name.strip()
    short = ALIASES.get(text.lower(), text.lower())
    if short in CATALOG:
        return short
    for entry in CATALOG.values():
        if entry.hub_id.lower() == text.lower():
            return entry.key
    return text


def default_allowlist(*, gpu: bool, token: bool) -> tuple[str, ...]:
    """The offline two everywhere (Gemma from the Hub only with a token); on a GPU also the larger ones,
    gated ones only with a token."""
    keys = []
    for entry in CATALOG.values():
        if entry.gpu and not gpu:
            continue
        if entry.needs_token() and not token:
            continue
        keys.append(entry.key)
    return tuple(keys)


def parse_allowlist(spec: str | None, *, start: str | None, gpu: bool, token: bool) -> tuple[str, ...]:
    """The host's list (comma-separated catalog keys, Hub ids or directories; blank = the defaults for
    this machine), with the start model first. Duplicates are dropped; order is kept."""
    from .loading import DEFAULT_MODEL

    if spec is not None and spec.strip():
        keys = [canonical(part) for part in spec.split(",") if part.strip()]
    else:
        keys = list(default_allowlist(gpu=gpu, token=token))
    first = canonical(start) if start and start.strip() else DEFAULT_MODEL
    return tuple(dict.fromkeys([first, *keys]))


def label(key: str) -> str:
    entry = CATALOG.get(key)
    return entry.label if entry else key


def load_target(key: str) -> str:
    """What loading.load takes for a key: the offline package's short name where it is installed, else
    the Hub id; a host's own Hub id or directory as given."""
    entry = CATALOG.get(key)
    if entry is None:
        return key
    return entry.embedded if entry.offline() else entry.hub_id


def choose(field: str, value, allowlist) -> str:
    """A visitor's choice: exactly one of the allowlist's keys, or a ValueError naming the field. The
    message lists the choices by key only: never echo free text back as a model to load."""
    from ..records.validation import InputError

    if not isinstance(value, str) or value not in allowlist:
        shown = repr(value) if isinstance(value, str) and len(value) <= 60 else type(value).__name__
        raise InputError("model_choice", field=field, choices=", ".join(allowlist), got=shown)
    return value


__all__ = ["CATALOG", "Entry", "SPACE_GPU_MODEL", "canonical", "choose", "default_allowlist", "label",
           "load_target", "parse_allowlist"]
