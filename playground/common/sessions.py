"""A new page's session without Gradio copying every component's configuration up front.

Gradio makes a SessionState for each new session (a page's first event, a script's first queue join), and the pinned
Gradio builds in it, at once, the configuration of every block of the app (~360 here: 13-14 ms of one core,
`inspect.signature` and a dict per component), which only its `/gradio_api/deep_link` route ever reads (this app
makes its own links). The join runs in the server's event loop, so in a burst of learners joining at once each
join waited for every session made before it (64 joins: ~0.9 s of loop time, more on a busy machine; the clients'
5 s trap is in docs/api.md). LeanSessionState builds that configuration when it is first read in full, and any
entry Gradio sets or updates before then (an event's inputs and outputs) is kept over the one built then.

The same holds for each update: an event that changes a component's props (a Plot's figure, a Slider's maximum, a
Row shown or hidden) has Gradio rebuild that component's configuration at once, twice (its api_info: a pydantic JSON
schema each time), ~2 ms a block. A streaming run's update sets seven such blocks, every token, for every learner,
in the server's event loop: 15 % of the loop's time with 16 learners generating, and what a knob's what-if waited
behind. Here each such configuration is built when read (never, unless a deep link is made).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from functools import partial

from gradio import state_holder
from gradio.state_holder import SessionState

_UNSET = object()


class LazyConfigs(dict):
    """SessionState.config_values, built by `build()` when first read in full; entries set before that win, and an
    entry deferred (`defer`: a block's configuration, built when read) waits until read too. `key in` and reads of
    a key set since are the dict's own, so an event's updates build nothing."""

    def __init__(self, build: Callable[[], dict]):
        super().__init__()
        self._build: Callable[[], dict] | None = build
        self._later: dict = {}  # key -> [its configuration's builder, a value set since or _UNSET]

    def defer(self, key, build_one: Callable[[], dict]) -> None:
        """key's configuration is build_one()'s, built when read."""
        dict.pop(self, key, None)
        self._later[key] = [build_one, _UNSET]

    def set_value(self, key, value, build_one: Callable[[], dict]) -> None:
        """Gradio's _update_value_in_config: `value` into key's configuration's props (build_one's when it has
        none yet), built or still to be built."""
        if key not in self:
            self.defer(key, build_one)
        if key in self._later:
            self._later[key][1] = value
        elif "props" in dict.__getitem__(self, key):
            dict.__getitem__(self, key)["props"]["value"] = value

    def _settle(self, key) -> None:
        build_one, value = self._later.pop(key)
        config = build_one()
        if value is not _UNSET and "props" in config:
            config["props"]["value"] = value
        dict.__setitem__(self, key, config)

    def _built(self) -> LazyConfigs:
        if self._build is not None:
            build, self._build = self._build, None
            later = dict(self)
            dict.clear(self)
            dict.update(self, build())
            dict.update(self, later)
        for key in list(self._later):
            self._settle(key)
        return self

    def __contains__(self, key):
        return key in self._later or dict.__contains__(self, key)

    def __setitem__(self, key, value):
        self._later.pop(key, None)
        dict.__setitem__(self, key, value)

    def __getitem__(self, key):
        if key in self._later:
            self._settle(key)
        elif not dict.__contains__(self, key):
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
    """Gradio's SessionState, with its every-block configuration built on first read, and each block's configuration
    an event updates built when read (LazyConfigs)."""

    def __init__(self, blocks):
        super().__init__(_NoBlocks(blocks))  # Gradio's own, building the configuration of no block
        # ... built when read, as Gradio's __init__ builds it (tests/unit/common/test_sessions.py compares them)
        self.config_values = LazyConfigs(lambda: {
            k: self.blocks_config.config_for_block(k, [], v)
            for k, v in self.blocks_config.blocks.items() if k in blocks.blocks})

    def _config_of(self, key, block) -> Callable[[], dict]:
        return partial(self.blocks_config.config_for_block, key, [], block)

    def __setitem__(self, key, value):
        """The pinned Gradio's own, its configuration of the block (the one set over, as Gradio's reads it) deferred."""
        from gradio.components import State

        block = self.blocks_config.blocks.get(key)
        if isinstance(block, State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
        else:
            self.blocks_config.blocks[key] = value
        if block:
            self.config_values.defer(key, self._config_of(key, block))

    def _update_config(self, key):
        if self[key] is not None:
            self.config_values.defer(key, self._config_of(key, self[key]))

    def _update_value_in_config(self, key, value):
        self.config_values.set_value(key, value, self._config_of(key, self.blocks_config.blocks.get(key)))


def use_lean_sessions() -> None:
    """Every new session of this process's Gradio apps is a LeanSessionState (StateHolder makes them by name)."""
    state_holder.SessionState = LeanSessionState
