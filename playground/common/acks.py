"""A page's word to a streaming handler ("I have this update"), sent straight to the server as one POST.

A streaming handler stays at most a few updates ahead of its page (lab/run.py: Pace, PAGE_AHEAD), so the page says
each time it has a new update. Said as a Gradio event, each one cost the page a refresh of the loading status of
every component that was ever an event's output (~170 on this page, some 6 ms each time, twice an event: pending,
then complete): with the stream's own update, three such refreshes a token, about a third of the page's main thread
while a run streamed.

So the change event that counts what the page shows runs in the page only (`ack_js`), and its script POSTs the count
to a hidden event (`ack_event`) itself (page_post.py): the handler reads the session's State as it would from the
page. Where the page lacks what that takes (a Gradio that no longer exposes its session), nothing is sent: the
handler then streams as to an API caller, every token at once.
"""

from __future__ import annotations

import json

import gradio as gr

from .page_post import POST_JS

_POST_JS = """(...values) => {
  const counted = (__COUNT__)(...values);
  const sent = (__POST__)(__NAME__, [null, counted[counted.length - 1]]);
  if (sent) sent.catch(() => {});
  return [];
}""".replace("__POST__", POST_JS)


def ack_js(count_js: str, name: str) -> str:
    """JS for the change of what a stream shows, run in the page only: `count_js` turns the event's values into
    the count ("tag:n", its last value), which goes to the hidden event `name` (ack_event)."""
    return _POST_JS.replace("__COUNT__", count_js).replace("__NAME__", json.dumps(name))


def ack_event(handler, state: gr.State, name: str) -> None:
    """The hidden event a page's count goes to: handler(state, count) outside the queue, named `name` (private)."""
    count = gr.Textbox("", visible=False, label=f"{name} count")
    trigger = gr.Button(visible=False)  # never clicked: the page POSTs to its event (ack_js)
    trigger.click(handler, [state, count], None, queue=False, api_name=name, api_visibility="private",
                  preprocess=False, postprocess=False, show_progress="hidden")
