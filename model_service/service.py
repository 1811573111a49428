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
from .records import DrawInfo, ModelInfo, StepRecord
from .sampling import SamplingSettings, draw, fresh_seed, make_generator, run_stages
from .step_loop import Decoder, summarise
from .text_stream import TextStream, validate_stop

MAX_NEW_TOKENS = 4096
MAX_TOP_N = 100


class PlaygroundService(Protocol):
    info: ModelInfo

    def generate(
        self,
        prompt: str,
        settings: SamplingSettings,
        max_new_tokens: int = 64,
        stop: Sequence[str] = (),
        chat: bool = False,
        top_n: int = 20,
    ) -> Iterator[StepRecord]: ...


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
        max_new_tokens = _count("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
        top_n = _count("top_n", top_n, 1, MAX_TOP_N)
        stop = validate_stop(stop)
        ids = self.encode(prompt, chat)
        if len(ids) + max_new_tokens > self.max_context:
            raise ValueError(
                f"prompt ({len(ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's "
                f"context of {self.max_context} tokens"
            )
        prefix = [_count("continue_from token", t, 0, self.info.vocab_size - 1) for t in continue_from]
        if len(prefix) >= max_new_tokens:
            raise ValueError(f"already {len(prefix)} tokens generated: max_new_tokens ({max_new_tokens}) reached")
        return self._generate(ids, prefix, settings, max_new_tokens, stop, top_n, capture, ignore_eos)

    def _generate(self, ids, prefix, settings, max_new_tokens, stop, top_n, capture, ignore_eos):
        seed = settings.seed if settings.seed is not None else fresh_seed()
        generator = make_generator(seed, self.model.device)
        if prefix:
            torch.rand(len(prefix), generator=generator, device=generator.device)  # one draw per step taken
        text = TextStream(self.decode, stop)
        for t in prefix:
            text.push(t)
        decoder = Decoder(self.model)
        logits = decoder.prefill(torch.tensor([ids + prefix]))  # (1, V): only the last position's logits

        for step in range(len(prefix), max_new_tokens):
            # 1. The pipeline: every stage's distribution, then one draw from "final".
            started = time.perf_counter()
            stages = run_stages(logits, [settings], capture=capture, min_window=top_n)
            token_ids, draws = draw(stages, [settings.greedy], [generator])
            token_id = int(token_ids[0])
            if capture:
                ((candidate_ids, stage_summaries),) = summarise(stages, token_ids, top_n, [settings.order])
                candidates = tuple(self.pieces(i) for i in candidate_ids)
            else:
                candidates, stage_summaries = (), ()
            sampling_ms = (time.perf_counter() - started) * 1000

            # 2. Stop conditions, then the text a viewer may see.
            is_eos = token_id in self.eos_token_ids and not ignore_eos
            if not is_eos:
                text.push(token_id)
            stop_reason = (
                "eos" if is_eos else "stop_string" if text.stopped else "max_tokens" if step == max_new_tokens - 1 else None
            )
            if stop_reason is not None:
                text.flush()
            token = self.pieces(token_id)
            yield StepRecord(
                step=step,
                token_id=token_id,
                piece=token.piece,
                special=token.special,
                text=text.visible,
                candidates=candidates,
                stages=stage_summaries,
                chosen_rank=draws[0].rank,
                draw=draws[0],
                seed=seed,
                forward_ms=round(decoder.forward_ms, 3),
                sampling_ms=round(sampling_ms, 3),
                stop_reason=stop_reason,
                order=settings.order,
            )
            if stop_reason is not None:
                return
            # 3. Append the token: one forward pass over it, reusing the KV cache.
            logits = decoder.step(token_id)


__all__ = ["ModelService", "PlaygroundService", "DrawInfo", "as_settings"]
