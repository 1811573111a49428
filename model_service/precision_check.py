"""What the weights' precision does to the next token, as the in-process service answers it
(forward_pass/precision_effect.py): the model as loaded beside a float32 copy of the same weights, loaded on the CPU
the first time it is asked for and kept. ModelService takes this method from PrecisionCalls; the client's public
call (client.py) names it once.
"""

from __future__ import annotations

import threading

from . import limits
from .records import validation

_LOADING = threading.Lock()  # one float32 copy loads at a time


class PrecisionCalls:
    """ModelService's precision check (it provides model_lock, prompt_ids, pieces, info, model)."""

    def _precision_effect(self, prompt, chat):
        from .forward_pass.precision_effect import compare

        ids = self.prompt_ids(prompt, chat)
        precision = self.info.precision or "fp32"
        reference = None if precision == "fp32" else self._fp32_copy()
        with self.model_lock:
            self._check_open()
            return compare(self.model, reference, self.pieces, ids, precision)

    def _fp32_copy(self):
        """The model's float32 copy on the CPU (loaded once, as the model was: models/loading.py)."""
        with _LOADING:
            copy = getattr(self, "_fp32", None)
            if copy is None:
                if self.info.parameters > limits.PRECISION_REFERENCE_MAX_PARAMETERS:
                    raise validation.Unavailable("precision_too_large", parameters=f"{self.info.parameters / 1e6:,.0f}M",
                                                 limit=f"{limits.PRECISION_REFERENCE_MAX_PARAMETERS / 1e6:,.0f}M")
                from .models import loading

                source = getattr(self.model, "ntp_load", None)
                if source is None:
                    raise validation.Unavailable("precision_no_source")
                copy = self._fp32 = loading.load(source, "cpu", precision="fp32")[0]
            return copy


__all__ = ["PrecisionCalls"]
