"""The model service on ZeroGPU: the same records, every forward pass inside a GPU lease.

ZeroGPU (the `spaces` package) lends a GPU per call of a `@spaces.GPU(duration=...)` function: the
call runs in a worker process forked from the app, with the weights that were moved to CUDA at
startup; its arguments and every value it yields are pickled across the process boundary. So:

- `import spaces` comes before anything touches CUDA (app.py imports this module first on ZeroGPU),
  and the model is loaded and moved to CUDA before launch (`load`), not in the background;
- the scheduler of a dedicated GPU (one thread owning the model for the whole room) cannot live in the
  app process, where CUDA is only emulated. Each request runs in its own lease instead, through the
  ordinary ModelService inside the worker, and yields the ordinary small records;
- a Generate runs in slices of at most limits.ZERO_GPU_SLICE_TOKENS steps, each its own lease with a
  duration sized from the slice (shorter leases get better queue priority, and a long run does not
  hold a GPU that others wait for). The next slice resumes with `continue_from` and the run's seed,
  which replays the seeded generator exactly (the Step button relies on the same property), so a
  sliced run draws exactly the tokens of an unsliced one;
- an error inside the worker crosses as a small Failure record and is raised again here with its own
  message (`spaces` would replace an exception that is not a gr.Error with "ZeroGPU worker error").

Without the `spaces` package, or off ZeroGPU, the decorator changes nothing (`spaces.GPU` is itself
a no-op off ZeroGPU): the functions run in-process, which is how the tests run them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import limits
from ..client import BatchCall, DrawCall, GenerateCall, ModelClient
from ..engine.kept import Missing
from ..records import validation, wire
from ..records.intervention import knockout_from
from ..records.step import Room, StepRecord, WhatIf

try:  # optional: only a ZeroGPU Space needs it, and there it must come before CUDA is touched
    import spaces
except ImportError:
    spaces = None


def gpu(duration):
    """`spaces.GPU(duration=...)` where the package is installed; otherwise the function as it is."""
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)


@dataclass(frozen=True)
class Failure:
    """An error raised inside the GPU worker, as it crosses back: the one error codec's form (records/wire.py),
    so a learner-facing error keeps its key and is said in the visitor's language."""

    error: dict

    def raise_again(self):
        raise wire.decode_error(self.error)


@dataclass(frozen=True)
class KeptStep:
    """A kept run's step as it crosses back from the lease: its logits as a NumPy row (the app's side has no CUDA)
    and its u, for what-ifs answered on the app's side without a lease (model_service/engine/kept.py)."""

    step: int
    logits: object
    u: float


def _failure(error: Exception) -> Failure:
    return Failure(wire.encode_error(error))


_SERVICE = None  # the ModelService the GPU functions run; set before launch, inherited by forked workers


def _slice_seconds(call, steps):
    return limits.ZERO_GPU_BASE_SECONDS + steps * limits.ZERO_GPU_SECONDS_PER_TOKEN


def _batch_seconds(requests, top_n):
    return limits.ZERO_GPU_BASE_SECONDS + max(r.max_new_tokens for r in requests) * limits.ZERO_GPU_SECONDS_PER_TOKEN


@gpu(duration=_slice_seconds)
def generate_slice(call, steps):
    """At most `steps` StepRecords of a GenerateCall, resuming after its continue_from (inside the lease)."""
    try:
        stream = _SERVICE._generate(call)
        with stream:
            for n, record in enumerate(stream, start=1):
                kept = _SERVICE.kept.step(call.keep, record.step) if call.keep and isinstance(record, StepRecord) else None
                if kept is not None:
                    yield KeptStep(record.step, kept[0].numpy(), kept[1])
                yield record
                if n >= steps:
                    return  # closing the stream frees the row at once
    except (ValueError, RuntimeError) as e:
        yield _failure(e)


@gpu(duration=_batch_seconds)
def generate_batch_lease(requests, top_n):
    try:
        yield from _SERVICE.generate_batch(requests, top_n)
    except (ValueError, RuntimeError) as e:
        yield _failure(e)


@gpu(duration=limits.ZERO_GPU_TRACE_SECONDS)
def one_pass(method: str, args: tuple, kwargs: dict):
    """trace, trace_attention, attribute, knock_out, patch, steer, lm_head, prompt_logprobs, sample_many or batch_effect: one
    record back."""
    try:
        return getattr(_SERVICE, method)(*args, **kwargs)
    except (ValueError, RuntimeError) as e:
        return _failure(e)


def _unwrap(value):
    if isinstance(value, Failure):
        value.raise_again()
    return value


class ZeroGpuService(ModelClient):
    """What the UI calls on ZeroGPU (a ModelClient: model_service/client.py): the checks run here, on the CPU, so bad input
    costs no GPU time; every forward pass runs in a lease."""

    def __init__(self, inner):
        global _SERVICE
        _SERVICE = inner
        self.inner = inner
        self.info = inner.info
        self.max_rows, self.queue_size = inner.max_rows, inner.queue_size

    @property
    def description(self) -> str:
        return f"{self.inner.description} · ZeroGPU: a GPU lease per request"

    def _encode(self, prompt, chat) -> list[int]:
        return self.inner.encode(prompt, chat)

    def _pieces_of(self, ids) -> dict[int, str]:
        return self.inner.pieces_of(ids)

    def _room(self) -> Room:
        """No shared batch here: each request has its own lease (ZeroGPU queues them)."""
        return Room(rows=(), waiting=0, step=0, max_rows=self.max_rows, queue_size=self.queue_size)

    def _generate(self, call: GenerateCall):
        checked = self.inner.check_generate(call)
        return self._slices(call, checked)

    def _slices(self, call: GenerateCall, checked):
        taken, settings = list(checked.prefix), checked.settings
        kept = None
        if checked.keep:
            self.inner.kept.start(checked.keep, checked.ids, checked.prefix)
        while True:
            last = None
            steps = min(limits.ZERO_GPU_SLICE_TOKENS, checked.max_new_tokens - len(taken))  # the lease asks for no more
            sliced = dataclasses.replace(call, settings=settings, max_new_tokens=checked.max_new_tokens,
                                         stop=checked.stop, top_n=checked.top_n, continue_from=tuple(taken),
                                         report_waiting=False)
            for record in generate_slice(sliced, steps):
                record = _unwrap(record)
                if isinstance(record, KeptStep):
                    kept = record
                    continue
                if kept is not None and isinstance(record, StepRecord) and kept.step == record.step:
                    import torch

                    self.inner.kept.add(checked.keep, record.step, record.token_id, torch.from_numpy(kept.logits), kept.u)
                if isinstance(record, StepRecord):
                    taken.append(record.token_id)
                    last = record
                    if settings.seed is None:  # the next slice follows this run's own seed
                        settings = settings.with_seed(record.seed)
                yield record
            if last is None or last.stop_reason is not None or len(taken) >= checked.max_new_tokens:
                return

    def _generate_batch(self, call: BatchCall):
        """One lease for the whole batch (the Engine tab's 8 rows, an API batch), sized from its longest."""
        from ..records.settings import request_from

        checked = []
        for n, request in enumerate(call.requests, start=1):
            try:
                request = request_from(request)
                self.inner.prompt_and_budget(request.prompt, request.chat, request.max_new_tokens)
            except (ValueError, TypeError) as e:
                raise ValueError(f"request {n}: {e}") from None
            checked.append(request)
        if not 1 <= len(checked) <= limits.MAX_BATCH_REQUESTS:
            raise ValueError(f"a batch needs 1 to {limits.MAX_BATCH_REQUESTS} requests, got {len(checked)}")
        return (_unwrap(step) for step in generate_batch_lease(tuple(checked), call.top_n))

    def _what_if(self, call: GenerateCall) -> WhatIf:
        """From the logits the run kept here, on the CPU with no lease; else one forward pass in a lease."""
        checked = self.inner.check_generate(call)
        if checked.keep and not isinstance(self.inner.kept.find(checked.keep, checked.ids, checked.prefix), Missing):
            return self.inner._what_if(call)
        return _unwrap(one_pass("what_if", (call.prompt, call.settings, call.max_new_tokens, call.stop, call.chat,
                                            call.top_n), {"continue_from": call.continue_from}))

    def _trace(self, prompt, chat, block, top_n):
        self.inner.prompt_ids(prompt, chat)
        return _unwrap(one_pass("trace", (prompt, chat), {"block": block, "top_n": top_n}))

    def _trace_attention(self, prompt, chat, block):
        self.inner.prompt_ids(prompt, chat)
        return _unwrap(one_pass("trace_attention", (prompt, chat, block), {}))

    def _attribute(self, prompt, chat, candidate, rival, head_block):
        self.inner.prompt_ids(prompt, chat)
        return _unwrap(one_pass("attribute", (prompt, chat, candidate, rival, head_block), {}))

    def _precision_effect(self, prompt, chat, precision):
        # on the CPU, in this process: no lease, and its copies are kept here (a lease's worker forgets them)
        return self.inner._precision_effect(prompt, chat, precision, on_cpu=True)

    def _knock_out(self, prompt, chat, target, settings, candidate, top_n):
        self.inner.check_generate(GenerateCall(prompt, settings, 1, (), chat, top_n))  # bad input costs no lease
        knockout_from(target)
        return _unwrap(one_pass("knock_out", (prompt, target, settings, chat, candidate, top_n), {}))

    def _patch(self, prompt, source, chat, cells, candidate):
        self.inner.prompt_ids(prompt, chat)
        self.inner._source_ids(source, chat)
        return _unwrap(one_pass("patch", (prompt, source, cells, chat, candidate), {}))

    def _steer(self, prompt, towards, away, block, scale, settings, max_new_tokens, chat, top_n):
        self.inner.check_generate(GenerateCall(prompt, settings, 1, (), chat, top_n))  # bad input costs no lease
        return _unwrap(one_pass("steer", (prompt, towards, away, block, scale, settings, max_new_tokens, chat, top_n),
                                {}))

    def _lm_head(self, prompt, chat, continue_from, top_k):
        self.inner.prompt_ids(prompt, chat)
        return _unwrap(one_pass("lm_head", (prompt, chat, tuple(continue_from)), {"top_k": top_k}))

    def _prompt_logprobs(self, prompt, chat, top_n):
        self.inner.prompt_ids(prompt, chat)
        return _unwrap(one_pass("prompt_logprobs", (prompt, chat), {"top_n": top_n}))

    def _batch_effect(self, prompt, settings, chat, continue_from, top_n):
        self.inner.prompt_ids(prompt, chat)
        return _unwrap(one_pass("batch_effect", (prompt, settings, chat, tuple(continue_from)), {"top_n": top_n}))

    def _sample_many(self, call: DrawCall):
        self.inner.prompt_ids(call.prompt, call.chat)
        validation.number("draws", call.n, integer=True, low=limits.MIN_MANY_DRAWS, high=limits.MAX_MANY_DRAWS)
        return _unwrap(one_pass("sample_many", (call.prompt, call.settings, call.chat, call.continue_from),
                                {"n": call.n, "seed": call.seed, "top_n": call.top_n}))


def load(model: str | None, device: str | None = None, **room) -> ZeroGpuService:
    """Load the model onto CUDA now, before launch: ZeroGPU packs the weights moved to CUDA at startup."""
    from ..service import ModelService

    return ZeroGpuService(ModelService.load(model, device, **room))


__all__ = ["Failure", "ZeroGpuService", "gpu", "load", "spaces"]
