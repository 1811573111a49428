"""The OpenAI-compatible routes on the app's own port: GET /v1/models (and /v1/models/{id}), POST /v1/completions
and POST /v1/chat/completions, each answered whole or streamed as server-sent events (`data: {...}` chunks, then
`data: [DONE]`).

Every request goes through the service the page uses (any ModelClient: a LoadingService in this process, a
RemoteService in front of --service), so it joins the room's scheduler like a learner: batched with everyone,
under the same caps and queue limit, and its row is freed when its client hangs up (the stream is closed between
two records, or by the server cancelling a stream that lost its client). The service's calls block: they run in
threads of their own (limits.API_THREADS), never on the event loop. A streamed request that waits for a row gets
SSE comments (`: waiting: 3 ahead`), which every SSE client skips.

app.py mounts them with `demo.launch(**launch_kwargs(service, access))`: Gradio builds its FastAPI app with these
routes first (app_kwargs), so the page, its API and these share one server.
"""

from __future__ import annotations

import asyncio
import json
import time

import anyio
import gradio as gr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from model_service.models.catalog import CATALOG
from model_service.records import validation
from model_service.records.step import BatchStep, StepRecord, Waiting
from playground import limits

from ..common.address import base_url
from ..common.lab_link import lab_link, run_controls
from . import schema
from .access import Access
from .errors import ApiError, bad, from_exception, not_found
from .responses import Answer

OWNER = "next-token-playground"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no proxy may hold the chunks back
LINK_HEADER = "X-Playground-Lab-Link"


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def read_json(request: Request):
    """The body as JSON, at most limits.API_MAX_BODY_BYTES."""
    cap = limits.API_MAX_BODY_BYTES
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > cap:
        raise ApiError(413, f"the request body has {int(length):,} bytes; the limit here is {cap:,}")
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > cap:
            raise ApiError(413, f"the request body has more than {cap:,} bytes, the limit here")
    try:
        return json.loads(bytes(body))
    except ValueError as e:
        raise bad(f"the request body must be JSON: {e}") from None


LAB_LINK_NOTE = ("the lab's chat toggle takes one user message: this link opens the lab with the conversation's last "
                 "user message alone, so the lab's run reads a shorter prompt than this answer's")


def lab_link_of(request: Request, plan: schema.Plan, settings) -> str:
    """Where the lab opens this choice's run: its prompt, chat toggle and settings (seed included) as a link. A
    conversation's link carries its last user message only (LAB_LINK_NOTE says so in the answer)."""
    controls = run_controls(plan.lab_prompt, plan.chat, settings, max(1, plan.max_tokens), plan.stop)
    return lab_link(base_url(gr.Request(request)), controls)


def records_of(item) -> list[tuple[int, StepRecord]]:
    """(choice, record) pairs of one item of the service's stream: a StepRecord (n = 1) or a BatchStep (n > 1)."""
    if isinstance(item, BatchStep):
        return [(i, r) for i, r in enumerate(item.rows) if r is not None]
    return [(0, item)] if isinstance(item, StepRecord) else []


def sse(data) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


def close(stream) -> None:
    """Hang up on the service: the request leaves the room's batch at its next step (or the queue at once)."""
    getattr(stream, "close", lambda: None)()


class Api:
    """The routes' state: the service, the access rule, and the threads that wait on the service."""

    def __init__(self, service, access: Access):
        self.service, self.access = service, access
        self.started = int(time.time())
        self._limiter: anyio.CapacityLimiter | None = None

    async def thread(self, fn, *args):
        if self._limiter is None:  # made on the server's loop
            self._limiter = anyio.CapacityLimiter(limits.API_THREADS)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)

    async def guard(self, request: Request) -> None:
        refused = self.access.refusal(request.headers.get("authorization"))
        if refused is not None:
            error, slow = refused
            if slow:
                await asyncio.sleep(limits.HOST_KEY_DELAY_SECONDS)
            raise error

    # ---- the model ----------------------------------------------------------------------------------------
    def served(self) -> tuple[str, set[str], dict]:
        """(the model's id, the names a request may use for it, what /v1/models says of it). Blocks: a
        RemoteService asks its service."""
        status = self.service.status
        # a LoadingService's catalog key (known while it loads); else the model's name (a RemoteService not
        # reached yet raises ServiceNotReady here, saying where it waits)
        key = getattr(self.service, "current", "") or self.service.info.name
        entry = CATALOG.get(key)
        model_id = entry.hub_id if entry else key
        names = {key, model_id}
        try:
            names.add(self.service.info.name)
        except validation.Unavailable:
            pass  # still loading: the id and the key are known
        extra = {"key": key, "ready": status.ready, "status": status.message}
        return model_id, {n.lower() for n in names if n}, extra

    def card(self, model_id: str, extra: dict) -> dict:
        return {"id": model_id, "object": "model", "created": self.started, "owned_by": OWNER, "playground": extra}

    async def models(self, request: Request) -> Response:
        try:
            await self.guard(request)
            model_id, _, extra = await self.thread(self.served)
        except Exception as e:  # noqa: BLE001 (every failure is an answer in OpenAI's shape)
            return error_response(from_exception(e))
        return JSONResponse({"object": "list", "data": [self.card(model_id, extra)]})

    async def model(self, request: Request) -> Response:
        try:
            await self.guard(request)
            model_id, names, extra = await self.thread(self.served)
            asked = request.path_params["model"]
            if asked.lower() not in names:
                raise not_found(f"the model {asked!r} is not served here: this room serves {model_id!r}")
        except Exception as e:  # noqa: BLE001
            return error_response(from_exception(e))
        return JSONResponse(self.card(model_id, extra))

    # ---- completions -----------------------------------------------------------------------------------------
    async def completions(self, request: Request) -> Response:
        return await self.answer(request, "completion")

    async def chat(self, request: Request) -> Response:
        return await self.answer(request, "chat")

    def start(self, plan: schema.Plan):
        """The service's stream for a plan, the prompt's length in tokens and, for echo with logprobs, the
        prompt's logprobs (blocks: tokenizing, queueing, that forward pass). The prompt is tokenised once, here:
        the service runs its token ids (a chat's template included). Bad input and a full room raise here, before
        anything is queued."""
        prompt = None
        if plan.echo and plan.logprobs is not None:  # one forward pass over the prompt, beside the room's batch
            prompt = self.service.prompt_logprobs(plan.prompt, plan.chat, top_n=plan.logprobs)
            ids = [position.token.id for position in prompt.positions]
        else:
            ids = self.service.encode(plan.prompt, plan.chat)
        top_n = limits.API_MAX_TOP_LOGPROBS  # what logprobs may ask for (and what the lab keeps per step)
        if plan.max_tokens == 0:  # echo alone: nothing to generate
            stream = iter(())
        elif plan.n == 1:
            settings, = plan.settings
            stream = self.service.generate(ids, settings, plan.max_tokens, plan.stop, top_n=top_n,
                                           report_waiting=plan.stream)
        else:
            stream = self.service.generate_batch(plan.requests(ids), top_n, report_waiting=plan.stream)
        return stream, len(ids), prompt

    async def answer(self, request: Request, kind: str) -> Response:
        prompt_field = "messages" if kind == "chat" else "prompt"
        try:
            await self.guard(request)
            body = await read_json(request)
            model_id, names, _ = await self.thread(self.served)
            asked = body.get("model") if isinstance(body, dict) else None
            if isinstance(asked, str) and asked.lower() not in names:
                raise not_found(f"the model {asked!r} is not served here: this room serves {model_id!r} "
                                f"(GET /v1/models lists it)")
            plan = schema.parse(body, kind)
            links = [lab_link_of(request, plan, s) for s in plan.settings]
            stream, prompt_tokens, prompt = await self.thread(self.start, plan)
        except Exception as e:  # noqa: BLE001
            return error_response(from_exception(e, prompt_field))
        playground = {"lab_link": links[0], "lab_links": links, "seeds": [s.seed for s in plan.settings],
                      "logprobs_mode": plan.logprobs_mode}
        if plan.conversation:
            playground["lab_link_note"] = LAB_LINK_NOTE
        answer = Answer(plan, model_id, prompt_tokens, playground, prompt)
        headers = {LINK_HEADER: links[0]}
        if plan.stream:
            return StreamingResponse(self.events(request, stream, answer), media_type="text/event-stream",
                                     headers={**SSE_HEADERS, **headers})
        try:
            done = await self.collect(request, stream, answer)
        except Exception as e:  # noqa: BLE001
            return error_response(from_exception(e, prompt_field))
        if not done:
            return Response(status_code=499)  # the client left: nobody reads this
        return JSONResponse(answer.response(), headers=headers)

    async def collect(self, request: Request, stream, answer: Answer) -> bool:
        """Every record into the answer; False when the client hung up first (the stream is closed)."""
        try:
            while True:
                if await request.is_disconnected():
                    return False
                item = await self.thread(next, stream, None)
                if item is None:
                    return True
                for index, record in records_of(item):
                    answer.choices[index].add(record)
        finally:
            close(stream)

    async def events(self, request: Request, stream, answer: Answer):
        """The stream's chunks. An error after the first chunk is a last `data: {"error": ...}` event (the
        openai package raises it as an APIError), then [DONE]."""
        plan = answer.plan
        try:
            for chunk in answer.opening():
                yield sse(chunk)
            while True:
                if await request.is_disconnected():
                    return
                item = await self.thread(next, stream, None)
                if item is None:
                    break
                if isinstance(item, Waiting):
                    yield f": waiting: {item.ahead} ahead of this request\n\n"
                    continue
                for index, record in records_of(item):
                    for chunk in answer.step(index, record):
                        yield sse(chunk)
            if plan.include_usage:
                yield sse(answer.usage_chunk())
        except Exception as e:  # noqa: BLE001 (the response has begun: say it in the stream)
            yield sse(from_exception(e, plan.prompt_field).body())
        finally:
            close(stream)  # synchronous: it must run even when the server cancels this generator
        yield "data: [DONE]\n\n"


def routes(service, access: Access) -> list[Route]:
    api = Api(service, access)
    return [
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/v1/models/{model:path}", api.model, methods=["GET"]),
        Route("/v1/completions", api.completions, methods=["POST"]),
        Route("/v1/chat/completions", api.chat, methods=["POST"]),
    ]


def launch_kwargs(service, access: Access) -> dict:
    """What app.py (and the tests) add to demo.launch(): Gradio's FastAPI app is built with these routes."""
    return {"app_kwargs": {"routes": routes(service, access)}}


__all__ = ["Api", "LINK_HEADER", "lab_link_of", "launch_kwargs", "routes"]
