"""Visitor sessions that start cheaply: a block's per-session config is built when it is needed.

gradio 6 gives every session (a browser tab, a ``gradio_client``) a ``SessionState`` when the
session's first event arrives, and that state builds the config of every block of the app
(``config_values``).  This app has about 245 blocks: 17 ms a session on an idle core and
20–40 ms beside a class's runs, on the server's event loop, one session after another, so thirty
students pressing Run together would wait in line about a second before most of their runs began.

gradio reads those configs for one thing: a deep link (``/gradio_api/deep_link``, a snapshot of
every component as it is in that session, for ``gr.DeepLinkButton``).  It keeps the config of each
block an event changes up to date, and that part is unchanged here.  ``OnDemandSession`` only
leaves the other blocks' configs unbuilt until a deep link asks for them.  A block that no event
changed is still the app's own block, so its config then is the one the session would have built
when it began, and the deep link reads the same (``tests/visual/test_sessions.py``).

``install()`` makes gradio's state holder create these sessions.  It writes one name in gradio's
``state_holder`` module, once, before the app serves; no model, config or per-visitor data is
touched.  The class reproduces ``SessionState.__init__`` of the pinned gradio; the test fails if
gradio's sessions gain or lose an attribute, so an upgrade cannot silently change what it skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from copy import copy
from typing import Any

from gradio import state_holder

GradioSession = state_holder.SessionState  # gradio's own class, kept for the tests' comparison


class OnDemandSession(GradioSession):
    """A gradio ``SessionState`` whose ``config_values`` fill in when a deep link reads them."""

    def __init__(self, blocks) -> None:  # gradio's __init__, minus building every block's config
        self.blocks_config = copy(blocks.default_config)
        self.config_values: dict[int, Any] = {}  # the blocks events changed; the rest on demand
        self.state_data: dict[int, Any] = {}
        self._state_ttl: dict = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST", None) else 3600
        self._app_ids = frozenset(blocks.blocks)  # the blocks gradio's session would have built

    @property
    def components(self) -> Iterator[dict]:
        """Every block's config, in the order gradio's own session keeps them: the app's blocks
        first (built now where no event built one), then any an event added."""
        built = self.config_values
        ordered = {
            k: built[k] if k in built else self.blocks_config.config_for_block(k, [], block)
            for k, block in self.blocks_config.blocks.items()
            if k in self._app_ids
        }
        self.config_values = ordered | built  # later keys keep their place after the app's blocks
        for config in self.config_values.values():
            if config:
                yield config


def install() -> None:
    """Make gradio's state holder start ``OnDemandSession``s (idempotent)."""
    state_holder.SessionState = OnDemandSession
