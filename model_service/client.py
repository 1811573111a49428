"""The one declared client interface: what the page, the API and scripts call on a model, wherever it runs.

    ModelClient                     this file: every call's signature and defaults, written once
    ├── ModelService                service.py: in this process (its scheduler in a thread or a process of its own)
    ├── RemoteService               deploy/remote.py: a Ray Serve deployment elsewhere (deploy/ray_serve.py)
    ├── ZeroGpuService              deploy/zero_gpu.py: a GPU lease per request on a ZeroGPU Space
    └── LoadingService              models/switching.py: any of these while it loads, or while the host switches

As vLLM's EngineCoreClient has an in-process and a multiprocess client behind one interface, the public
methods here take the arguments once and hand each implementation one frozen call (GenerateCall, BatchCall,
DrawCall) or plain positional values: an implementation cannot drift to other defaults or drop a knob.
Every call returns records (model_service/records), never a tensor; bad input raises a ValueError that names
its field (records/validation.py); an unavailable model raises validation.Unavailable.

A prompt is text. With chat=True it is one user message in the model's chat template (the lab's chat toggle), or
a whole conversation: a list of {role, content} messages (system, developer, user, assistant), which the public
calls turn into (role, content) pairs through validation.messages, so that every implementation receives a
hashable value that survives pickling (ZeroGPU) and JSON (a remote service) and is checked by the same rules.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from . import limits
from .records import validation
from .records.intervention import Knockout
from .records.settings import Request, SamplingSettings
from .records.step import BatchStep, LoadStatus, ManyDraws, ModelInfo, Room, StepRecord, Token, Waiting, WhatIf

Prompt = str | Sequence  # text, or with chat=True a conversation: {role, content} messages or (role, content) pairs


def prompt_of(prompt, chat):
    """A prompt as the implementations take it: a chat's conversation as validation.messages' (role, content)
    pairs; anything else as given (text, or what the implementation that checks it refuses: a list with chat off
    is no text)."""
    if isinstance(prompt, (list, tuple)) and validation.boolean("chat", chat):
        return validation.messages("messages", prompt)
    return prompt


@dataclass(frozen=True)
class GenerateCall:
    """One generate() call as given (checked by the implementation that runs it)."""

    prompt: Prompt
    settings: SamplingSettings | Mapping | None = None
    max_new_tokens: int = limits.DEFAULT_MAX_NEW_TOKENS
    stop: Sequence[str] | str | None = ()
    chat: bool = False
    top_n: int = limits.DEFAULT_TOP_N
    capture: bool = True
    ignore_eos: bool = False
    continue_from: tuple[int, ...] = ()
    report_waiting: bool = False
    keep: str = ""  # a page's name for its run: the service keeps the run's logits under it (engine/kept.py)


@dataclass(frozen=True)
class BatchCall:
    requests: tuple  # Request objects or mappings of their fields (records/settings.py:request_from)
    top_n: int = limits.DEFAULT_TOP_N
    report_waiting: bool = False


@dataclass(frozen=True)
class DrawCall:
    """sample_many(): the step after prompt + continue_from, drawn n times."""

    prompt: Prompt
    settings: SamplingSettings | Mapping | None = None
    chat: bool = False
    continue_from: tuple[int, ...] = ()
    n: int = limits.DEFAULT_MANY_DRAWS
    seed: int | None = None
    top_n: int = limits.DEFAULT_TOP_N


class ModelClient(ABC):
    info: ModelInfo  # the model served: name, size, device, vocabulary, EOS ids, ...

    # ---- what every client says about itself (a loading or switching one overrides these) ---------------
    @property
    def description(self) -> str:
        return self.info.describe()

    @property
    def status(self) -> LoadStatus:
        return LoadStatus(1.0, self.description, True)

    switching: str | None = None  # the model a host switch is loading
    epoch = 1  # models served so far: a page that saw another epoch re-reads its numbers

    def wait(self, timeout: float | None = None) -> LoadStatus:
        return self.status

    # ---- the calls ----------------------------------------------------------------------------------------
    def generate(self, prompt: Prompt, settings: SamplingSettings | Mapping | None = None,
                 max_new_tokens: int = limits.DEFAULT_MAX_NEW_TOKENS, stop: Sequence[str] | str | None = (),
                 chat: bool = False, top_n: int = limits.DEFAULT_TOP_N, *, capture: bool = True,
                 ignore_eos: bool = False, continue_from: Sequence[int] = (),
                 report_waiting: bool = False, keep: str = "") -> Iterator[StepRecord | Waiting]:
        """Stream one StepRecord per generated token; the request joins the room's running batch, and
        closing the iterator (or dropping it) cancels it. continue_from: tokens already generated (the
        lab's Step): the run resumes after them, seeded generator included. capture=False skips the stage
        summaries (a benchmark's baseline); ignore_eos keeps going past end-of-text; report_waiting yields
        Waiting records while the request waits for a row. keep: a page's name for its run (letters, digits,
        - _ . :): the service keeps each step's logits under it for what_if (one run per name; a continued run under
        the same name keeps the steps before it). Bad input raises before anything is queued."""
        return self._generate(GenerateCall(prompt_of(prompt, chat), settings, max_new_tokens, stop, chat, top_n, capture,
                                           ignore_eos, tuple(continue_from), report_waiting, keep))

    def what_if(self, prompt: Prompt, settings: SamplingSettings | Mapping | None = None,
                max_new_tokens: int = limits.DEFAULT_MAX_NEW_TOKENS, stop: Sequence[str] | str | None = (),
                chat: bool = False, top_n: int = limits.DEFAULT_TOP_N, *, continue_from: Sequence[int] = (),
                keep: str = "") -> WhatIf:
        """The step after prompt + continue_from as a run with these settings would record it, drawn at the u of
        their seed (the run's: blank draws a fresh one) — the live lab's "what if T were 0.5 at this step". From
        the logits the run kept under `keep` (generate(..., keep=)), with no forward pass and never queued behind
        the room; else from one forward pass, kept under `keep` for the next what-if of the step. A WhatIf record:
        the StepRecord, and where its logits came from."""
        return self._what_if(GenerateCall(prompt_of(prompt, chat), settings, max_new_tokens, stop, chat, top_n,
                                          continue_from=tuple(continue_from), keep=keep))

    def generate_batch(self, requests: Sequence[Request | Mapping], top_n: int = limits.DEFAULT_TOP_N, *,
                       report_waiting: bool = False) -> Iterator[BatchStep | Waiting]:
        """Run requests together, each with its own settings and stops; a BatchStep per step. Each request's
        tokens equal what generate gives it alone. A bad request is named by its number and field."""
        return self._generate_batch(BatchCall(tuple(requests), top_n, report_waiting))

    def sample_many(self, prompt: Prompt, settings: SamplingSettings | Mapping | None = None, chat: bool = False,
                    continue_from: Sequence[int] = (), n: int = limits.DEFAULT_MANY_DRAWS, seed: int | None = None,
                    top_n: int = limits.DEFAULT_TOP_N) -> ManyDraws:
        """Freeze the step after prompt + continue_from and draw n tokens from its final distribution: counts
        of its top_n tokens, the rest, and the chi-square test (sampling/many_draws.py)."""
        return self._sample_many(DrawCall(prompt_of(prompt, chat), settings, chat, tuple(continue_from), n, seed, top_n))

    def batch_effect(self, prompt: Prompt, settings: SamplingSettings | Mapping | None = None, chat: bool = False,
                     continue_from: Sequence[int] = (), top_n: int = limits.DEFAULT_TOP_N):
        """Why the same seed can give another token in a busy room: the step after prompt + continue_from computed
        alone and as one row of a room of limits.BATCH_EFFECT_ROWS, in the default arithmetic and the
        batch-invariant one, with the u a run of these settings' seed reads there (a fresh seed when blank, named
        in the record). A BatchEffect record (records/batch_effect.py)."""
        return self._batch_effect(prompt_of(prompt, chat), settings, chat, tuple(continue_from), top_n)

    def trace(self, prompt: Prompt, chat: bool = False, block: int | None = None,
              top_n: int = limits.DEFAULT_TRACE_TOP_N):
        """Lesson 10: one forward pass traced from token ids to logits at every position (a Trace record).
        block: whose attention to keep (1-based; None: the middle block)."""
        return self._trace(prompt_of(prompt, chat), chat, block, top_n)

    def trace_attention(self, prompt: Prompt, chat: bool = False, block: int = 1):
        """One block's attention (1-based) for the prompt: an AttentionMap."""
        return self._trace_attention(prompt_of(prompt, chat), chat, block)

    def attribute(self, prompt: Prompt, chat: bool = False, candidate: int | None = None, rival: int | None = None,
                  head_block: int | None = None):
        """Who pushed the next token up: each block's attention and MLP share of logit(candidate) - logit(rival) at
        the prompt's last position (default: its top two tokens), from one traced pass, and head_block's attention
        (default: the block whose attention moved it most) by head. An Attribution (records/intervention.py)."""
        return self._attribute(prompt_of(prompt, chat), chat, candidate, rival, head_block)

    def knock_out(self, prompt: Prompt, target: Knockout | Mapping, settings: SamplingSettings | Mapping | None = None,
                  chat: bool = False, candidate: int | None = None, top_n: int = limits.DEFAULT_TOP_N):
        """The next token with one part knocked out (target: a Knockout, or its fields kind, block, head, mode):
        before and after, each drawn through the sampler with `settings` at the same u (their seed's, or a fresh
        one), and `candidate`'s (default: the top token's) probability and rank both ways. A KnockoutResult."""
        return self._knock_out(prompt_of(prompt, chat), chat, target, settings, candidate, top_n)

    def patch(self, prompt: Prompt, source: Prompt, cells: Sequence, chat: bool = False, candidate: int | None = None):
        """Activation patching: for each cell [position, block] (position from 0, or None for every position; block
        from 1), the stream after that block at that position copied from `source` (a prompt of as many tokens),
        and the next token's odds at the prompt's last position: p(candidate) (default: the prompt's own top token)
        and p(the source's top token). A PatchResult."""
        return self._patch(prompt_of(prompt, chat), prompt_of(source, chat), chat,
                           tuple(cells) if isinstance(cells, list) else cells, candidate)

    def steer(self, prompt: Prompt, towards: str, away: str, block: int, scale: float,
              settings: SamplingSettings | Mapping | None = None, max_new_tokens: int = 24, chat: bool = False,
              top_n: int = limits.DEFAULT_TOP_N):
        """Generate with scale * (stream(towards) - stream(away)) added after `block` (the streams at those prompts'
        last positions), beside the same run without it: the same settings and seed (a fresh one when blank), so
        both read the same u at every step. At most limits.MAX_STEER_TOKENS tokens. A SteerResult."""
        return self._steer(prompt_of(prompt, chat), towards, away, block, scale, settings, max_new_tokens, chat, top_n)

    def precision_effect(self, prompt: Prompt, chat: bool = False, precision: str | None = None):
        """What a precision (fp32, bf16, int8 or int4; None: the one the model serves in, the host's --precision) does
        to the next token: the model at that precision beside the same weights in float32, at the prompt's last
        position. A PrecisionEffect (records/precision.py); in fp32 both sides are the same."""
        return self._precision_effect(prompt_of(prompt, chat), chat, precision)

    def lm_head(self, prompt: Prompt, chat: bool = False, continue_from: Sequence[int] = (),
                top_k: int = limits.DEFAULT_LM_HEAD_TOP_K):
        """The LM head after prompt + continue_from: for the top tokens, logit = ‖h‖·‖w‖·cos (an LmHeadView)."""
        return self._lm_head(prompt_of(prompt, chat), chat, tuple(continue_from), top_k)

    def prompt_logprobs(self, prompt: Prompt, chat: bool = False, top_n: int = limits.DEFAULT_PROMPT_TOP_N):
        """Teacher forcing over the prompt, one forward pass: each token's log-probability given the tokens before
        it and the top_n (0 to limits.MAX_PROMPT_TOP_N) most probable tokens there, under the raw distribution
        (softmax of the logits, temperature 1). A PromptLogprobs record (records/prompt.py); its first position
        has none."""
        return self._prompt_logprobs(prompt_of(prompt, chat), chat, top_n)

    def room(self) -> Room:
        """The live room, anonymised: every row's settings and progress (no prompts), the queue."""
        return self._room()

    def encode(self, prompt: Prompt, chat: bool = False) -> list[int]:
        """Prompt -> token ids: the raw completion (with the tokenizer's own BOS), or the chat template."""
        return self._encode(prompt_of(prompt, chat), chat)

    def pieces_of(self, ids: Sequence[int]) -> dict[int, Token]:
        """Each token as a record: how it reads on its own and, when it holds part of a character, its bytes."""
        return self._pieces_of(tuple(ids))

    # ---- what an implementation provides --------------------------------------------------------------------
    @abstractmethod
    def _generate(self, call: GenerateCall) -> Iterator[StepRecord | Waiting]: ...

    @abstractmethod
    def _generate_batch(self, call: BatchCall) -> Iterator[BatchStep | Waiting]: ...

    @abstractmethod
    def _what_if(self, call: GenerateCall) -> WhatIf: ...

    @abstractmethod
    def _sample_many(self, call: DrawCall) -> ManyDraws: ...

    @abstractmethod
    def _batch_effect(self, prompt, settings, chat, continue_from, top_n): ...

    @abstractmethod
    def _trace(self, prompt, chat, block, top_n): ...

    @abstractmethod
    def _trace_attention(self, prompt, chat, block): ...

    @abstractmethod
    def _lm_head(self, prompt, chat, continue_from, top_k): ...

    @abstractmethod
    def _attribute(self, prompt, chat, candidate, rival, head_block): ...

    @abstractmethod
    def _precision_effect(self, prompt, chat, precision): ...

    @abstractmethod
    def _knock_out(self, prompt, chat, target, settings, candidate, top_n): ...

    @abstractmethod
    def _patch(self, prompt, source, chat, cells, candidate): ...

    @abstractmethod
    def _steer(self, prompt, towards, away, block, scale, settings, max_new_tokens, chat, top_n): ...

    @abstractmethod
    def _prompt_logprobs(self, prompt, chat, top_n): ...

    @abstractmethod
    def _room(self) -> Room: ...

    @abstractmethod
    def _encode(self, prompt, chat) -> list[int]: ...

    @abstractmethod
    def _pieces_of(self, ids) -> dict[int, Token]: ...


def wait_until_ready(client: ModelClient, poll: float = 0.25, timeout: float = 600.0) -> Iterator[LoadStatus]:
    """Yield the client's LoadStatus while it loads, at most every `poll` seconds; ends once loaded or failed."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        status = client.wait(poll)
        if status != last:
            yield status
            last = status
        if status.ready or status.error or time.monotonic() > deadline:
            return


__all__ = ["BatchCall", "DrawCall", "GenerateCall", "ModelClient", "Prompt", "prompt_of", "wait_until_ready"]
