"""The answers as plain dicts in OpenAI's shapes: a whole response, or server-sent chunks as the records come.

An Answer follows one request's records, choice by choice. A record's `text` is the text generated so far that
is safe to show (no partial character, no partial stop string: model_service/records/step.py), so a chunk's
text is what that text gained since the last one; a stop string never reaches the answer, nor the end-of-text
token. finish_reason: "stop" (end-of-text or a stop string), "length" (max_tokens).

A completion with echo starts with its prompt; with logprobs too, its logprobs start with the prompt's (the
service's prompt_logprobs: a stream's first chunk carries them with the echoed text). With max_tokens 0 that is
the whole answer: nothing is generated, finish_reason "length".
"""

from __future__ import annotations

import secrets
import time

from model_service.records.prompt import PromptLogprobs
from model_service.records.step import StepRecord

from . import logprobs as lp
from .schema import Plan

FINISH = {"eos": "stop", "stop_string": "stop", "max_tokens": "length"}


class Choice:
    """One choice's text, tokens and records so far."""

    def __init__(self, index: int):
        self.index, self.text, self.tokens, self.finish = index, "", 0, None
        self.records: list[StepRecord] = []

    def add(self, record: StepRecord) -> tuple[str, int]:
        """Take a record: (the text it adds, the text's length before it)."""
        before = len(self.text)
        grows = record.text.startswith(self.text)
        delta = record.text[before:] if grows else ""
        if grows:
            self.text = record.text
        self.tokens += 1
        self.records.append(record)
        if record.stop_reason is not None:
            self.finish = FINISH.get(record.stop_reason, "stop")
        return delta, before


class Answer:
    """A request's answer: built up record by record; `chunks` for a stream, `response` at the end."""

    def __init__(self, plan: Plan, model: str, prompt_tokens: int, playground: dict,
                 prompt: PromptLogprobs | None = None):
        """prompt: the prompt's logprobs, for a completion with echo and logprobs."""
        self.plan, self.model, self.prompt_tokens, self.playground = plan, model, prompt_tokens, playground
        self.id = ("chatcmpl-" if plan.chat else "cmpl-") + secrets.token_hex(12)
        self.created = int(time.time())
        self.choices = [Choice(i) for i in range(plan.n)]
        for choice in self.choices if plan.max_tokens == 0 else ():
            choice.finish = "length"  # echo with nothing generated: the answer is the prompt
        self.echo = plan.prompt if plan.echo else ""
        self.echoed = lp.prompt_logprobs(prompt, plan.logprobs) if prompt is not None and plan.logprobs is not None else None

    # ---- shared parts --------------------------------------------------------------------------------------
    def _head(self, obj: str) -> dict:
        head = {"id": self.id, "object": obj, "created": self.created, "model": self.model}
        return {**head, "system_fingerprint": None} if self.plan.chat else head

    def usage(self) -> dict:
        completion = sum(c.tokens for c in self.choices)
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                "total_tokens": self.prompt_tokens + completion}

    def _logprobs(self, records: list[StepRecord], start: int = 0, echoed: bool = False):
        """The logprobs of these records (echoed: after the echoed prompt's, for a whole answer)."""
        plan = self.plan
        if plan.logprobs is None:
            return None
        if plan.chat:
            return lp.chat_logprobs(records, plan.logprobs_mode, plan.logprobs)
        generated = lp.completion_logprobs(records, plan.logprobs_mode, plan.logprobs, start, len(self.echo))
        return lp.joined(self.echoed, generated) if echoed and self.echoed is not None else generated

    # ---- a stream ---------------------------------------------------------------------------------------------
    def _chunk(self, index: int, text: str | None, logprobs, finish: str | None, role: bool = False) -> dict:
        if self.plan.chat:
            delta = {"role": "assistant", "content": ""} if role else ({"content": text} if text else {})
            choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            return {**self._head("chat.completion.chunk"), "choices": [choice]}
        choice = {"index": index, "text": text or "", "logprobs": logprobs, "finish_reason": finish}
        return {**self._head("text_completion"), "choices": [choice]}

    def opening(self) -> list[dict]:
        """What a stream starts with: each choice's role (chat) or echoed prompt (completions), and, on the
        first chunk, where the lab opens the records (the `playground` field)."""
        if self.plan.chat:
            chunks = [self._chunk(c.index, None, None, None, role=True) for c in self.choices]
        else:
            chunks = [self._chunk(c.index, self.echo, self.echoed, c.finish) for c in self.choices]
        chunks[0]["playground"] = self.playground
        return chunks

    def step(self, index: int, record: StepRecord) -> list[dict]:
        """The chunks for one record of choice `index` (none when it adds no text, no logprobs and no end)."""
        choice = self.choices[index]
        delta, before = choice.add(record)
        logprobs = self._logprobs([record], before) if lp.counted(record) else None
        if not delta and logprobs is None and choice.finish is None:
            return []
        return [self._chunk(index, delta, logprobs, choice.finish)]

    def usage_chunk(self) -> dict:
        """stream_options.include_usage: the last chunk, with no choices."""
        return {**self._head("chat.completion.chunk" if self.plan.chat else "text_completion"), "choices": [],
                "usage": self.usage()}

    # ---- a whole response --------------------------------------------------------------------------------------
    def response(self) -> dict:
        out = []
        for c in self.choices:
            logprobs = self._logprobs(c.records, echoed=True)
            if self.plan.chat:
                message = {"role": "assistant", "content": c.text, "refusal": None}
                out.append({"index": c.index, "message": message, "logprobs": logprobs, "finish_reason": c.finish})
            else:
                out.append({"index": c.index, "text": self.echo + c.text, "logprobs": logprobs,
                            "finish_reason": c.finish})
        obj = "chat.completion" if self.plan.chat else "text_completion"
        return {**self._head(obj), "choices": out, "usage": self.usage(), "playground": self.playground}


__all__ = ["Answer", "Choice", "FINISH"]
