"""Where MTP training reads its prompts and writes its cache and weights (paths only, no I/O)."""

from __future__ import annotations

import os
from pathlib import Path

from tools.paths import PLAYGROUND

PROMPTS = PLAYGROUND / "data" / "train_prompts.json"
DEFAULT_OUT = PLAYGROUND / "weights" / "gemma3-270m-mtp"
DEFAULT_WORK = Path(os.environ.get("PLAYGROUND_CACHE", Path.home() / ".cache" / "playground")) / "mtp-gemma3-270m"
PRESETS = ("gemma3-270m",)
