"""The model service as its own process: a Ray Serve deployment that the UI reaches over HTTP.

Each replica wraps one ModelService, and so one room scheduler that batches the rows of the requests it
is given; Ray Serve spreads requests over the replicas and adds or removes replicas with the load
(autoscaling on ongoing requests). Every ModelClient call (model_service/client.py) is a route; streams (generate, a
batch) are newline-delimited JSON, one model_service/records/wire.py record per line, so the UI process
(model_service/deploy/remote.py) rebuilds exactly the records the in-process service returns. A client that
disconnects is cancelled by Serve; the stream's `finally` closes it, and the row leaves the batch at
the next step boundary.

    python -m model_service.deploy.ray_serve [--model smollm2-135m] [--replicas 1 | --min-replicas 1 --max-replicas 4] [--port 8000]
    python app.py --service http://127.0.0.1:8000

Optional: needs requirements-scale.txt (Ray Serve). The UI never imports this module.
"""


import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable, Iterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from ray import serve

from .. import env, limits
from ..records import validation, wire
from ..records.settings import settings_from

api = FastAPI(title="Next-Token Playground model service")
_DONE = object()


def _error(e: BaseException, status: int = 400) -> JSONResponse:
    return JSONResponse(wire.encode_error(e), status_code=status)


def _status_of(e: BaseException) -> int:
    return 400 if isinstance(e, ValueError) else 503


async def _ndjson(records: Iterator) -> Iterator[bytes]:
    """Each record as one JSON line, pulled from the scheduler's stream in a worker thread (the stream
    blocks until the next step). A failure mid-stream becomes a last error line; cancellation (the client
    went away) closes the stream, which frees its row."""
    try:
        while True:
            record = await asyncio.to_thread(next, records, _DONE)
            if record is _DONE:
                return
            yield (json.dumps(wire.encode(record), ensure_ascii=False) + "\n").encode()
    except (ValueError, RuntimeError) as e:
        yield (json.dumps(wire.encode_error(e), ensure_ascii=False) + "\n").encode()
    finally:
        getattr(records, "close", lambda: None)()


# (helpers defined before the class: serve.ingress captures the module's names when the class is decorated)
async def _body(request: Request) -> dict:
    try:
        body = await request.json()
    except ValueError:
        raise ValueError("the request body must be JSON") from None
    if not isinstance(body, dict):
        raise ValueError(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _chat(body: dict) -> bool:
    return validation.boolean("chat", body.get("chat", False))


def _named(error: Exception) -> Exception:
    """A TypeError (a caller's list where a number goes) carried as the ValueError it is: its text names the field."""
    return ValueError(str(error)) if isinstance(error, TypeError) else error


def _plain(value):
    return value.to_dict() if hasattr(value, "to_dict") else value


@serve.deployment(
    max_ongoing_requests=limits.SERVE_MAX_ONGOING,
    autoscaling_config={"min_replicas": 1, "max_replicas": 1, "target_ongoing_requests": limits.SERVE_TARGET_ONGOING},
    health_check_period_s=5,
)
@serve.ingress(api)
class ModelDeployment:
    """One replica: one model, one scheduler. `factory` (optional) builds the ModelService (tests pass a
    tiny model); otherwise the replica loads `model` (a catalog key, None = the embedded default)."""

    def __init__(self, model: str | None = None, factory: Callable | None = None, threads: int | None = None,
                 batch_invariant: bool | None = None, precision: str | None = None):
        from ..models.loading import serve_beside_web_server
        from ..service import ModelService

        serve_beside_web_server(threads)  # the replica's HTTP server streams records beside the scheduler
        self.started = time.time()
        self.service = factory() if factory else ModelService.load(model, batch_invariant=batch_invariant,
                                                                               precision=precision)

    @api.get("/info")
    def info(self) -> dict:
        """What this replica serves: the model, its room, and when it started (a restart shows here)."""
        return {"model": self.service.info.to_dict(), "room": self.service.room().to_dict(), "started": self.started,
                "pid": os.getpid()}

    @api.get("/room")
    def room(self) -> dict:
        return self.service.room().to_dict()

    @api.post("/generate")
    async def generate(self, request: Request):
        def start(b):
            return self.service.generate(
                b.get("prompt"), settings_from(b.get("settings")), b.get("max_new_tokens", limits.DEFAULT_MAX_NEW_TOKENS),
                b.get("stop"), _chat(b), b.get("top_n", limits.DEFAULT_TOP_N), continue_from=b.get("continue_from") or (),
                capture=validation.boolean("capture", b.get("capture", True)),
                ignore_eos=validation.boolean("ignore_eos", b.get("ignore_eos", False)),
                report_waiting=validation.boolean("report_waiting", b.get("report_waiting", False)),
                keep=b.get("keep", ""))
        return await self._stream(request, start)

    @api.post("/what_if")
    async def what_if(self, request: Request):
        return await self._answer(request, lambda b: self.service.what_if(
            b.get("prompt"), settings_from(b.get("settings")), b.get("max_new_tokens", limits.DEFAULT_MAX_NEW_TOKENS),
            b.get("stop"), _chat(b), b.get("top_n", limits.DEFAULT_TOP_N), continue_from=b.get("continue_from") or (),
            keep=b.get("keep", "")))

    @api.post("/generate_batch")
    async def generate_batch(self, request: Request):
        def start(b):  # each row read by settings.request_from inside the service, named "request N"
            return self.service.generate_batch(
                list(b.get("requests") or ()), b.get("top_n", limits.DEFAULT_TOP_N),
                report_waiting=validation.boolean("report_waiting", b.get("report_waiting", False)))
        return await self._stream(request, start)

    async def _stream(self, request: Request, start):
        """A streamed route: the body checked and the run started here (bad input answers 4xx with its key)."""
        try:
            records = start(await _body(request))
        except (ValueError, RuntimeError, TypeError) as e:
            return _error(_named(e), _status_of(e))
        return StreamingResponse(_ndjson(records), media_type="application/x-ndjson")

    async def _answer(self, request: Request, work):
        """A JSON route: work(body) -> a record, run off the event loop; every failure of its input is named."""
        try:
            body = await _body(request)
            return await asyncio.to_thread(lambda: _plain(work(body)))
        except (ValueError, RuntimeError, TypeError) as e:
            return _error(_named(e), _status_of(e))

    @api.post("/trace")
    async def trace(self, request: Request):
        return await self._answer(request, lambda b: self.service.trace(
            b.get("prompt"), _chat(b), b.get("block"), b.get("top_n", limits.DEFAULT_TRACE_TOP_N)))

    @api.post("/trace_attention")
    async def trace_attention(self, request: Request):
        return await self._answer(request, lambda b: self.service.trace_attention(b.get("prompt"), _chat(b), b.get("block", 1)))

    @api.post("/attribute")
    async def attribute(self, request: Request):
        return await self._answer(request, lambda b: self.service.attribute(
            b.get("prompt"), _chat(b), b.get("candidate"), b.get("rival"), b.get("head_block")))

    @api.post("/precision_effect")
    async def precision_effect(self, request: Request):
        return await self._answer(request, lambda b: self.service.precision_effect(b.get("prompt"), _chat(b),
                                                                                        b.get("precision")))

    @api.post("/knock_out")
    async def knock_out(self, request: Request):
        return await self._answer(request, lambda b: self.service.knock_out(
            b.get("prompt"), b.get("target"), b.get("settings"), _chat(b), b.get("candidate"),
            b.get("top_n", limits.DEFAULT_TOP_N)))

    @api.post("/patch")
    async def patch(self, request: Request):
        return await self._answer(request, lambda b: self.service.patch(
            b.get("prompt"), b.get("source"), b.get("cells"), _chat(b), b.get("candidate")))

    @api.post("/steer")
    async def steer(self, request: Request):
        return await self._answer(request, lambda b: self.service.steer(
            b.get("prompt"), b.get("towards"), b.get("away"), b.get("block"), b.get("scale"), b.get("settings"),
            b.get("max_new_tokens", 24), _chat(b), b.get("top_n", limits.DEFAULT_TOP_N)))

    @api.post("/lm_head")
    async def lm_head(self, request: Request):
        return await self._answer(request, lambda b: self.service.lm_head(
            b.get("prompt"), _chat(b), b.get("continue_from") or (), b.get("top_k", limits.DEFAULT_LM_HEAD_TOP_K)))

    @api.post("/prompt_logprobs")
    async def prompt_logprobs(self, request: Request):
        return await self._answer(request, lambda b: self.service.prompt_logprobs(
            b.get("prompt"), _chat(b), b.get("top_n", limits.DEFAULT_PROMPT_TOP_N)))

    @api.post("/sample_many")
    async def sample_many(self, request: Request):
        return await self._answer(request, lambda b: self.service.sample_many(
            b.get("prompt"), settings_from(b.get("settings")), _chat(b), b.get("continue_from") or (),
            n=b.get("n", limits.DEFAULT_MANY_DRAWS), seed=b.get("seed"), top_n=b.get("top_n", limits.DEFAULT_TOP_N)))

    @api.post("/batch_effect")
    async def batch_effect(self, request: Request):
        return await self._answer(request, lambda b: self.service.batch_effect(
            b.get("prompt"), settings_from(b.get("settings")), _chat(b), b.get("continue_from") or (),
            top_n=b.get("top_n", limits.DEFAULT_TOP_N)))

    @api.post("/pieces")
    async def pieces(self, request: Request):
        return await self._answer(request, lambda b: {str(i): t.to_dict() for i, t in self.service.pieces_of(b.get("ids") or ()).items()})

    @api.post("/encode")
    async def encode(self, request: Request):
        return await self._answer(request, lambda b: {"ids": self.service.encode(b.get("prompt"), _chat(b))})


def application(model: str | None = None, *, replicas: int | None = None, min_replicas: int = 1, max_replicas: int = 1,
                factory: Callable | None = None, threads: int | None = None, num_cpus: float = 1, num_gpus: float = 0,
                target_ongoing: int | None = None, batch_invariant: bool | None = None, precision: str | None = None):
    """The bound application: a fixed number of replicas, or autoscaling between min and max. num_gpus: per
    replica (1 on a GPU cluster: Ray places each replica on its own card); target_ongoing: the ongoing requests
    per replica the autoscaler aims at (default limits.SERVE_TARGET_ONGOING, sized for a CPU replica)."""
    if replicas:
        min_replicas = max_replicas = replicas
    options = {"autoscaling_config": {"min_replicas": min_replicas, "max_replicas": max_replicas,
                                      "initial_replicas": min_replicas,
                                      "target_ongoing_requests": target_ongoing or limits.SERVE_TARGET_ONGOING},
               "ray_actor_options": {"num_cpus": num_cpus, "num_gpus": num_gpus}}
    return ModelDeployment.options(**options).bind(model, factory, threads, batch_invariant, precision)


def main(argv=None) -> None:
    import ray

    ap = argparse.ArgumentParser(description="Serve the playground's model over HTTP with Ray Serve.")
    ap.add_argument("--model", default=env.text(env.MODEL), help="catalog key (default: the embedded model)")
    ap.add_argument("--replicas", type=int, default=None, help="a fixed number of replicas")
    ap.add_argument("--min-replicas", type=int, default=1)
    ap.add_argument("--max-replicas", type=int, default=1)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--address", default=None, help="an existing Ray cluster (default: start one here)")
    ap.add_argument("--num-cpus", type=float, default=1, help="CPUs reserved per replica")
    ap.add_argument("--num-gpus", type=float, default=0, help="GPUs per replica (1 on a GPU cluster)")
    ap.add_argument("--target-ongoing", type=int, default=None,
                    help=f"ongoing requests per replica the autoscaler aims at (default {limits.SERVE_TARGET_ONGOING}; "
                         f"a GPU replica batches up to {limits.MAX_ROWS_GPU} rows)")
    ap.add_argument("--batch-invariant", type=lambda v: validation.boolean("--batch-invariant", v),
                    default=env.batch_invariant(),
                    metavar="true|false", help="a row's logits bit-identical in any batch (default: NTP_BATCH_INVARIANT, "
                                               "else the device's default)")
    ap.add_argument("--precision", default=env.precision(), choices=limits.PRECISIONS,
                    help="the weights': fp32, bf16, int8 or int4 (default: NTP_PRECISION, else the device's; "
                         "docs/precision.md)")
    args = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # replicas import model_service from this checkout, wherever Ray starts their processes
    runtime_env = {"env_vars": {"PYTHONPATH": root + os.pathsep + (env.text(env.PYTHONPATH) or "")}}
    ray.init(address=args.address, include_dashboard=False, runtime_env=runtime_env)
    serve.start(http_options={"host": args.host, "port": args.port})
    serve.run(application(args.model, replicas=args.replicas, min_replicas=args.min_replicas,
                          max_replicas=args.max_replicas, num_cpus=args.num_cpus, num_gpus=args.num_gpus,
                          target_ongoing=args.target_ongoing, batch_invariant=args.batch_invariant,
                          precision=args.precision),
           name="playground", route_prefix="/")
    print(f"model service on http://{args.host}:{args.port}/ — run the UI with: python app.py --service "
          f"http://{args.host}:{args.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()


if __name__ == "__main__":
    # run the module's own copy, not __main__'s: Ray pickles the deployment by reference to an importable module
    from . import ray_serve as importable

    importable.main()
