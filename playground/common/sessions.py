"""A new page's session without Gradio copying every component's configuration up front.

Gradio makes a SessionState for each new session (a page's first event, a script's first queue join), and the pinned
Gradio builds in it, at once, the configuration of every block of the app (~360 here: 13-14 ms of one core,
`inspect.signature` and a dict per component), which only its `/gradio_api/deep_link` route ever reads (this app
makes its own links). The join runs in the server's event loop, so in a burst of learners joining at once each
join waited for every session made before it (64 joins: ~0.9 s of loop time, more on a busy machine; the clients'
5 s trap is in docs/api.md). LeanSessionState builds that configuration when it is first read in full, and any
entry Gradio sets or updates before then (an event's inputs and outputs) is kept over the one built then.
"""

from __future__ import annotations

from collections.abc import Callable

from gradio import state_holder
from gradio.state_holder import SessionState


class LazyConfigs(dict):
    """SessionState.config_values, built by `build()` when first read in full; entries set before that win.
    `key in` and reads of a key set since are the dict's own, so an event's updates build nothing."""

    def __init__(self, build: Callable[[], dict]):
        super().__init__()
        self._build: Callable[[], dict] | None = build

    def _built(self) -> LazyConfigs:
        if self._build is not None:
            build, self._build = self._build, None
            later = dict(self)
            dict.clear(self)
            dict.update(self, build())
            dict.update(self, later)
        return self

    def __getitem__(self, key):
        if not dict.__contains__(self, key):
            self._built()
        return dict.__getitem__(self, key)

    def __iter__(self):
        return dict.__iter__(self._built())

    def __len__(self):
        return dict.__len__(self._built())

    def __eq__(self, other):
        return dict.__eq__(self._built(), other)

    __hash__ = None

    def items(self):
        return dict.items(self._built())

    def keys(self):
        return dict.keys(self._built())

    def values(self):
        return dict.values(self._built())

    def get(self, key, default=None):
        return self[key] if key in self._built() else default

    def copy(self):
        return dict(self._built())


class _NoBlocks:
    """What SessionState.__init__ reads of the app, with no block to build a configuration for."""

    def __init__(self, blocks):
        self.default_config, self.blocks = blocks.default_config, {}


class LeanSessionState(SessionState):
    """Gradio's SessionState, with its every-block configuration built on first read (LazyConfigs)."""

    def __init__(self, blocks):
        super().__init__(_NoBlocks(blocks))  # Gradio's own, building the configuration of no block
        # ... built when read, as Gradio's __init__ builds it (tests/unit/common/test_sessions.py compares them)
        self.config_values = LazyConfigs(lambda: {
            k: self.blocks_config.config_for_block(k, [], v)
            for k, v in self.blocks_config.blocks.items() if k in blocks.blocks})


def use_lean_sessions() -> None:
    """Every new session of this process's Gradio apps is a LeanSessionState (StateHolder makes them by name)."""
    state_holder.SessionState = LeanSessionState
