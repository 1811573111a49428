"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with the HTTP status a client
expects (the `openai` package turns 400 into BadRequestError, 401 AuthenticationError, 404 NotFoundError, ...).

The checking is the service's (model_service/records/validation.py): its errors name the field, and this module
only says which HTTP status and which API parameter they are. Never a traceback, never HTML: a message may quote
what a caller sent, and JSON carries it as text.
"""

from __future__ import annotations

import logging
import re

from model_service.records import validation

log = logging.getLogger(__name__)

# the service's name of a field -> the API's (the service's generate() says max_new_tokens)
SERVICE_FIELDS = {"max_new_tokens": "max_tokens"}
# keyed errors that are about the prompt, whatever field name the message uses
PROMPT_KEYS = ("prompt_too_long", "prompt_empty", "prompt_ids", "empty", "no_chat_template", "surrogate", "text")
# Unavailable keys -> (status, type): a full room is "try again later" (429, which the openai client retries),
# everything else (loading, switching, a service away) is 503
ROOM_FULL = ("room_full",)


class ApiError(Exception):
    """An answer that is an error: raise it anywhere in a request, the route turns it into JSON."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None = None) -> ApiError:
    """400: a request this server does not take (the parameter named)."""
    return ApiError(400, message, "invalid_request_error", param)


def not_found(message: str, param: str | None = "model") -> ApiError:
    return ApiError(404, message, "invalid_request_error", param, "model_not_found")


def _param_of(error: Exception, text: str, prompt_field: str) -> str | None:
    """The API parameter an error of the service is about (None when it names none)."""
    values = getattr(error, "values", None) or {}
    key = getattr(error, "key", None)
    if key in PROMPT_KEYS and values.get("field", "prompt") == "prompt":
        return prompt_field
    field = values.get("field")
    if field:
        return SERVICE_FIELDS.get(field, field)
    if text.startswith("prompt (") or text.startswith("the prompt"):  # the context check: prompt + max_new_tokens
        return prompt_field
    return None


def from_exception(error: Exception, prompt_field: str = "prompt") -> ApiError:
    """The service's error (or anything else) as the API says it. prompt_field: how this endpoint names the
    prompt ("prompt" for completions, "messages" for chat)."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, validation.Unavailable):
        key = getattr(error, "key", None)
        if key in ROOM_FULL:
            return ApiError(429, str(error), "rate_limit_error", None, key)
        return ApiError(503, str(error), "server_error", None, key)
    if isinstance(error, ValueError):
        message = re.sub(r"^request \d+: ", "", str(error))  # a batch's (n > 1) row number: the API's rows are one prompt
        return ApiError(400, message, "invalid_request_error", _param_of(error, message, prompt_field))
    if isinstance(error, RuntimeError):  # the service's own words: the scheduler stopped, a load failed, ...
        return ApiError(503, str(error), "server_error", None, None)
    log.exception("the OpenAI-compatible API failed on a request")  # the traceback stays in the server's log
    return ApiError(500, f"internal error ({type(error).__name__}); the server's log has the details",
                    "server_error", None, None)


__all__ = ["ApiError", "bad", "from_exception", "not_found"]
