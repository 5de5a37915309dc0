"""The app's theme: gradio's Soft theme (blue, orange) with light-mode text colours that pass WCAG AA.

Soft draws labels, info text, slider bounds and the primary button in ``primary_500`` /
``neutral_400``, about 2.5–3.7 : 1 against their backgrounds; axe-core calls that a
serious violation (``tests/test_e2e_browser.py`` runs it).  The same hues one or two
steps darker pass 4.5 : 1.  Dark mode is left as Soft draws it (it passes); the accent has one
value for both modes here, so ``style.css`` gives dark mode back Soft's lighter accent.

This module only builds the theme object; ``app.launch_kwargs`` hands it to ``launch()``.
"""

from __future__ import annotations

import gradio as gr


def app_theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="blue", secondary_hue="orange").set(
        body_text_color_subdued="*neutral_600",
        block_label_text_color="*primary_700",
        block_title_text_color="*primary_700",
        block_info_text_color="*neutral_600",
        color_accent="*primary_600",
        button_primary_background_fill="*primary_600",
        button_primary_background_fill_hover="*primary_700",
        checkbox_label_background_fill_selected="*primary_600",
    )
