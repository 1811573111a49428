"""Endpoints for scripts and notebooks: the records as JSON (every UI event has an api_name too).

    from gradio_client import Client
    client = Client("http://127.0.0.1:7860/")
    for record in client.submit("The capital of France is", 0.8, 0, 0.95, 0.0, 1, api_name="/stream_records"):
        print(record["piece"], record["stages"][-1]["chosen_prob"])

Every argument is checked here, before anything runs: a bad one ends the call with a message that
names it, its value and what is allowed (`job.result()` raises it as gradio_client's AppError).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import gradio as gr

from model_service import limits
from model_service.records import validation
from model_service.records.settings import parse_settings
from model_service.records.step import Waiting

from .common.errors import user_error
from .lab.request import KNOB_CONTROLS


def stream_records_of(service):
    """The /stream_records endpoint of `service` (its knobs are the lab's, by name)."""

    def stream_records(
        prompt: str,
        temperature: Any = 1.0,
        top_k: Any = 0,
        top_p: Any = 1.0,
        min_p: Any = 0.0,
        seed: Any = None,
        order: str = "hf",
        max_new_tokens: Any = limits.DEFAULT_MAX_NEW_TOKENS,
        stop: Any = None,
        chat: Any = False,
        top_n: Any = limits.DEFAULT_TOP_N,
        report_waiting: Any = False,
        logit_bias: Any = None,
        repetition_penalty: Any = 1.0,
        frequency_penalty: Any = 0.0,
        presence_penalty: Any = 0.0,
        penalty_last_n: Any = limits.DEFAULT_PENALTY_LAST_N,
        no_repeat_ngram_size: Any = 0, min_tokens: Any = 0,
        typical_p: Any = 1.0, epsilon_cutoff: Any = 0.0, eta_cutoff: Any = 0.0, top_n_sigma: Any = 0.0,
        xtc_probability: Any = 0.0, xtc_threshold: Any = limits.DEFAULT_XTC_THRESHOLD,
        dynatemp_range: Any = 0.0, dynatemp_exponent: Any = 1.0,
        dry_multiplier: Any = 0.0, dry_base: Any = limits.DEFAULT_DRY_BASE,
        dry_allowed_length: Any = limits.DEFAULT_DRY_ALLOWED_LENGTH, dry_penalty_last_n: Any = -1,
        dry_sequence_breakers: Any = None,
        mirostat: Any = 0, mirostat_tau: Any = limits.DEFAULT_MIROSTAT_TAU, mirostat_eta: Any = limits.DEFAULT_MIROSTAT_ETA,
        chain: Any = None,
    ) -> Generator[dict, None, None]:  # gr.api needs Generator (not Iterator) to stream
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
        knobs = {name: value for name, value in locals().items() if name in KNOB_CONTROLS}
        try:
            records = service.generate(
                validation.text("prompt", prompt),
                parse_settings(temperature, top_k, top_p, min_p, seed, order, **knobs),
                max_new_tokens=validation.number("max_new_tokens", max_new_tokens, integer=True, low=1,
                                                 high=limits.MAX_NEW_TOKENS),
                stop=validation.stop_strings("stop", stop),
                chat=validation.boolean("chat", chat),
                top_n=validation.number("top_n", top_n, integer=True, low=1, high=limits.MAX_TOP_N),
                report_waiting=validation.boolean("report_waiting", report_waiting),
            )
        except (ValueError, RuntimeError) as e:
            raise user_error(e) from None
        try:
            for record in records:
                yield {"waiting": record.to_dict()} if isinstance(record, Waiting) else record.to_dict()
        finally:
            getattr(records, "close", lambda: None)()  # a dropped client frees its row at once

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

    gr.api(stream_records, api_name="stream_records")
    gr.api(model_info, api_name="model_info")
    gr.api(trace_record, api_name="trace_record")
