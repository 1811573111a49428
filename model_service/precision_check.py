"""What a precision does to the next token, as the in-process service answers it (forward_pass/precision_effect.py):
the model at the precision asked for beside the same weights in float32.

The model as it runs is one side when it is asked about its own precision (or runs in float32); the other sides are
copies on the CPU, made the first time they are asked for: the model reloaded as it was loaded (models/loading.py),
at that precision, as a host's --precision would load it (models/precision.py). The float32
copy and the most recent other one are kept (for SmolLM2 at most 540 + 405 MB); a model above
limits.PRECISION_REFERENCE_MAX_PARAMETERS gets no copy. ModelService takes this method from PrecisionCalls; the
client's public call (client.py) names it once.
"""

from __future__ import annotations

import threading

from . import limits
from .records import validation

_COPYING = threading.Lock()  # one copy is made at a time


class PrecisionCalls:
    """ModelService's precision check (it provides model_lock, prompt_ids, pieces, info, model, _check_open)."""

    def _precision_effect(self, prompt, chat, precision):
        from .forward_pass.precision_effect import compare

        self._check_open()
        running = self.info.precision or "fp32"
        asked = running if precision is None else validation.choice("precision", precision, limits.PRECISIONS)
        ids = self.prompt_ids(prompt, chat)
        here = None if asked == running else self._copy_at(asked)
        reference = None if running == "fp32" else self._copy_at("fp32")
        with self.model_lock:
            self._check_open()
            fp32 = self.model if reference is None else reference
            if asked == "fp32":
                return compare(fp32, None, self.pieces, ids, "fp32", running)
            return compare(self.model if here is None else here, fp32, self.pieces, ids, asked, running)

    def _copy_at(self, precision: str):
        """The model's weights at `precision` on the CPU: made once, then kept (float32, and the last other one)."""
        from .models import loading

        with _COPYING:
            copies = self.__dict__.setdefault("_precision_copies", {})
            if precision in copies:
                return copies[precision]
            if self.info.parameters > limits.PRECISION_REFERENCE_MAX_PARAMETERS:
                raise validation.Unavailable("precision_too_large", parameters=f"{self.info.parameters / 1e6:,.0f}M",
                                             limit=f"{limits.PRECISION_REFERENCE_MAX_PARAMETERS / 1e6:,.0f}M")
            source = getattr(self.model, "ntp_load", None)
            if source is None:
                raise validation.Unavailable("precision_no_source")
            # loaded as a host's --precision would load it (a cast of the running model would also round buffers
            # such as the rotary frequencies, which from_pretrained keeps in float32)
            made = loading.load(source, "cpu", precision=precision)[0]
            for other in [p for p in copies if p != "fp32"]:  # keep float32 and this one
                del copies[other]
            copies[precision] = made
            return made


__all__ = ["PrecisionCalls"]
