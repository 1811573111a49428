"""Where the page lives: its public address for a request (behind a proxy, on a Space, on a laptop), and a link
made absolute. Used by every link the page and its HTTP API hand out (share links, scenes, rooms, the OpenAI
answers' lab links). Pure functions, apart from base_url reading a Gradio request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..hosting import Machine, this_machine

if TYPE_CHECKING:
    import gradio as gr


def _first(headers: Mapping[str, str], name: str) -> str:
    """The first value of a header a chain of proxies may have appended to ("a.example, b.internal")."""
    value = headers.get(name) or headers.get(name.title()) or ""
    return value.split(",")[0].strip()


def page_url(headers: Mapping[str, str], url: str = "", root_path: str = "", machine: Machine | None = None) -> str:
    """The page's public address, no query, no trailing slash, as a visitor must open it:

    - on a Hugging Face Space, the Space's page (https://huggingface.co/spaces/owner/name): the app runs in
      its iframe, and the Space passes its query to the iframe on the first load;
    - a root_path that is a full URL (Gradio's --root-path / GRADIO_ROOT_PATH) is the address;
    - behind a proxy, X-Forwarded-Host and X-Forwarded-Proto (the first of each), then the root_path or
      X-Forwarded-Prefix (a path the proxy mounts the app under);
    - else the page the browser shows (the Referer of the page's own call), else the request's Host.

    headers: the request's (any case); url: the request's URL (for its scheme and host)."""
    headers = {k.lower(): v for k, v in headers.items()}
    if machine is not None and machine.on_space and machine.space_id != "unknown/space":
        return f"https://huggingface.co/spaces/{machine.space_id}"
    if root_path.startswith(("http://", "https://")):
        return root_path.rstrip("/")
    path = (root_path or _first(headers, "x-forwarded-prefix")).rstrip("/")
    if path and not path.startswith("/"):
        path = "/" + path
    forwarded = _first(headers, "x-forwarded-host")
    if forwarded:
        scheme = _first(headers, "x-forwarded-proto") or "http"
        return f"{scheme}://{forwarded}{path}"
    referer = urlsplit(headers.get("referer", ""))
    if referer.scheme in ("http", "https") and referer.netloc:
        return f"{referer.scheme}://{referer.netloc}{referer.path}".rstrip("/")
    parts = urlsplit(url)
    netloc = headers.get("host") or parts.netloc or "localhost"
    return f"{parts.scheme or 'http'}://{netloc}{path}"


def space_direct_url(machine: Machine) -> str | None:
    """A Space's own address (https://owner-name.hf.space), outside the Hugging Face page; None off a Space."""
    if machine.space_host:
        return f"https://{machine.space_host}"
    return None


def absolute(base: str, query: str) -> str:
    """base + query; an origin gets its "/" (http://host:7860/?q), a path does not (.../spaces/o/n?q)."""
    base = base if urlsplit(base).path else base + "/"
    return f"{base}?{query}" if query else base


def base_url(request: gr.Request | None) -> str:
    """The page's public address for this request (page_url; Gradio's root_path; the Space this process runs on)."""
    if request is None:
        return page_url({}, machine=this_machine())
    headers = dict(getattr(request, "headers", {}) or {})
    raw = getattr(request, "request", None)
    root = getattr(getattr(raw, "scope", None) or {}, "get", lambda *_: "")("root_path", "") or ""
    app = getattr(raw, "app", None)
    root = getattr(app, "root_path", "") or root
    url = str(getattr(raw, "url", "") or "")
    return page_url(headers, url=url, root_path=root, machine=this_machine())


__all__ = ["absolute", "base_url", "page_url", "space_direct_url"]
