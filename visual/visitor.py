"""Who sent a request: ``visitor_of(gr.Request)`` gives the engine's ``Visitor``.

The trace cache counts the runs each visitor leads against the caps of
``spaces_config.yaml`` (``queue.runs_per_session``, ``queue.runs_per_address``).  This module
reads the request only; it keeps nothing.
"""

from __future__ import annotations

import ipaddress

import gradio as gr

from playground.serving.trace_cache import Visitor


def visitor_of(request: gr.Request | None) -> Visitor | None:
    """Who sends ``request``: its gradio session and the address it came from.

    Behind proxies (a Space) the socket's address is the proxy's, and ``X-Forwarded-For``
    lists the addresses each proxy saw, the client's own first.  A client can put anything at
    its front, so the address is the last public one in the list: the one our own proxies saw
    (their internal hops have private addresses); else the socket's."""
    if request is None:
        return None
    session = getattr(request, "session_hash", None)
    address = None
    try:
        hops = [h.strip() for h in (request.headers.get("x-forwarded-for") or "").split(",") if h.strip()]
    except Exception:
        hops = []
    for hop in reversed(hops):
        if not _private(hop):
            address = hop
            break
    if address is None:
        client = getattr(request, "client", None)
        address = getattr(client, "host", None)
    return Visitor(session=session, address=address or None)


def _private(address: str) -> bool:
    """A private, loopback or malformed address (not one a visitor comes from)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return True
    return ip.is_private or ip.is_loopback or ip.is_link_local
