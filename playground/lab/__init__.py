"""The classroom lab: check losslessness, break it on purpose, reason about speed.

Pure logic (no gradio, plotly or ``visual``); the renderers live in ``visual/lab.py`` and
the tabs in ``visual/lab_tabs/`` (assembled by ``visual/lab_tab.py``).  One idea per module,
each importing only the ones listed before it:

* ``budget``: ``Budget`` (time limit and Stop for heavy actions), ``LabCancelled``, ``Progress``.
* ``stats``: total variation, chi-square tests, a plain-words reading.
* ``memo``: ``MemoModel``, a memoising view of a model under a byte cap.
* ``context``: ``LabContext``, a preset loaded for lab runs.
* ``runs``: generation under a ``Budget`` and the result of a stopped run.
* ``draws``: many continuations of one prompt at once, their target passes shared.
* ``distribution``: the distribution check (sampling: N continuations per side).
* ``equality``: the greedy equality check and the logits at a divergence.
* ``theory``: the theory bench (E and S over γ, the measured point).
* ``quiz``: predict, then reveal.

Elsewhere: trace import/export is ``playground.trace_io``; URL prefill and share links
are ``visual.share``; classroom presets are ``visual.classroom``.

Import from the modules.  The names below are re-exported only so that callers written
against the old single-file ``playground.lab`` keep working (the trace functions moved to
``playground.trace_io``); new code should not add to this list.
"""

from playground.lab.budget import Budget, LabCancelled
from playground.lab.distribution import DistributionCheck, distribution_check
from playground.lab.equality import EqualityCheck, equality_check
from playground.lab.quiz import Scoreboard, question, reveal
from playground.lab.theory import measure_run, theory_curve
from playground.trace_io import TraceImportError, load_trace_file, parse_trace, trace_to_json

__all__ = [
    "Budget",
    "DistributionCheck",
    "EqualityCheck",
    "LabCancelled",
    "Scoreboard",
    "TraceImportError",
    "distribution_check",
    "equality_check",
    "load_trace_file",
    "measure_run",
    "parse_trace",
    "question",
    "reveal",
    "theory_curve",
    "trace_to_json",
]
