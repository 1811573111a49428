"""ModelService: the in-process implementation of the client interface (model_service/client.py).

It owns the loaded model (engine/loaded.py) and the room's scheduler (engine/scheduler.py, or the same loop in a
process of its own: engine/scheduler_process.py); every call is checked here before anything is queued. The UI
never sees a tensor: the records come back (model_service/records).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from . import limits
from .client import BatchCall, DrawCall, GenerateCall, ModelClient
from .engine.card import room_limits, room_mode
from .engine.kept import KeptRuns, Missing
from .engine.loaded import LoadedModel
from .engine.step import RowState
from .engine.streams import BatchStream, GroupSink, Job, Stream, StreamSink
from .interventions import InterventionCalls
from .models import loading
from .precision_check import PrecisionCalls
from .records import validation
from .records.settings import SamplingSettings, request_from, settings_from
from .records.step import BatchStep, ManyDraws, ModelInfo, Room, StepRecord, Token, Waiting, WhatIf

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckedGenerate:
    """A generate call after its checks: what the scheduler runs (and ZeroGPU slices)."""

    settings: SamplingSettings
    ids: list[int]  # the prompt's token ids
    max_new_tokens: int
    stop: tuple[str, ...]
    top_n: int
    prefix: list[int]  # tokens already generated (continue_from)
    keep: str = ""  # the page's name for its kept run ("": none)


def _whole(field: str, value, low: int, high: int) -> int:
    """The service's whole numbers: validation.number, the one validator of numbers."""
    return validation.number(field, value, integer=True, low=low, high=high)


def scheduler_mode(mode: str, device: str | None = None) -> str:
    """"thread" or "process" for a ModelService.load `scheduler` (app.py reads NTP_SCHEDULER); "auto" is a process
    on a CPU and a thread on a GPU (a second copy of the model would take the GPU's memory)."""
    if mode not in limits.SCHEDULER_MODES:
        raise ValueError(f"scheduler must be one of {', '.join(limits.SCHEDULER_MODES)}, got {mode!r}")
    if mode == "auto":
        return "process" if loading.pick_device(device)[0].type == "cpu" else "thread"
    return mode


class ModelService(InterventionCalls, PrecisionCalls, ModelClient):
    def __init__(self, model, tokenizer, info: ModelInfo | None = None, *, max_rows: int | None = None,
                 queue_size: int | None = None, batch_invariant: bool | None = None):
        """Wrap an already loaded model (tests pass a tiny random one); `load` is the usual door.

        max_rows: rows per forward step (default NTP_MAX_ROWS, else as many as the GPU card holds, capped at
        limits.MAX_ROWS_GPU, and MAX_ROWS_CPU on a CPU); queue_size: requests that may wait for a row (NTP_QUEUE_SIZE,
        else limits.QUEUE_SIZE); batch_invariant: a row's logits bit-identical in any batch (engine/invariant.py)."""
        self.batch_invariant = room_mode(model, batch_invariant)
        self.info = info or loading.model_info(model, tokenizer, type(model).__name__, "in-memory")
        self.loaded = LoadedModel.of(model, tokenizer, self.info.eos_token_ids)  # what the engine takes
        config = model.config.get_text_config()
        self.max_context = getattr(config, "max_position_embeddings", None) or 1 << 20
        self.max_rows, self.queue_size = room_limits(model, max_rows, queue_size)
        self._scheduler = None
        self._scheduler_lock = threading.Lock()
        self.kept = KeptRuns()  # the logits of the pages' lab runs, for their what-ifs (engine/kept.py)
        self.closed: Exception | None = None  # why this service no longer serves (the host switched the model)

    # the loaded model's parts, as the service's own callers read them
    model = property(lambda self: self.loaded.model)
    tokenizer = property(lambda self: self.loaded.tokenizer)
    pieces = property(lambda self: self.loaded.pieces)
    eos_token_ids = property(lambda self: self.loaded.eos_token_ids)
    model_lock = property(lambda self: self.loaded.lock)  # every forward pass holds it: steps, traces, LM-head views

    @classmethod
    def load(cls, model: str | None = None, device: str | None = None, progress=None, *,
             max_rows: int | None = None, queue_size: int | None = None, scheduler: str = "thread",
             batch_invariant: bool | None = None, precision: str | None = None) -> ModelService:
        """precision: fp32, bf16, int8 or int4 (models/precision.py; None: NTP_PRECISION, else the device's). scheduler:
        "thread" (the room's loop here), "process" (its own process, with its own copy of the model:
        engine/scheduler_process.py says why), or "auto" (a process on a CPU)."""
        mode = scheduler_mode(scheduler, device)
        process = None
        if mode == "process":  # started first: the two copies load side by side
            from .engine.scheduler_process import SchedulerProcess

            process = SchedulerProcess((model, device, None, precision), max_rows, queue_size, batch_invariant)
        try:
            service = cls(*loading.load(model, device, progress, precision), max_rows=max_rows, queue_size=queue_size,
                          batch_invariant=batch_invariant)
            if process is not None:
                process.max_rows, process.queue_size = service.max_rows, service.queue_size
                process.wait_ready()
                service._scheduler = process
        except BaseException:
            if process is not None:
                process.stop(reason="the model failed to load")
            raise
        return service

    @property
    def scheduler(self):
        """The one loop that runs every generation's forward passes; started on first use."""
        self._check_open()
        if self._scheduler is None:
            with self._scheduler_lock:
                if self._scheduler is None:
                    from .engine.scheduler import Scheduler

                    self._scheduler = Scheduler(self.loaded, self.max_rows, self.queue_size)
        return self._scheduler

    def close(self, reason: Exception | str = "the model service is shutting down") -> None:
        """Stop serving and let go of the model, so its memory can be freed: requests in flight end with
        `reason` (an error, or its text), later calls raise it. Waits for a trace or LM-head view under way."""
        self.closed = reason if isinstance(reason, Exception) else RuntimeError(reason)
        with self._scheduler_lock:
            scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.stop(reason=reason)
        with self.model_lock:  # the model, and the precision check's copies of it (precision_check.py)
            self.loaded.model, self.__dict__["_precision_copies"] = None, {}

    def _check_open(self) -> None:
        if self.closed is not None:
            raise validation.again(self.closed)

    @property
    def description(self) -> str:
        return self.info.describe()

    # ---- the client interface (client.py declares each call once) -----------------------------------------

    def _room(self) -> Room:
        return self.scheduler.room()

    def _encode(self, prompt, chat) -> list[int]:
        chat = validation.boolean("chat", chat)
        if isinstance(prompt, (list, tuple)):  # a chat's (role, content) pairs (client.prompt_of made them), or token ids
            prompt = validation.prompt("prompt", prompt, chat)
            if not chat:  # already tokenised (the OpenAI route's, a JSON caller's)
                return self._tokens("prompt", prompt)
            messages = [{"role": role, "content": content} for role, content in prompt]
        else:
            prompt = validation.text("prompt", prompt, required=False)
            messages = [{"role": "user", "content": prompt}]  # the lab's chat toggle: one user message
        if chat:
            encoded = self.tokenizer(self._chat_text(messages, isinstance(prompt, tuple)), add_special_tokens=False)
        else:
            encoded = self.tokenizer(prompt)
        if not encoded["input_ids"]:
            raise validation.InputError("prompt_empty")
        return list(encoded["input_ids"])

    def _chat_text(self, messages: list[dict], conversation: bool) -> str:
        """The model's chat template around the messages, ready for the assistant's turn. A template that refuses
        a conversation (some take no system message, or want user and assistant to alternate) says why, naming
        messages, as bad input; for one user message (the lab's toggle) its error is the service's own."""
        from jinja2 import TemplateError

        if not self.info.has_chat_template:
            raise validation.InputError("no_chat_template", model=self.info.name)
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except (TemplateError, ValueError, TypeError, KeyError, IndexError) as e:
            if not conversation:
                raise
            raise validation.InputError("chat_refused", field="messages", model=self.info.name, error=e) from None

    def _added(self, prompt, chat, ids: list[int]) -> int:
        """How many leading ids the tokenizer put in front of the prompt's own (its BOS): 0 for a chat, whose
        template writes every token it reads."""
        if chat or not isinstance(prompt, str):  # a template, or token ids, hold every token they give
            return 0
        own = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        extra = len(ids) - len(own)
        return extra if extra > 0 and ids[extra:] == list(own) else 0

    def _pieces_of(self, ids) -> dict[int, Token]:
        return {int(i): self.pieces(int(i)) for i in ids}

    def _lm_head(self, prompt, chat, continue_from, top_k):
        from .forward_pass.lm_head import lm_head_breakdown

        top_k = _whole("top_k", top_k, 1, limits.MAX_TOP_N)
        ids = self.prompt_ids(prompt, chat) + self._tokens("continue_from", continue_from)
        with self.model_lock:
            self._check_open()
            return lm_head_breakdown(self.model, ids, None, top_k)

    def _prompt_logprobs(self, prompt, chat, top_n):
        from .forward_pass.prompt_logprobs import prompt_logprobs

        top_n = _whole("top_n", top_n, 0, limits.MAX_PROMPT_TOP_N)
        chat = validation.boolean("chat", chat)
        ids = self.prompt_ids(prompt, chat)
        added = self._added(prompt, chat, ids)
        with self.model_lock:
            self._check_open()
            return prompt_logprobs(self.model, self.pieces, ids, top_n, added=added, chat=chat,
                                   model_name=self.info.name)

    def _trace(self, prompt, chat, block, top_n):
        from .forward_pass.tracing import trace

        started = time.perf_counter()
        ids = self.prompt_ids(prompt, chat)
        tokenize_ms = (time.perf_counter() - started) * 1000
        with self.model_lock:
            self._check_open()
            return trace(
                self.model, self.tokenizer, self.pieces, ids, prompt=prompt, chat=chat, model_name=self.info.name,
                tokenize_ms=tokenize_ms, block=block, top_n=top_n,
            )

    def _trace_attention(self, prompt, chat, block):
        from .forward_pass.tracing import attention

        ids = self.prompt_ids(prompt, chat)
        with self.model_lock:
            self._check_open()
            return attention(self.model, self.pieces, ids, block)

    def decode(self, ids: Sequence[int]) -> str:
        return self.loaded.decode(ids)

    def _generate(self, call: GenerateCall) -> Iterator[StepRecord | Waiting]:
        """The request joins the room's running batch (engine/scheduler.py)."""
        checked = self.check_generate(call)
        sink = StreamSink(call.report_waiting)
        row = RowState(self.loaded, checked.settings, checked.max_new_tokens, checked.stop, checked.prefix,
                       bool(call.ignore_eos))
        jobs = [Job(checked.ids + checked.prefix, row, len(checked.prefix), checked.top_n, bool(call.capture), sink)]
        keep = None
        if checked.keep:
            jobs[0].keep_logits = True
            self.kept.start(checked.keep, checked.ids, checked.prefix)
            keep = lambda record, kept: kept and self.kept.add(checked.keep, record.step, record.token_id, *kept)
        self.scheduler.submit(jobs)
        log.info("run: %d prompt tokens, up to %d new, keep %r", len(checked.ids), checked.max_new_tokens, checked.keep)
        return Stream(self.scheduler, jobs, sink, keep)

    def _what_if(self, call: GenerateCall) -> WhatIf:
        """From the kept logits in the calling thread (the room's scheduler never hears of it), else one forward
        pass as a row of the room."""
        from .engine.what_if import redraw
        from .records.settings import fresh_seed

        checked = self.check_generate(call)
        seed = checked.settings.seed if checked.settings.seed is not None else fresh_seed()
        found = self.kept.find(checked.keep, checked.ids, checked.prefix) if checked.keep else Missing.NOT_KEPT
        forward_ms = 0.0
        if isinstance(found, Missing):
            job, step = self._one_step(checked, checked.settings.with_seed(seed))
            (logits, u), forward_ms = job.kept.pop(step.step), step.forward_ms
            if checked.keep:
                self.kept.keep_recomputed(checked.keep, checked.ids, checked.prefix, logits, u)
        else:
            logits, u = found
        record = redraw(self.loaded, checked, seed, logits, u, forward_ms)
        log.info("what-if at step %d: logits %s", len(checked.prefix) + 1, getattr(found, "value", "kept"))
        return WhatIf(record, "kept" if not isinstance(found, Missing) else found.value)

    def _one_step(self, checked: CheckedGenerate, settings: SamplingSettings) -> tuple[Job, StepRecord]:
        """The step after checked.prefix computed as one row of the room (a prefill of prompt + prefix), its raw
        logits and u kept on the job (job.kept[record.step]): sample_many's and a what-if's step."""
        prefix, sink = checked.prefix, StreamSink()
        job = Job(checked.ids + prefix, RowState(self.loaded, settings, len(prefix) + 1, (), prefix, True),
                  len(prefix), checked.top_n, False, sink)
        job.keep_logits = True
        self.scheduler.submit([job])
        with Stream(self.scheduler, [job], sink) as stream:
            return job, next(stream)

    def check_generate(self, call: GenerateCall) -> CheckedGenerate:
        """A generate call checked (tokenizer work only, no forward pass); a ValueError names the field."""
        self._check_open()  # a closed service (the host switched the model) says why, before any work
        settings = self._settings(call.settings)
        top_n = _whole("top_n", call.top_n, 1, limits.MAX_TOP_N)
        stop = validation.stop_strings("stop", call.stop)  # checked at the edge (Stops) as it is; JSON's list here
        ids, max_new_tokens = self.prompt_and_budget(call.prompt, call.chat, call.max_new_tokens)
        prefix = self._tokens("continue_from", call.continue_from)
        if len(prefix) >= max_new_tokens:
            raise ValueError(f"already {len(prefix)} tokens generated: max_new_tokens ({max_new_tokens}) reached")
        return CheckedGenerate(settings, ids, max_new_tokens, stop, top_n, prefix, validation.key("keep", call.keep))

    def _generate_batch(self, call: BatchCall) -> Iterator[BatchStep | Waiting]:
        self._check_open()
        top_n = _whole("top_n", call.top_n, 1, limits.MAX_TOP_N)
        if not 1 <= len(call.requests) <= limits.MAX_BATCH_REQUESTS:
            raise ValueError(f"a batch needs 1 to {limits.MAX_BATCH_REQUESTS} requests, got {len(call.requests)}")
        sink = GroupSink(call.report_waiting)
        jobs = []
        for n, request in enumerate(call.requests, start=1):
            try:
                request = request_from(request)
                ids, max_new = self.prompt_and_budget(request.prompt, request.chat, request.max_new_tokens)
                row = RowState(self.loaded, self._settings(request.settings), max_new,
                               validation.stop_strings("stop", request.stop))
                jobs.append(Job(ids, row, 0, top_n, True, sink, index=n - 1))
            except (ValueError, TypeError) as e:
                raise ValueError(f"request {n}: {e}") from None
        self.scheduler.submit(jobs)
        return BatchStream(self.scheduler, jobs, sink)

    def _sample_many(self, call: DrawCall) -> ManyDraws:
        """The step's logits recomputed as a row of the room's batch (prompt + continue_from); n draws read its final
        distribution at once, seeded (None: fresh). With a run's settings and seed, token_id is the run's token."""
        import torch

        from .sampling.draw import side_chance
        from .sampling.many_draws import sample_step
        from .sampling.penalties import RowContext
        from .sampling.pipeline import fresh_seed, run_stages

        n = validation.number("draws", call.n, integer=True, low=limits.MIN_MANY_DRAWS, high=limits.MAX_MANY_DRAWS)
        seed = validation.seed("draw seed", call.seed)
        seed = fresh_seed() if seed is None else seed
        checked = self.check_generate(GenerateCall(call.prompt, call.settings, len(call.continue_from) + 1, (),
                                                   call.chat, call.top_n, continue_from=call.continue_from))
        settings, prefix, top_n = checked.settings, checked.prefix, checked.top_n
        job, record = self._one_step(checked, settings)
        with torch.inference_mode():
            stages = run_stages(job.kept.pop(record.step)[0], [settings], capture=False, min_window=top_n,
                                contexts=[RowContext(job.row.prompt, list(prefix), side_chance(job.row.seed, len(prefix)),
                                                     job.row.breakers, stop_ids=self._stop_ids(settings))])
            return sample_step(stages, n, seed, top_n, self.pieces, record.step, record.token_id, record.forward_ms,
                               record.pending_hex)

    def _batch_effect(self, prompt, settings, chat, continue_from, top_n):
        """Four forward passes on this process's copy of the model, under its lock (a room on the same copy waits
        for them: about a second on a CPU)."""
        from .forward_pass.batch_effect import STRANGERS, batch_effect
        from .records.settings import fresh_seed

        self._check_open()
        settings = self._settings(settings)
        top_n = _whole("top_n", top_n, 1, limits.MAX_TOP_N)
        if len(continue_from) >= limits.MAX_NEW_TOKENS:
            raise ValueError(f"continue_from: at most {limits.MAX_NEW_TOKENS - 1} tokens (a run's steps), "
                             f"got {len(continue_from)}")
        prefix = self._tokens("continue_from", continue_from)
        ids, _ = self.prompt_and_budget(prompt, chat, len(prefix) + 1)
        strangers = [self.encode(text) for text in STRANGERS[: limits.BATCH_EFFECT_ROWS - 1]]
        seed = settings.seed if settings.seed is not None else fresh_seed()
        with self.model_lock:
            self._check_open()
            return batch_effect(self.model, self.loaded.pad_id, self.pieces, ids + prefix, settings, len(prefix), seed,
                                strangers, self.batch_invariant, top_n,
                                self.loaded.breakers(settings.dry_sequence_breakers) if settings.dry else frozenset(),
                                self._stop_ids(settings), room_native=getattr(self.model, "ntp_native", None) is not None)

    def _stop_ids(self, settings) -> frozenset:
        """The end tokens min_tokens holds back in a step computed outside a run (a run's row has its own)."""
        return frozenset(self.loaded.eos_token_ids) if settings.min_tokens else frozenset()

    # ---- checks every path shares -----------------------------------------------------------------------------

    def prompt_ids(self, prompt: str, chat: bool) -> list[int]:
        """encode() within the room's prompt cap: every path that runs the model checks it."""
        ids = self.encode(prompt, chat)
        if len(ids) > limits.MAX_PROMPT_TOKENS:
            raise validation.InputError("prompt_too_long", count=f"{len(ids):,}", limit=f"{limits.MAX_PROMPT_TOKENS:,}")
        return ids

    def prompt_and_budget(self, prompt: str, chat: bool, max_new_tokens) -> tuple[list[int], int]:
        """The prompt's ids and a checked max_new_tokens that fits the model's context."""
        max_new_tokens = _whole("max_new_tokens", max_new_tokens, 1, limits.MAX_NEW_TOKENS)
        ids = self.prompt_ids(prompt, chat)
        if len(ids) + max_new_tokens > self.max_context:
            raise ValueError(
                f"prompt ({len(ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's "
                f"context of {self.max_context} tokens"
            )
        return ids, max_new_tokens

    def _settings(self, value) -> SamplingSettings:
        """settings_from, and what needs the model: a biased token must be in its vocabulary."""
        settings = settings_from(value)
        for token, _ in settings.logit_bias:
            _whole("logit_bias token id", token, 0, self.info.vocab_size - 1)
        return settings

    def _tokens(self, field: str, ids) -> list[int]:
        return [_whole(field, t, 0, self.info.vocab_size - 1) for t in ids]


__all__ = ["CheckedGenerate", "ModelService"]
