"""A page's seat in a room (`Seat`: nobody's, the host's, a follower's, ...) and what the room bar says of it:
its line, the key a host's tab keeps to resume after a reload, the room's link. Every text from a seat is
escaped: the code, link and problems are host input shown to strangers."""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from ...common.i18n import DEFAULT, tr
from ...common.text import escape_html


@dataclass
class Seat:
    """This page's place in a room: nobody's, the host's (with the token only the host's session holds), a
    follower's, a follower who broke away, one whose room closed, or a host's page that could not resume."""

    mode: str = "none"  # none | host | following | away | closed | lost
    code: str = ""
    token: str = field(default="", repr=False)
    link: str = ""
    lang: str = DEFAULT
    problems: list = field(default_factory=list)
    followers: int = 0  # the host's count of following pages, as its bar shows it
    closed: str = field(default="", repr=False)  # the key of the room this page closed (host_tick: not one to resume)


def bar_text(seat: Seat, lang=DEFAULT) -> str:
    """The bar's line for the page's seat, in `lang`; the code, link and problems are escaped."""
    if seat.mode == "none":
        return ""
    problems = escape_html("; ".join(seat.problems))
    values = {"code": escape_html(seat.code), "link": escape_html(seat.link), "followers": seat.followers}
    if seat.mode == "lost":
        return tr(lang, "follow.status.lost", problem=problems, **values)
    text = tr(lang, f"follow.status.{seat.mode}", **values)
    if seat.problems and seat.mode == "following":
        text += " " + tr(lang, "follow.status.problems", problems=problems)
    elif seat.problems and seat.mode == "host":
        text += " " + tr(lang, "follow.status.unshared", problem=problems)
    return text


def host_key(seat: Seat) -> str:
    """What the host's tab keeps to resume hosting after a reload ("" for every other seat)."""
    return f"{seat.code}:{seat.token}" if seat.mode == "host" else ""


def room_link(request: gr.Request | None, code: str) -> str:
    """An absolute link that follows `code`: the page's public address (behind a proxy, on a Space: links.py)."""
    from ...common.address import absolute, base_url

    return absolute(base_url(request), f"follow={code}")
