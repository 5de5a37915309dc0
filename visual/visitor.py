"""Who sent a request: ``visitor_of(gr.Request)`` gives the engine's ``Visitor``.

The trace cache counts the runs each visitor leads against the caps of
``spaces_config.yaml`` (``queue.runs_per_session``, ``queue.runs_per_address``).  This module
reads the request only; it keeps nothing.
"""

from __future__ import annotations

import gradio as gr

from playground.serving.trace_cache import Visitor


def visitor_of(request: gr.Request | None) -> Visitor | None:
    """Who sends ``request``: its gradio session and the address it came from.  Behind a proxy
    (a Space) the address is the last one ``X-Forwarded-For`` names: the one the proxy saw."""
    if request is None:
        return None
    session = getattr(request, "session_hash", None)
    address = None
    try:
        forwarded = request.headers.get("x-forwarded-for")
        address = forwarded.split(",")[-1].strip() if forwarded else None
    except Exception:
        address = None
    if not address:
        client = getattr(request, "client", None)
        address = getattr(client, "host", None)
    return Visitor(session=session, address=address or None)
