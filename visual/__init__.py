"""Renderers and the Gradio UI of the Speculative Decoding Playground.

``visual`` turns the engine's trace records (``playground.decoding.records``) into
things people look at: HTML token chips and step views (``tokens``), plotly
figures (``charts``), the stats card (``stats``), pandas tables and exports
(``tables``), the replay frame model (``replay``) and the Playground tab
with its events and the ``/speculate`` endpoint (``playground_tab``).

Imports go one way: ``app.py`` -> ``visual`` -> ``playground``.  Nothing here
loads or runs a model directly; generation goes through ``playground.api``.
Every token text that reaches HTML is escaped (``visual.fmt``).
"""

from pathlib import Path

CSS_PATH = Path(__file__).resolve().parent / "style.css"

__all__ = ["CSS_PATH"]
