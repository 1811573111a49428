"""The room bar's components by name (`FollowBar`): what build_follow_bar lays out (bar.py) and what the
room's handlers set (handlers.py)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass(frozen=True)
class FollowBar:
    """The room's components, as build_follow_bar lays them out."""

    seat: gr.State  # the page's Seat (seat.py)
    bar: gr.Row
    status: gr.Markdown
    break_button: gr.Button
    again_button: gr.Button
    close_button: gr.Button
    code: gr.Textbox
    join_button: gr.Button
    open_button: gr.Button
    link: gr.Textbox
    tab: gr.Textbox  # the host's tab id, set in the browser
    key: gr.Textbox  # the host's CODE:TOKEN, mirrored in sessionStorage
    timer: gr.Timer  # the host's page publishes on it
    mode: gr.Textbox  # the seat's mode, set in the browser as <body class="ntp-follower"> while following
    cue: gr.Textbox  # a follower's cue to the host's scene: {"focus": element id}, read in the browser (bar.py)

    @property
    def outputs(self) -> list:
        """What showing a seat sets (handlers.show)."""
        return [self.seat, self.status, self.bar, self.break_button, self.again_button, self.close_button,
                self.join_button, self.link, self.key, self.timer, self.mode]
