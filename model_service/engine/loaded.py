"""What the engine needs of a loaded model, and nothing of the service around it: the model, its tokenizer,
its token pieces, its end-of-text ids, and the lock every forward pass holds. The scheduler and each row's
state take this, so a scheduler process builds one from a fresh load without building a whole ModelService
(which would import the scheduler process back: a cycle)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .pieces import PieceTable


@dataclass(eq=False)
class LoadedModel:
    model: Any  # a transformers causal LM, eval mode, on its device; None once the service is closed
    tokenizer: Any
    pieces: PieceTable
    eos_token_ids: set[int]
    lock: threading.RLock = field(default_factory=threading.RLock)  # held by every forward pass

    @classmethod
    def of(cls, model, tokenizer, eos_token_ids) -> LoadedModel:
        if getattr(model, "device", None) is not None and model.device.type == "cuda":
            import torch

            # PyTorch picks cuDNN's attention for a decode step with more than one row, and cuDNN builds an
            # execution plan for every new key length, so on the CPU side: measured on an H200 with Llama-3.1-8B,
            # 1.3 ms per layer, 40 of a step's 60 ms at 8-64 rows (the GPU worked 9). Flash / memory-efficient
            # attention take the same inputs without a plan per shape. Process-wide, like every SDPA switch.
            torch.backends.cuda.enable_cudnn_sdp(False)
        return cls(model, tokenizer, PieceTable(tokenizer), set(eos_token_ids))

    @property
    def pad_id(self) -> int:
        """What pads a batch's shorter rows: the tokenizer's pad token, else an end-of-text id."""
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else next(iter(self.eos_token_ids), 0)

    def breakers(self, strings: tuple[str, ...]) -> frozenset[int]:
        """The ids of the tokens whose text holds one of these DRY sequence breakers (llama.cpp's rule for a
        breaker within one token), computed once per set of strings."""
        cache = self.__dict__.setdefault("_breakers", {})
        if strings not in cache:
            texts = self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))], skip_special_tokens=False,
                                                clean_up_tokenization_spaces=False)
            cache[strings] = frozenset(i for i, text in enumerate(texts) if any(b in text for b in strings))
        return cache[strings]

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


__all__ = ["LoadedModel"]
