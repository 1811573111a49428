"""What a precision does to the next token, as the in-process service answers it (forward_pass/precision_effect.py):
the model at the precision asked for beside the same weights in float32.

The model as it runs is one side when it is asked about its own precision (or runs in float32); the other sides are
copies on the CPU, made the first time they are asked for: the model reloaded as it was loaded (models/loading.py),
at that precision, as a host's --precision would load it (models/precision.py). The float32 copy and the most recent
other one are kept (for SmolLM2 at most 540 + 405 MB); a model above limits.PRECISION_REFERENCE_MAX_PARAMETERS gets
no copy. Only the pass on the running model holds its lock (the room's steps wait for that one pass, as for a
trace); the copies' passes hold a lock of their own. On ZeroGPU (`on_cpu`) the running model's side is a copy too:
no GPU lease, and the copies stay in the main process. ModelService takes this method from PrecisionCalls; the
client's public call (client.py) names it once.
"""

from __future__ import annotations

import threading
import time

from . import limits
from .records import validation

_COPIES = threading.Lock()  # one copy is made, or read, at a time


class PrecisionCalls:
    """ModelService's precision check (it provides model_lock, prompt_ids, pieces, info, model, _check_open)."""

    def _precision_effect(self, prompt, chat, precision, on_cpu: bool = False):
        from .forward_pass.precision_effect import compare, last_logits

        self._check_open()
        running = self.info.precision or "fp32"
        asked = running if precision is None else validation.choice("precision", precision, limits.PRECISIONS)
        ids = self.prompt_ids(prompt, chat)
        started = time.perf_counter()

        def logits(at: str):
            if at == running and not on_cpu:
                with self.model_lock:
                    self._check_open()
                    return last_logits(self.model, ids)
            copy = self._copy_at(at)
            with _COPIES:
                return last_logits(copy, ids)

        here = logits(asked)
        fp32 = here if asked == "fp32" else logits("fp32")
        return compare(here, fp32, self.pieces, len(ids), asked, running, time.perf_counter() - started)

    def _copy_at(self, precision: str):
        """The model's weights at `precision` on the CPU: made once, then kept (float32, and the last other one)."""
        from .models import loading

        with _COPIES:
            copies = self.__dict__.setdefault("_precision_copies", {})
            if precision in copies:
                return copies[precision]
            if self.info.parameters > limits.PRECISION_REFERENCE_MAX_PARAMETERS:
                raise validation.Unavailable("precision_too_large", parameters=f"{self.info.parameters / 1e6:,.0f}M",
                                             limit=f"{limits.PRECISION_REFERENCE_MAX_PARAMETERS / 1e6:,.0f}M")
            self._check_open()
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
