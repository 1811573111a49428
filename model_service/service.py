"""ModelService: the in-process implementation of the playground's model interface.

The UI only calls the methods of `PlaygroundService`; it never sees a tensor. A remote implementation
(the service on a GPU box) can stand in for this one without touching the UI.
"""

from __future__ import annotations

import numbers
import time
from typing import Iterator, Mapping, Protocol, Sequence

import torch

from . import loading
from .pieces import PieceTable
from .engine import run_batch
from .records import BatchStep, ModelInfo, StepRecord
from .settings import Request, SamplingSettings
from .step_loop import Decoder, RowState, sample_rows
from .text_stream import validate_stop

MAX_NEW_TOKENS = 4096
MAX_TOP_N = 100


class PlaygroundService(Protocol):
    """What the UI calls. ModelService is the in-process implementation; a remote one (the service
    on a GPU box) only has to return the same records."""

    info: ModelInfo

    def generate(
        self, prompt: str, settings: SamplingSettings, max_new_tokens: int = 64, stop: Sequence[str] = (),
        chat: bool = False, top_n: int = 20, *, continue_from: Sequence[int] = (),
    ) -> Iterator[StepRecord]: ...

    def generate_batch(self, requests: Sequence[Request], top_n: int = 20) -> Iterator[BatchStep]: ...

    def trace(self, prompt: str, chat: bool = False, block: int | None = None, top_n: int = 5): ...

    def trace_attention(self, prompt: str, chat: bool = False, block: int = 1): ...

    def lm_head(self, prompt: str, chat: bool = False, continue_from: Sequence[int] = (), top_k: int = 10): ...

    def pieces_of(self, ids: Sequence[int]) -> dict[int, str]: ...


def _count(field: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != int(value):
        raise ValueError(f"{field} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{field} must be between {low} and {high}, got {value!r}")
    return int(value)


def as_settings(settings) -> SamplingSettings:
    """Accept SamplingSettings or a mapping of its fields (what JSON callers send)."""
    if isinstance(settings, SamplingSettings):
        return settings
    if settings is None:
        return SamplingSettings()
    if isinstance(settings, Mapping):
        unknown = set(settings) - set(SamplingSettings.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown sampling setting(s): {', '.join(sorted(unknown))}")
        return SamplingSettings(**settings)
    raise ValueError(f"settings must be SamplingSettings or a dict, got {type(settings).__name__}")


class ModelService:
    def __init__(self, model, tokenizer, info: ModelInfo | None = None):
        """Wrap an already loaded model (tests pass a tiny random one); `load` is the usual door."""
        self.model = model
        self.tokenizer = tokenizer
        self.info = info or loading.model_info(model, tokenizer, type(model).__name__, "in-memory")
        self.pieces = PieceTable(tokenizer)
        self.eos_token_ids = set(self.info.eos_token_ids)
        config = model.config.get_text_config()
        self.max_context = getattr(config, "max_position_embeddings", None) or 1 << 20

    @classmethod
    def load(cls, model: str | None = None, device: str | None = None, progress=None) -> "ModelService":
        return cls(*loading.load(model, device, progress))

    @property
    def description(self) -> str:
        return self.info.describe()

    def encode(self, prompt: str, chat: bool = False) -> list[int]:
        """Prompt -> token ids: raw completion (with the tokenizer's own BOS, if any), or the chat template."""
        if not isinstance(prompt, str):
            raise ValueError(f"prompt must be text, got {type(prompt).__name__}")
        if chat:
            if not self.info.has_chat_template:
                raise ValueError(f"{self.info.name} has no chat template; turn the chat toggle off")
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = self.tokenizer(prompt)["input_ids"]
        if not ids:
            raise ValueError("the prompt is empty: type some text for the model to continue")
        return list(ids)

    def pieces_of(self, ids: Sequence[int]) -> dict[int, str]:
        """How each token reads on its own (leading spaces kept, split characters as bytes)."""
        return {int(i): self.pieces(int(i)).piece for i in ids}

    def lm_head(self, prompt: str, chat: bool = False, continue_from: Sequence[int] = (), top_k: int = 10):
        """The LM head at the position after prompt + continue_from: for the top tokens, logit = h·w
        shown as ‖h‖·‖w‖·cos (an LmHeadView record)."""
        from .lm_head import lm_head_breakdown

        top_k = _count("top_k", top_k, 1, MAX_TOP_N)
        ids = self.encode(prompt, chat) + [_count("token", t, 0, self.info.vocab_size - 1) for t in continue_from]
        return lm_head_breakdown(self.model, ids, None, top_k)

    def trace(self, prompt: str, chat: bool = False, block: int | None = None, top_n: int = 5):
        """Lesson 10: one forward pass traced from token ids to logits at every position (a Trace
        record). block: whose attention to keep (1-based; default the middle block)."""
        from .tracing import trace

        started = time.perf_counter()
        ids = self.encode(prompt, chat)
        tokenize_ms = (time.perf_counter() - started) * 1000
        return trace(
            self.model, self.tokenizer, self.pieces, ids, prompt=prompt, chat=chat, model_name=self.info.name,
            tokenize_ms=tokenize_ms, block=block, top_n=top_n,
        )

    def trace_attention(self, prompt: str, chat: bool = False, block: int = 1):
        """One block's attention (1-based) for the prompt: the Trace's AttentionMap for another block."""
        from .tracing import attention

        return attention(self.model, self.pieces, self.encode(prompt, chat), block)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def generate(
        self,
        prompt: str,
        settings: SamplingSettings | Mapping | None = None,
        max_new_tokens: int = 64,
        stop: Sequence[str] = (),
        chat: bool = False,
        top_n: int = 20,
        *,
        capture: bool = True,
        ignore_eos: bool = False,
        continue_from: Sequence[int] = (),
    ) -> Iterator[StepRecord]:
        """Stream one StepRecord per generated token.

        continue_from: tokens already generated for this prompt (the UI's Step button); the run
        resumes after them, step numbers and the seeded generator's state included, so stepping
        replays exactly what one Generate with the same seed produces. max_new_tokens counts them.
        capture=False skips the per-stage summaries (the benchmark's baseline); ignore_eos keeps going
        past end-of-text (to compare equal token counts). Arguments are checked before the first
        forward pass, so bad input fails fast with a ValueError naming the field.
        """
        settings = as_settings(settings)
        top_n = _count("top_n", top_n, 1, MAX_TOP_N)
        stop = validate_stop(stop)
        ids, max_new_tokens = self._prompt(prompt, chat, max_new_tokens)
        prefix = [_count("continue_from token", t, 0, self.info.vocab_size - 1) for t in continue_from]
        if len(prefix) >= max_new_tokens:
            raise ValueError(f"already {len(prefix)} tokens generated: max_new_tokens ({max_new_tokens}) reached")
        return self._generate(ids, prefix, settings, max_new_tokens, stop, top_n, capture, ignore_eos)

    def generate_batch(self, requests: Sequence, top_n: int = 20, max_batch: int = 64) -> Iterator[BatchStep]:
        """Run requests together: one batched forward pass per step, each row sampled with its own
        settings in one vectorised pass, each row stopping on its own. Yields a BatchStep per step.
        A request's tokens equal what `generate` gives it alone. Invalid requests raise ValueError
        naming the request (1-based) and the field, before any work."""
        top_n = _count("top_n", top_n, 1, MAX_TOP_N)
        requests = list(requests)
        if not 1 <= len(requests) <= max_batch:
            raise ValueError(f"a batch needs 1 to {max_batch} requests, got {len(requests)}")
        prompts, rows = [], []
        for n, request in enumerate(requests, start=1):
            try:
                if isinstance(request, Mapping):
                    request = Request(**{**request, "settings": as_settings(request.get("settings"))})
                elif not isinstance(request, Request):
                    raise ValueError(f"expected a Request, got {type(request).__name__}")
                ids, max_new = self._prompt(request.prompt, request.chat, request.max_new_tokens)
                rows.append(RowState(self, as_settings(request.settings), max_new, validate_stop(request.stop)))
                prompts.append(ids)
            except (ValueError, TypeError) as e:
                raise ValueError(f"request {n}: {e}") from None
        return run_batch(self, prompts, rows, top_n)

    def _prompt(self, prompt: str, chat: bool, max_new_tokens) -> tuple[list[int], int]:
        """The prompt's ids and a checked max_new_tokens that fits the model's context."""
        max_new_tokens = _count("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
        ids = self.encode(prompt, chat)
        if len(ids) + max_new_tokens > self.max_context:
            raise ValueError(
                f"prompt ({len(ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's "
                f"context of {self.max_context} tokens"
            )
        return ids, max_new_tokens

    def _generate(self, ids, prefix, settings, max_new_tokens, stop, top_n, capture, ignore_eos):
        row = RowState(self, settings, max_new_tokens, stop, prefix, ignore_eos)
        decoder = Decoder(self.model)
        logits = decoder.prefill(torch.tensor([ids + prefix]))  # (1, V): only the last position's logits
        for step in range(len(prefix), max_new_tokens):
            # the pipeline's stages, one draw from "final", then the stop conditions
            (token_id,), (draw_info,), (summary,), sampling_ms = sample_rows(logits, [row], top_n, capture)
            record = row.record(step, token_id, draw_info, summary, decoder.forward_ms, sampling_ms)
            yield record
            if record.stop_reason is not None:
                return
            logits = decoder.step(token_id)  # append the token: one forward pass, reusing the KV cache


__all__ = ["ModelService", "PlaygroundService", "as_settings"]
