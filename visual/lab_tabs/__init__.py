"""The Classroom lab's sub-tabs, one module per tab, assembled by ``visual.lab_tab.build_lab_tabs``.

Each tab module has ``build_tab(c, setup)`` (its components, stored in the shared dict
``c`` under the tab's prefix) and ``wire_events(c, states)`` (its events; returns the
heavy events under their Stop button's key), plus the tab's handlers:

* ``equality``: 1, the greedy equality check (``eq_…``).
* ``distribution``: 2-4, the distribution check and the rule selector (``d_…``).
* ``theory``: 5, the theory bench (``t_…``).
* ``predict``: 6, predict, then reveal (``p_…``).
* ``replay_share``: 7, replay, trace import/export, share links (``r_…``).

Shared by them: ``common`` (event settings, ``Setup``, input and error handling) and
``stop`` (Stop presses per session).  ``prefill`` fills the tabs from a URL or a
classroom preset.  No module here imports another tab's module.
"""
