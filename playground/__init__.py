"""Speculative Decoding Playground — the engine.

Pure Python + torch + transformers: models and loading, drafters, sampling
math, verification, the decoding loop, benchmarks and drafter training.
It never imports gradio, plotly or ``visual``, and never prints (except the
CLI in ``__main__``).
"""

from playground.api import generate, stream_generate
from playground.decoding.records import Candidate, Correction, DraftDecision, GenerationResult, RunStats, StepRecord

__all__ = [
    "generate",
    "stream_generate",
    "Candidate",
    "Correction",
    "DraftDecision",
    "GenerationResult",
    "RunStats",
    "StepRecord",
]
