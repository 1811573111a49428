"""A ModelClient (model_service/client.py) whose model runs elsewhere: the Ray Serve deployment of model_service/deploy/ray_serve.py.

`app.py --service http://host:8000` puts a RemoteService where a LoadingService would be; the UI does not
change. It answers like a LoadingService (status, service, epoch, the one model) and returns the same frozen
records as the in-process ModelService, rebuilt from their JSON (model_service/records/wire.py).

What the visitor sees when the service is away: while it does not answer, the page's status line says it is
waiting for the model service, and a call fails with "the model service is not answering"; a stream cut
mid-run (a replica died) ends with "the model service stopped during this run: run it again". Nothing here
keeps state beyond the last /info answer, so a restarted service is picked up on the next call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx

from ..client import BatchCall, DrawCall, GenerateCall, ModelClient
from ..forward_pass.lm_head import LmHeadView
from ..models.switching import ServiceNotReady
from ..records import validation, wire
from ..records.batch_effect import BatchEffect
from ..records.intervention import Attribution, Knockout, KnockoutResult, PatchResult, SteerResult
from ..records.precision import PrecisionEffect
from ..records.prompt import PromptLogprobs
from ..records.settings import request_from, settings_from
from ..records.step import LoadStatus, ManyDraws, ModelInfo, Room, Token, WhatIf
from ..records.trace import AttentionMap, Trace
from ..records.validation import Unavailable

INFO_TTL_S = 1.0  # the page polls status often; one /info call per second is plenty


class RemoteService(ModelClient):
    switching = None  # a remote model is switched where it runs, not from the page

    def __init__(self, url: str, connect_timeout: float = 5.0):
        self.url = url.rstrip("/")
        # no read timeout on streams: a step can wait behind a long queue; connecting must be quick
        self._http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(connect_timeout, read=None, write=30, pool=30))
        self._lock = threading.Lock()
        self._info: dict | None = None
        self._checked = 0.0
        self._error: str | None = None
        self._started: float | None = None
        self.epoch = 0
        self.current = ""
        self.models: tuple[str, ...] = ()

    # ---- what the page reads (the LoadingService surface) ----------------------------------------------------

    def _refresh(self, force: bool = False) -> dict | None:
        with self._lock:
            if not force and time.monotonic() - self._checked < INFO_TTL_S:
                return self._info
            self._checked = time.monotonic()
            try:
                response = self._http.get("/info", timeout=5.0)
                response.raise_for_status()
                info = response.json()
            except (httpx.HTTPError, ValueError) as e:
                self._info, self._error = None, f"{type(e).__name__}"
                return None
            if info.get("started") != self._started or info["model"]["name"] != self.current:
                self.epoch += 1  # a new replica or another model: pages re-read their numbers
                self._started = info.get("started")
            self._info, self._error = info, None
            self.current = info["model"]["name"]
            self.models = (self.current,)
            return info

    @property
    def status(self) -> LoadStatus:
        info = self._refresh()
        if info is None:
            return LoadStatus(0.0, f"waiting for the model service at {self.url}", False)
        return LoadStatus(1.0, wire.model_info(info["model"]).describe(), True)

    def wait(self, timeout: float | None = None) -> LoadStatus:
        deadline = time.monotonic() + (timeout if timeout is not None else 600)
        while True:
            status = self.status
            if status.ready or time.monotonic() >= deadline:
                return status
            time.sleep(min(INFO_TTL_S, max(0.0, deadline - time.monotonic())))

    @property
    def service(self) -> RemoteService:
        if self._refresh() is None:
            raise ServiceNotReady("loading", percent="0%", message=f"waiting for the model service at {self.url}")
        return self

    @property
    def info(self) -> ModelInfo:
        info = self.service._info
        return wire.model_info(info["model"])

    @property
    def description(self) -> str:
        return self.info.describe()

    def switch(self, key: str):
        raise Unavailable("model_choice", field="model", choices=self.current, got=key)

    # ---- the client interface (client.py) ---------------------------------------------------------------------------

    def _post(self, path: str, body: dict):
        try:
            response = self._http.post(path, json=body, timeout=httpx.Timeout(5.0, read=300.0))
        except httpx.HTTPError:
            self._checked = 0.0
            raise _away(self.url) from None
        return _json_or_raise(response)

    def _stream(self, path: str, body: dict) -> _RemoteStream:
        request = self._http.build_request("POST", path, json=body)
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError:
            self._checked = 0.0
            raise _away(self.url) from None
        if response.status_code != 200:  # refused before anything ran: bad input, a full room
            response.read()
            response.close()
            _json_or_raise(response)
        return _RemoteStream(response, self)

    def _generate(self, call: GenerateCall) -> Iterator:
        return self._stream("/generate", _generate_body(call))

    def _what_if(self, call: GenerateCall) -> WhatIf:
        """On the replica that kept the run (a deployment of one replica, or a session's affinity): elsewhere it
        recomputes the step with one forward pass."""
        return WhatIf.from_dict(self._post("/what_if", _generate_body(call)))

    def _generate_batch(self, call: BatchCall):
        rows = []
        for n, r in enumerate(call.requests, start=1):
            try:
                rows.append(request_from(r).to_dict())
            except (ValueError, TypeError) as e:
                raise ValueError(f"request {n}: {e}") from None
        return self._stream("/generate_batch", {"requests": rows, "top_n": call.top_n,
                                                "report_waiting": call.report_waiting})

    def _room(self) -> Room:
        try:
            response = self._http.get("/room", timeout=5.0)
        except httpx.HTTPError:
            raise _away(self.url) from None
        return wire.room(_json_or_raise(response))

    def _trace(self, prompt, chat, block, top_n):
        return Trace.from_dict(self._post("/trace", {"prompt": prompt, "chat": chat, "block": block, "top_n": top_n}))

    def _trace_attention(self, prompt, chat, block):
        return AttentionMap.from_dict(self._post("/trace_attention", {"prompt": prompt, "chat": chat, "block": block}))

    def _attribute(self, prompt, chat, candidate, rival, head_block):
        body = {"prompt": prompt, "chat": chat, "candidate": candidate, "rival": rival, "head_block": head_block}
        return Attribution.from_dict(self._post("/attribute", body))

    def _precision_effect(self, prompt, chat, precision):
        body = {"prompt": prompt, "chat": chat, "precision": precision}
        return PrecisionEffect.from_dict(self._post("/precision_effect", body))

    def _knock_out(self, prompt, chat, target, settings, candidate, top_n):
        target = target.to_dict() if isinstance(target, Knockout) else target
        body = {"prompt": prompt, "chat": chat, "target": target, "settings": settings_from(settings).to_dict(),
                "candidate": candidate, "top_n": top_n}
        return KnockoutResult.from_dict(self._post("/knock_out", body))

    def _patch(self, prompt, source, chat, cells, candidate):
        body = {"prompt": prompt, "source": source, "chat": chat, "cells": [list(c) for c in cells], "candidate": candidate}
        return PatchResult.from_dict(self._post("/patch", body))

    def _steer(self, prompt, towards, away, block, scale, settings, max_new_tokens, chat, top_n):
        body = {"prompt": prompt, "towards": towards, "away": away, "block": block, "scale": scale,
                "settings": settings_from(settings).to_dict(), "max_new_tokens": max_new_tokens, "chat": chat,
                "top_n": top_n}
        return SteerResult.from_dict(self._post("/steer", body))

    def _lm_head(self, prompt, chat, continue_from, top_k):
        body = {"prompt": prompt, "chat": chat, "continue_from": list(continue_from), "top_k": top_k}
        return LmHeadView.from_dict(self._post("/lm_head", body))

    def _prompt_logprobs(self, prompt, chat, top_n):
        return PromptLogprobs.from_dict(self._post("/prompt_logprobs", {"prompt": prompt, "chat": chat, "top_n": top_n}))

    def _sample_many(self, call: DrawCall) -> ManyDraws:
        body = {"prompt": call.prompt, "settings": settings_from(call.settings).to_dict(), "chat": call.chat,
                "continue_from": list(call.continue_from), "n": call.n, "seed": call.seed, "top_n": call.top_n}
        return ManyDraws.from_dict(self._post("/sample_many", body))

    def _batch_effect(self, prompt, settings, chat, continue_from, top_n) -> BatchEffect:
        body = {"prompt": prompt, "settings": settings_from(settings).to_dict(), "chat": chat,
                "continue_from": list(continue_from), "top_n": top_n}
        return BatchEffect.from_dict(self._post("/batch_effect", body))

    def _pieces_of(self, ids) -> dict[int, Token]:
        data = self._post("/pieces", {"ids": list(ids)})
        return {int(i): wire.token(t) for i, t in data.items()}

    def _encode(self, prompt, chat) -> list[int]:
        return list(self._post("/encode", {"prompt": prompt, "chat": chat})["ids"])


def _generate_body(call: GenerateCall) -> dict:
    return {"prompt": call.prompt, "settings": settings_from(call.settings).to_dict(),
            "max_new_tokens": call.max_new_tokens, "stop": list(validation.stop_strings("stop", call.stop)),
            "chat": call.chat, "top_n": call.top_n, "capture": call.capture, "ignore_eos": call.ignore_eos,
            "continue_from": list(call.continue_from), "report_waiting": call.report_waiting, "keep": call.keep}


class _RemoteStream:
    """The records of one streamed call; close() (or dropping it) hangs up, and the service frees the row."""

    def __init__(self, response: httpx.Response, owner: RemoteService):
        self._response = response
        self._lines = response.iter_lines()
        self._owner = owner
        self._finished = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        try:
            line = next(self._lines)
            while not line.strip():
                line = next(self._lines)
        except StopIteration:
            self.close()
            raise
        except httpx.HTTPError:  # the connection broke mid-run: the replica died or restarted
            self.close()
            self._owner._checked = 0.0
            raise Unavailable("service_lost") from None
        item = wire.decode(json.loads(line))
        if isinstance(item, Exception):
            self.close()
            raise item
        return item

    def close(self) -> None:
        if not self._finished:
            self._finished = True
            self._response.close()

    def __del__(self):
        self.close()


def _json_or_raise(response: httpx.Response):
    try:
        data = response.json()
    except ValueError:
        raise RuntimeError(f"the model service answered HTTP {response.status_code} without JSON") from None
    if response.status_code == 200:
        return data
    if isinstance(data, dict) and data.get("kind") == "error":
        raise wire.decode_error(data)
    raise RuntimeError(f"the model service answered HTTP {response.status_code}: {str(data)[:200]}")


def _away(url: str) -> Unavailable:
    return Unavailable("service_away", url=url)
