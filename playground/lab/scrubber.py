"""The lab's scrubber counts steps from 1, as every label a person reads does ("step 3 of 48"); records,
rooms and branch paths index them from 0. These two functions are the only crossing between the two."""

from __future__ import annotations

import gradio as gr


def scrub_update(records, index: int | None = None, **extra):
    """The scrubber for a run's records, showing `index` (0-based; None: the last step)."""
    n = len(records)
    value = n if index is None else index + 1
    return gr.update(minimum=1, maximum=max(n, 2), value=value, step=1, interactive=n > 1, visible=n > 0, **extra)


def scrub_index(value, records) -> int | None:
    """The 0-based step a scrubber value shows, or None when it shows no step of these records."""
    try:
        i = int(value) - 1
    except (TypeError, ValueError):
        return None
    return i if 0 <= i < len(records) else None
