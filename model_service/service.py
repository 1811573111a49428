"""ModelService: the in-process implementation of the playground's model interface.

The UI only calls the methods of `PlaygroundService`; it never sees a tensor. A remote implementation
(the service on a GPU box) can stand in for this one without touching the UI.
"""

from __future__ import annotations

import numbers
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from . import env, limits
from .engine.pieces import PieceTable
from .engine.step import RowState
from .engine.streams import BatchStream, GroupSink, Job, Stream, StreamSink
from .models import loading
from .records import validation
from .records.settings import Request, SamplingSettings, request_from
from .records.settings import settings_from as as_settings  # the one settings reader (settings.py)
from .records.step import BatchStep, ManyDraws, ModelInfo, Room, StepRecord, Token, Waiting

MAX_NEW_TOKENS = limits.MAX_NEW_TOKENS
MAX_TOP_N = limits.MAX_TOP_N


class PlaygroundService(Protocol):
    """What the UI calls. ModelService is the in-process implementation; a remote one (the service
    on a GPU box) only has to return the same records."""

    info: ModelInfo

    def generate(
        self, prompt: str, settings: SamplingSettings, max_new_tokens: int = limits.DEFAULT_MAX_NEW_TOKENS, stop: Sequence[str] = (),
        chat: bool = False, top_n: int = limits.DEFAULT_TOP_N, *, continue_from: Sequence[int] = (), report_waiting: bool = False,
    ) -> Iterator[StepRecord | Waiting]: ...

    def generate_batch(
        self, requests: Sequence[Request], top_n: int = limits.DEFAULT_TOP_N, *, report_waiting: bool = False
    ) -> Iterator[BatchStep | Waiting]: ...

    def room(self) -> Room: ...

    def trace(self, prompt: str, chat: bool = False, block: int | None = None, top_n: int = limits.DEFAULT_TRACE_TOP_N): ...

    def trace_attention(self, prompt: str, chat: bool = False, block: int = 1): ...

    def lm_head(self, prompt: str, chat: bool = False, continue_from: Sequence[int] = (), top_k: int = limits.DEFAULT_LM_HEAD_TOP_K): ...

    def pieces_of(self, ids: Sequence[int]) -> dict[int, Token]: ...

    def sample_many(
        self, prompt: str, settings: SamplingSettings, chat: bool = False, continue_from: Sequence[int] = (),
        n: int = limits.DEFAULT_MANY_DRAWS, seed: int | None = None, top_n: int = limits.DEFAULT_TOP_N,
    ) -> ManyDraws: ...


def _count(field: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != int(value):
        raise ValueError(f"{field} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{field} must be between {low} and {high}, got {value!r}")
    return int(value)


def scheduler_mode(mode: str, device: str | None = None) -> str:
    """"thread" or "process" for a ModelService.load `scheduler` (app.py reads NTP_SCHEDULER); "auto" is a process
    on a CPU and a thread on a GPU (a second copy of the model would take the GPU's memory)."""
    if mode not in limits.SCHEDULER_MODES:
        raise ValueError(f"scheduler must be one of {', '.join(limits.SCHEDULER_MODES)}, got {mode!r}")
    if mode == "auto":
        return "process" if loading.pick_device(device)[0].type == "cpu" else "thread"
    return mode


def _default_rows(model) -> int:
    """Rows per step: a few on a CPU; on a GPU as many as the card holds (model_service/engine/card.py)."""
    if model.device.type == "cuda":
        from .engine.card import card_rows

        return card_rows(model)
    return limits.MAX_ROWS_GPU if model.device.type != "cpu" else limits.MAX_ROWS_CPU


class ModelService:
    def __init__(self, model, tokenizer, info: ModelInfo | None = None, *, max_rows: int | None = None,
                 queue_size: int | None = None):
        """Wrap an already loaded model (tests pass a tiny random one); `load` is the usual door.

        max_rows: rows per forward step (default NTP_MAX_ROWS, else as many as the GPU card holds, capped
        at limits.MAX_ROWS_GPU, and MAX_ROWS_CPU on a CPU); queue_size: requests that may wait for a row (NTP_QUEUE_SIZE, else
        limits.QUEUE_SIZE)."""
        self.model = model
        self.tokenizer = tokenizer
        self.info = info or loading.model_info(model, tokenizer, type(model).__name__, "in-memory")
        self.pieces = PieceTable(tokenizer)
        self.eos_token_ids = set(self.info.eos_token_ids)
        config = model.config.get_text_config()
        self.max_context = getattr(config, "max_position_embeddings", None) or 1 << 20
        if max_rows is None:
            max_rows = env.max_rows() or _default_rows(model)
        self.max_rows = validation.number("max_rows", max_rows, integer=True, low=1, high=limits.MAX_ROWS_CEILING)
        self.queue_size = validation.number("queue_size", env.queue_size() if queue_size is None else queue_size,
                                            integer=True, low=0, high=limits.QUEUE_SIZE_CEILING)
        # Every forward pass holds it: the scheduler's steps, and traces / LM-head views beside them.
        self.model_lock = threading.RLock()
        if getattr(model, "device", None) is not None and model.device.type == "cuda":
            import torch

            # PyTorch picks cuDNN's attention for a decode step with more than one row, and cuDNN builds an
            # execution plan for every new key length, so on the CPU side: measured on an H200 with Llama-3.1-8B,
            # 1.3 ms per layer, 40 of a step's 60 ms at 8-64 rows (the GPU worked 9). Flash / memory-efficient
            # attention take the same inputs without a plan per shape. Process-wide, like every SDPA switch.
            torch.backends.cuda.enable_cudnn_sdp(False)
        self._scheduler = None
        self._scheduler_lock = threading.Lock()
        self.closed: Exception | None = None  # why this service no longer serves (the host switched the model)

    @classmethod
    def load(cls, model: str | None = None, device: str | None = None, progress=None, *,
             max_rows: int | None = None, queue_size: int | None = None, scheduler: str = "thread") -> ModelService:
        """scheduler: "thread" (the room's loop in this process), "process" (in a process of its own, which loads
        its own copy of the model: model_service/engine/scheduler_process.py says why), or "auto" (a process on a CPU)."""
        mode = scheduler_mode(scheduler, device)
        process = None
        if mode == "process":  # started first: the two copies load side by side
            from .engine.scheduler_process import SchedulerProcess

            process = SchedulerProcess((model, device), max_rows, queue_size)
        try:
            service = cls(*loading.load(model, device, progress), max_rows=max_rows, queue_size=queue_size)
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

                    self._scheduler = Scheduler(self, self.max_rows, self.queue_size)
        return self._scheduler

    def close(self, reason: Exception | str = "the model service is shutting down") -> None:
        """Stop serving and let go of the model, so its memory can be freed: requests in flight end with
        `reason` (an error, or its text), later calls raise it. Waits for a trace or LM-head view under way."""
        self.closed = reason if isinstance(reason, Exception) else RuntimeError(reason)
        with self._scheduler_lock:
            scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.stop(reason=reason)
        with self.model_lock:
            self.model = None

    def _check_open(self) -> None:
        if self.closed is not None:
            raise validation.again(self.closed)

    def room(self) -> Room:
        """The live room, anonymised: every row's settings and progress (no prompts), the queue length,
        the scheduler's step counter and the rows-per-step cap."""
        return self.scheduler.room()

    @property
    def description(self) -> str:
        return self.info.describe()

    def encode(self, prompt: str, chat: bool = False) -> list[int]:
        """Prompt -> token ids: raw completion (with the tokenizer's own BOS, if any), or the chat template."""
        if not isinstance(prompt, str):
            raise ValueError(f"prompt must be text, got {type(prompt).__name__}")
        if chat:
            if not self.info.has_chat_template:
                raise validation.InputError("no_chat_template", model=self.info.name)
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = self.tokenizer(prompt)["input_ids"]
        if not ids:
            raise validation.InputError("prompt_empty")
        return list(ids)

    def _prompt_ids(self, prompt: str, chat: bool) -> list[int]:
        """encode() within the room's prompt cap: every path that runs the model checks it."""
        ids = self.encode(prompt, chat)
        if len(ids) > limits.MAX_PROMPT_TOKENS:
            raise validation.InputError("prompt_too_long", count=f"{len(ids):,}", limit=f"{limits.MAX_PROMPT_TOKENS:,}")
        return ids

    def pieces_of(self, ids: Sequence[int]) -> dict[int, Token]:
        """Each token as a record: how it reads on its own (leading spaces kept) and, when it holds
        part of a character, its bytes (to be read in context: model_service/records/utf8.py)."""
        return {int(i): self.pieces(int(i)) for i in ids}

    def lm_head(self, prompt: str, chat: bool = False, continue_from: Sequence[int] = (), top_k: int = limits.DEFAULT_LM_HEAD_TOP_K):
        """The LM head at the position after prompt + continue_from: for the top tokens, logit = h·w
        shown as ‖h‖·‖w‖·cos (an LmHeadView record)."""
        from .forward_pass.lm_head import lm_head_breakdown

        top_k = _count("top_k", top_k, 1, MAX_TOP_N)
        ids = self._prompt_ids(prompt, chat) + [_count("token", t, 0, self.info.vocab_size - 1) for t in continue_from]
        with self.model_lock:
            self._check_open()
            return lm_head_breakdown(self.model, ids, None, top_k)

    def trace(self, prompt: str, chat: bool = False, block: int | None = None, top_n: int = limits.DEFAULT_TRACE_TOP_N):
        """Lesson 10: one forward pass traced from token ids to logits at every position (a Trace
        record). block: whose attention to keep (1-based; default the middle block)."""
        from .forward_pass.tracing import trace

        started = time.perf_counter()
        ids = self._prompt_ids(prompt, chat)
        tokenize_ms = (time.perf_counter() - started) * 1000
        with self.model_lock:
            self._check_open()
            return trace(
                self.model, self.tokenizer, self.pieces, ids, prompt=prompt, chat=chat, model_name=self.info.name,
                tokenize_ms=tokenize_ms, block=block, top_n=top_n,
            )

    def trace_attention(self, prompt: str, chat: bool = False, block: int = 1):
        """One block's attention (1-based) for the prompt: the Trace's AttentionMap for another block."""
        from .forward_pass.tracing import attention

        ids = self._prompt_ids(prompt, chat)
        with self.model_lock:
            self._check_open()
            return attention(self.model, self.pieces, ids, block)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def generate(
        self,
        prompt: str,
        settings: SamplingSettings | Mapping | None = None,
        max_new_tokens: int = limits.DEFAULT_MAX_NEW_TOKENS,
        stop: Sequence[str] = (),
        chat: bool = False,
        top_n: int = limits.DEFAULT_TOP_N,
        *,
        capture: bool = True,
        ignore_eos: bool = False,
        continue_from: Sequence[int] = (),
        report_waiting: bool = False,
    ) -> Iterator[StepRecord | Waiting]:
        """Stream one StepRecord per generated token. The request joins the room's running batch (see
        model_service/engine/scheduler.py); closing the iterator, or dropping it, cancels it.

        continue_from: tokens already generated for this prompt (the UI's Step button); the run
        resumes after them, step numbers and the seeded generator's state included, so stepping
        replays exactly what one Generate with the same seed produces. max_new_tokens counts them.
        capture=False skips the per-stage summaries (the benchmark's baseline); ignore_eos keeps going
        past end-of-text (to compare equal token counts). report_waiting: while the request waits for
        a row, yield Waiting records (its place in the queue) before the first StepRecord.
        Arguments are checked before anything is queued, so bad input fails fast with a ValueError
        naming the field; a full queue is a RuntimeError.
        """
        settings, ids, max_new_tokens, stop, top_n, prefix = self.check_generate(
            prompt, settings, max_new_tokens, stop, chat, top_n, continue_from)
        sink = StreamSink(report_waiting)
        row = RowState(self, settings, max_new_tokens, stop, prefix, ignore_eos)
        jobs = [Job(ids + prefix, row, len(prefix), top_n, bool(capture), sink)]
        self.scheduler.submit(jobs)
        return Stream(self.scheduler, jobs, sink)

    def check_generate(self, prompt, settings, max_new_tokens, stop, chat, top_n, continue_from):
        """generate()'s arguments checked (tokenizer work only, no forward pass): (settings, prompt ids,
        max_new_tokens, stop strings, top_n, tokens already generated). A ValueError names the field."""
        self._check_open()  # a closed service (the host switched the model) says why, before any work
        settings = as_settings(settings)
        top_n = _count("top_n", top_n, 1, MAX_TOP_N)
        stop = validation.stop_strings("stop", stop)  # the one validator: count and length capped on every path
        ids, max_new_tokens = self._prompt(prompt, chat, max_new_tokens)
        prefix = [_count("continue_from token", t, 0, self.info.vocab_size - 1) for t in continue_from]
        if len(prefix) >= max_new_tokens:
            raise ValueError(f"already {len(prefix)} tokens generated: max_new_tokens ({max_new_tokens}) reached")
        return settings, ids, max_new_tokens, stop, top_n, prefix

    def generate_batch(
        self, requests: Sequence, top_n: int = limits.DEFAULT_TOP_N, max_batch: int = limits.MAX_BATCH_REQUESTS, *,
        report_waiting: bool = False,
    ) -> Iterator[BatchStep | Waiting]:
        """Run requests together: they join the room's batch at the same step, each row sampled with
        its own settings, each stopping on its own. Yields a BatchStep per step (its rows: these
        requests). A request's tokens equal what `generate` gives it alone. Invalid requests raise
        ValueError naming the request (1-based) and the field, before any work."""
        self._check_open()
        top_n = _count("top_n", top_n, 1, MAX_TOP_N)
        requests = list(requests)
        if not 1 <= len(requests) <= max_batch:
            raise ValueError(f"a batch needs 1 to {max_batch} requests, got {len(requests)}")
        sink = GroupSink(report_waiting)
        jobs = []
        for n, request in enumerate(requests, start=1):
            try:
                request = request_from(request)
                ids, max_new = self._prompt(request.prompt, request.chat, request.max_new_tokens)
                row = RowState(self, as_settings(request.settings), max_new, validation.stop_strings("stop", request.stop))
                jobs.append(Job(ids, row, 0, top_n, True, sink, index=n - 1))
            except (ValueError, TypeError) as e:
                raise ValueError(f"request {n}: {e}") from None
        self.scheduler.submit(jobs)
        return BatchStream(self.scheduler, jobs, sink)

    def sample_many(
        self, prompt: str, settings: SamplingSettings | Mapping | None = None, chat: bool = False,
        continue_from: Sequence[int] = (), n: int = limits.DEFAULT_MANY_DRAWS, seed: int | None = None,
        top_n: int = limits.DEFAULT_TOP_N,
    ) -> ManyDraws:
        """Freeze the step after prompt + continue_from and draw n tokens from its final distribution
        (model_service/sampling/many_draws.py): counts of its top_n tokens, the rest, and the chi-square test.

        The step's logits are recomputed as one row of the room's batch (one forward pass, a prefill of
        prompt + continue_from); the n draws are one vectorised read of the distribution, seeded by
        `seed` (None: fresh). With the run's own settings (seed included) the record's token_id is the
        token the run drew at this step."""
        import torch

        from .sampling.many_draws import sample_step
        from .sampling.pipeline import fresh_seed, run_stages

        n = validation.number("draws", n, integer=True, low=limits.MIN_MANY_DRAWS, high=limits.MAX_MANY_DRAWS)
        seed = validation.seed("draw seed", seed)
        seed = fresh_seed() if seed is None else seed
        settings, ids, _, _, top_n, prefix = self.check_generate(
            prompt, settings, len(continue_from) + 1, (), chat, top_n, continue_from)
        sink = StreamSink()
        job = Job(ids + prefix, RowState(self, settings, len(prefix) + 1, (), prefix, True), len(prefix), top_n, False, sink)
        job.keep_logits = True
        self.scheduler.submit([job])
        with Stream(self.scheduler, [job], sink) as stream:
            record = next(stream)
        with torch.inference_mode():
            stages = run_stages(job.kept_logits, [settings], capture=False, min_window=top_n)
            return sample_step(stages, n, seed, top_n, self.pieces, record.step, record.token_id, record.forward_ms,
                               record.pending_hex)

    def _prompt(self, prompt: str, chat: bool, max_new_tokens) -> tuple[list[int], int]:
        """The prompt's ids and a checked max_new_tokens that fits the model's context."""
        max_new_tokens = _count("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
        ids = self._prompt_ids(prompt, chat)
        if len(ids) + max_new_tokens > self.max_context:
            raise ValueError(
                f"prompt ({len(ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's "
                f"context of {self.max_context} tokens"
            )
        return ids, max_new_tokens


__all__ = ["ModelService", "PlaygroundService", "as_settings"]
