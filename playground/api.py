"""Endpoints for scripts and notebooks: the records as JSON (every UI event has an api_name too).

    from gradio_client import Client
    client = Client("http://127.0.0.1:7860/")
    for record in client.submit("The capital of France is", 0.8, 0, 0.95, 0.0, 1, api_name="/stream_records"):
        print(record["piece"], record["stages"][-1]["chosen_prob"])

Every argument is checked here, before anything runs: a bad one ends the call with a message that
names it, its value and what is allowed (`job.result()` raises it as gradio_client's AppError).
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any

import gradio as gr

from model_service.records import validation
from model_service.records.knobs import BY_NAME, KNOBS, LAB_KNOBS, TEXT_KNOBS
from model_service.records.settings import parse_settings
from model_service.records.step import Waiting
from playground import limits

from .common.errors import user_error


def _parameter(name: str, default, annotation=Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)


# /stream_records' parameters, in the order a positional caller sends them: the prompt, the lesson's knobs, the run's
# own, then every other knob in the rows' order (records/knobs.py; a text knob's default is null: its own default).
STREAM_PARAMETERS = inspect.Signature([
    _parameter("prompt", inspect.Parameter.empty, str),
    *(_parameter(k.name, k.default) for k in KNOBS if k.group == "lesson"),
    _parameter("seed", None), _parameter("order", "hf", str),
    _parameter("max_new_tokens", limits.DEFAULT_MAX_NEW_TOKENS), _parameter("stop", None), _parameter("chat", False),
    _parameter("top_n", limits.DEFAULT_TOP_N), _parameter("report_waiting", False),
    *(_parameter(name, None if name in TEXT_KNOBS else BY_NAME[name].default) for name in LAB_KNOBS),
], return_annotation=Generator[dict, None, None])  # gr.api needs Generator (not Iterator) to stream


def stream_records_of(service):
    """The /stream_records endpoint of `service` (its knobs are the lab's, by name: STREAM_PARAMETERS)."""

    def stream_records(*args, **kwargs):
        """Stream one JSON step record per generated token: the token, the text so far, every stage's
        top-N probabilities, kept counts and masses, entropies, the random draw and timings. The last
        record carries stop_reason ("eos", "max_tokens" or "stop_string"). stop: a list of strings,
        each used exactly as given (or one string). seed: a whole number below 2**53, or null.
        A token that holds part of a character (a byte-level piece) has its bytes in bytes_hex (the
        chosen token's, and each candidate's), and pending_hex holds the bytes generated before this
        step that do not make a whole character yet: model_service/records/utf8.py:read_piece reads them.
        report_waiting: while the room's rows are all taken, first yield {"waiting": {"position", "ahead",
        "queue_length"}} each time this request's place in the queue changes (no token fields).
        logit_bias ({"token id": bias} or "13:-100, 42:5") and the penalties come first in every order; which
        tokens a penalty counts is the order's rule (docs/sampling.md); "hf" has no frequency or presence
        penalty. no_repeat_ngram_size ("hf") and min_tokens ("hf", "vllm") ban tokens. The other samplers
        (docs/sampling.md): an order whose engine lacks one refuses it. order may be a
        list of stage names (or chain, with order "custom"): a custom chain, after the bias, penalties and DRY."""
        try:
            given = STREAM_PARAMETERS.bind(*args, **kwargs)
        except TypeError as e:  # too many values, or a name it does not take
            raise user_error(ValueError(f"stream_records: {e}")) from None
        given.apply_defaults()
        a = given.arguments
        try:
            records = service.generate(
                validation.text("prompt", a["prompt"]),
                parse_settings(a["temperature"], a["top_k"], a["top_p"], a["min_p"], a["seed"], a["order"],
                               **{name: a[name] for name in LAB_KNOBS}),
                max_new_tokens=validation.number("max_new_tokens", a["max_new_tokens"], integer=True, low=1,
                                                 high=limits.MAX_NEW_TOKENS),
                stop=validation.stop_strings("stop", a["stop"]),
                chat=validation.boolean("chat", a["chat"]),
                top_n=validation.number("top_n", a["top_n"], integer=True, low=1, high=limits.MAX_TOP_N),
                report_waiting=validation.boolean("report_waiting", a["report_waiting"]),
            )
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None
        try:
            for record in records:
                yield {"waiting": record.to_dict()} if isinstance(record, Waiting) else record.to_dict()
        finally:
            getattr(records, "close", lambda: None)()  # a dropped client frees its row at once

    # what Gradio reads to list the endpoint's parameters (gr.api: the signature and its type hints)
    stream_records.__signature__ = STREAM_PARAMETERS
    stream_records.__annotations__ = {**{p.name: p.annotation for p in STREAM_PARAMETERS.parameters.values()},
                                      "return": STREAM_PARAMETERS.return_annotation}
    return stream_records


def register_api(service) -> None:
    """Call inside a Blocks context."""
    stream_records = stream_records_of(service)

    def trace_record(prompt: str, chat: Any = False, block: Any = None, top_n: Any = 5) -> dict:
        """The forward-pass trace as JSON: shapes, embedding rows, residual norms and updates, one block's
        attention, the top-N at every position with teacher forcing, the logits' memory cost, the logit lens.
        Every token and candidate carries bytes_hex when it holds part of a character (see stream_records)."""
        try:
            prompt, chat = validation.text("prompt", prompt), validation.boolean("chat", chat)
            block = validation.number("block", block, integer=True, low=1, high=service.info.num_layers, blank=None)
            top_n = validation.number("top_n", top_n, integer=True, low=1, high=limits.MAX_TRACE_TOP_N)
            return service.trace(prompt, chat, block=block, top_n=top_n).to_dict()
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None

    def attribution_record(prompt: str, chat: Any = False, candidate: Any = None, rival: Any = None,
                           head_block: Any = None) -> dict:
        """Who pushed the next token up: logit(candidate) - logit(rival) at the prompt's last position (token ids;
        default its top two) split into the embedding's, each block's attention's and MLP's shares, and head_block's
        (default: the block whose attention moved it most) attention by head; they add up to the model's own
        difference within float32 round-off."""
        try:
            prompt, chat = validation.text("prompt", prompt), validation.boolean("chat", chat)
            return service.attribute(prompt, chat, candidate, rival, head_block).to_dict()
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None

    def precision_record(prompt: str, chat: Any = False, precision: Any = None) -> dict:
        """What a precision (fp32, bf16, int8, int4; blank: the host's --precision) does to the next token beside the
        same weights in float32: max and mean |Δlogit|, the top tokens' probabilities and ranks, the greedy token."""
        try:
            prompt, chat = validation.text("prompt", prompt), validation.boolean("chat", chat)
            return service.precision_effect(prompt, chat, None if validation.is_blank(precision) else precision).to_dict()
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None

    def knockout_record(prompt: str, kind: str = "mlp", block: Any = 1, head: Any = None, mode: str = "zero",
                        settings: Any = None, chat: Any = False, candidate: Any = None) -> dict:
        """The next token with one part knocked out: kind "attention", "mlp" or "head" (head: from 1) of block
        (from 1), its output set to "zero" or its "mean" over the prompt. Before and after, each drawn through the
        sampler with settings (an object of stream_records' knobs: temperature, top_k, top_p, min_p, seed, order,
        ...) at the same u, and candidate's (a token id; default the top one) probability and rank both ways."""
        try:
            prompt, chat = validation.text("prompt", prompt), validation.boolean("chat", chat)
            target = {"kind": kind, "block": block, "head": head, "mode": mode}
            return service.knock_out(prompt, target, settings, chat, candidate).to_dict()
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None

    def patch_record(prompt: str, source: str, cells: Any, chat: Any = False, candidate: Any = None) -> dict:
        """Activation patching: for each cell [position, block] (position from 0, or null for every position; block
        from 1), the stream after that block at that position copied from source (a prompt of as many tokens) into
        the prompt's pass; per cell, the next token's odds for candidate (a token id; default the prompt's own top
        token) and for the source's top token."""
        try:
            prompt, source = validation.text("prompt", prompt), validation.text("source", source)
            chat = validation.boolean("chat", chat)
            return service.patch(prompt, source, cells, chat, candidate).to_dict()
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None

    def steer_record(prompt: str, towards: str, away: str, block: Any = 10, scale: Any = 1.0, settings: Any = None,
                     max_new_tokens: Any = 20, chat: Any = False) -> dict:
        """A run with scale * (stream(towards) - stream(away)) added after block (the two prompts' streams at their last
        positions) beside the same run without it: the same settings (an object of stream_records' knobs) and seed,
        so both read the same u at every step. plain and steered: step records; parted_at: the first step they
        differ."""
        try:
            prompt, chat = validation.text("prompt", prompt), validation.boolean("chat", chat)
            return service.steer(prompt, towards, away, block, scale, settings, max_new_tokens, chat).to_dict()
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None

    def model_info() -> dict:
        """What this app serves, with no model work: the load status, the model (name, size, device,
        dtype, ...), the model picker's allowlist (and a switch under way), the room's limits and its live state (rows per step, queue), and the request caps.
        Cheap enough to poll while the model loads; a script's first call opens its session, as a
        browser's page load does."""
        status = service.status
        loaded = service.service if status.ready else None
        return {
            "status": status.to_dict(),
            "model": loaded.info.to_dict() if loaded else None,
            "models": {"current": getattr(service, "current", None), "allowlist": list(getattr(service, "models", ())),
                       "switching": getattr(service, "switching", None), "epoch": getattr(service, "epoch", 0)},
            "room": loaded.room().to_dict() if loaded else None,
            "limits": {
                "max_prompt_tokens": limits.MAX_PROMPT_TOKENS, "max_new_tokens": limits.MAX_NEW_TOKENS,
                "max_top_n": limits.MAX_TOP_N, "max_trace_top_n": limits.MAX_TRACE_TOP_N,
                "max_stop_strings": limits.MAX_STOP_STRINGS, "max_stop_chars": limits.MAX_STOP_CHARS,
                "max_seed": limits.MAX_SEED,
            },
        }

    for endpoint in (stream_records, model_info, trace_record, attribution_record, knockout_record, precision_record,
                     patch_record, steer_record):
        gr.api(endpoint, api_name=endpoint.__name__)
