"""The lab's controls after its sampler order, all off, as the page sends them (its Generate, Step, make_link and
host_publish events take every control in order): tests that call those events by position end with these."""

import json
import re

from playground.lab.request import DEFAULTS, KNOB_CONTROLS

KNOBS_OFF = [DEFAULTS[name] for name in KNOB_CONTROLS]
KNOBS_OFF_BY_NAME = {name: DEFAULTS[name] for name in KNOB_CONTROLS}
OFF_JSON = ", ".join(json.dumps(v) for v in KNOBS_OFF)  # the same, as a raw JSON call's data


def untagged(chips_html: str) -> str:
    """A run's chips without the tag of the stream that sent them (a streamed run's last update keeps it, for Stop:
    chips.STOP_JS); the same chips from a Step, a scrub or a run file carry none."""
    return re.sub(r' data-run="[0-9a-f]+"', "", chips_html)
