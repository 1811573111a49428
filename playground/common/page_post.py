"""A page's small, frequent calls to the server, POSTed by a script in the page straight to a hidden event.

Gradio's page, for every event it runs with a server function, re-sets the loading status of every component
that was ever an event's output (each a search of its component tree and a copy of the component's props), before
the call and again after it, then gathers the inputs and applies the outputs through that tree: 40-70 ms of the main
thread per event on this page. A stream's acks (acks.py) and a knob's what-ifs (lab/what_if.py) come many a second,
so their scripts POST to the hidden event themselves, the way Gradio's page calls an event outside the queue
(`{root}{api_prefix}/run/predict`, in the page's session: the handler reads the session's State as from the page).

`POST_JS(name, data)`: the fetch's promise, or null where the page lacks what that takes (a Gradio that no longer
sets `window.__gradio_session_hash__` or `window.gradio_config`; tests/unit/common/test_page_post.py says so first).
"""

from __future__ import annotations

POST_JS = """(name, data) => {
  const config = window.gradio_config, session = window.__gradio_session_hash__;
  const dep = config && (config.dependencies || []).find((d) => d.api_name === name);
  if (!dep || !session) return null;
  const root = String(config.root || "").replace(/\\/$/, "");
  return fetch(`${root}${config.api_prefix || ""}/run/predict`, {
    method: "POST", headers: {"Content-Type": "application/json"}, credentials: "same-origin",
    body: JSON.stringify({data, event_data: null, fn_index: dep.id, trigger_id: null, session_hash: session}),
  });
}"""

__all__ = ["POST_JS"]
