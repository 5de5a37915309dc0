"""The one progress-callback signature: ``progress(fraction, message)``.

``fraction`` is how much is done, in [0, 1]; ``message`` says what is happening.  Model
loading, conversion, the lab and the bench all report through it (gradio's
``gr.Progress`` takes the same order: ``progress(fraction, desc=message)``).
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[float, str], None]
