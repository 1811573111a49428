"""The forward-pass interventions as the in-process service runs them: who pushed the next token up
(forward_pass/attribution.py), a part knocked out (knockout.py), a second prompt's stream patched in (patching.py), a
direction added while the model writes (steering.py). Each checks its input (a ValueError names the field), then
works under the model's lock, as a trace does: never in the room's queue, and its hooks hear only its own thread.
ModelService takes these methods from InterventionCalls; the client's public calls (client.py) name them once.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from . import limits
from .client import GenerateCall
from .records import validation


class InterventionCalls:
    """ModelService's interventions (it provides model_lock, prompt_ids, check_generate, pieces, info, loaded)."""

    plain_logits: OrderedDict  # a knock-out's "before": prompt ids -> last logits, the few most recent prompts
    # (made on the first knock-out)

    def _attribute(self, prompt, chat, candidate, rival, head_block):
        from .forward_pass.attribution import attribute

        ids = self.prompt_ids(prompt, chat)
        with self.model_lock:
            self._check_open()
            return attribute(self.model, self.pieces, ids, candidate, rival, head_block)

    def _knock_out(self, prompt, chat, target, settings, candidate, top_n):
        """Two passes (the model as it is, kept for the prompt's next knock-out; then with the part knocked out), each
        drawn like a run's first step."""
        from .engine.what_if import redraw
        from .forward_pass.attribution import check_token
        from .forward_pass.knockout import check_knockout, last_logits
        from .records.intervention import KnockoutResult, knockout_from
        from .records.settings import fresh_seed
        from .sampling.draw import u_at

        started = time.perf_counter()
        target = knockout_from(target)
        checked = self.check_generate(GenerateCall(prompt, settings, 1, (), chat, top_n))
        seed = checked.settings.seed if checked.settings.seed is not None else fresh_seed()
        with self.model_lock:
            self._check_open()
            target = check_knockout(self.model, target)
            before = self._plain_logits(checked.ids)
            after, forward_ms = last_logits(self.model, checked.ids, target)
        vocab = before.shape[-1]
        chosen = int(before.argmax()) if candidate is None else check_token("candidate", candidate, vocab)
        u = u_at(seed, 0)
        records = [redraw(self.loaded, checked, seed, logits, u) for logits in (before, after)]
        (p0, r0), (p1, r1) = [(float(x.softmax(-1)[chosen]), int((x > x[chosen]).sum()) + 1) for x in (before, after)]
        return KnockoutResult(target, *records, self.pieces(chosen), p0, p1, r0, r1,
                              float((after - before).abs().max()), round(forward_ms, 1),
                              round((time.perf_counter() - started) * 1000, 1))

    def _patch(self, prompt, source, chat, cells, candidate):
        from .forward_pass.attribution import check_token
        from .forward_pass.patching import patch

        ids, source_ids = self.prompt_ids(prompt, chat), self._source_ids(source, chat)
        if candidate is not None:
            candidate = check_token("candidate", candidate, self.info.vocab_size)
        with self.model_lock:
            self._check_open()
            return patch(self.model, self.pieces, ids, source_ids, cells, candidate)

    def _steer(self, prompt, towards, away, block, scale, settings, max_new_tokens, chat, top_n):
        from .forward_pass.steering import steer
        from .records.settings import fresh_seed

        max_new_tokens = validation.number("max_new_tokens", max_new_tokens, integer=True, low=1,
                                           high=limits.MAX_STEER_TOKENS)
        checked = self.check_generate(GenerateCall(prompt, settings, max_new_tokens, (), chat, top_n))
        towards, away = self._source_ids(towards, False, "towards"), self._source_ids(away, False, "away")
        seed = checked.settings.seed if checked.settings.seed is not None else fresh_seed()
        with self.model_lock:
            self._check_open()
            return steer(self.loaded, checked.ids, checked, seed, towards, away, block, scale)

    def _source_ids(self, source, chat, field: str = "source") -> list[int]:
        """A second prompt's ids; its errors name `field` (the prompt's own name "prompt")."""
        try:
            return self.prompt_ids(source, chat)
        except ValueError as e:
            raise ValueError(f"{field}: {e}") from None

    def _plain_logits(self, ids):
        """The model's own last logits for ids (under the model lock): the prompt's next knock-outs (another part,
        the other mode) rerun only their own pass. The few most recent prompts are kept."""
        from .forward_pass.knockout import last_logits

        key, kept = tuple(ids), self.__dict__.setdefault("plain_logits", OrderedDict())  # (the model lock is held)
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
        kept[key] = last_logits(self.model, ids)[0]
        while len(kept) > limits.PLAIN_LOGITS_KEPT:
            kept.popitem(last=False)
        return kept[key]


__all__ = ["InterventionCalls"]
