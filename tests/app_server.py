"""Fixtures that launch the app in-process on a free port with tiny-random as the default preset.

tests/conftest.py imports them, so any test module can ask for ``server`` or ``tiny_default``.
"""

from __future__ import annotations

import socket

import pytest
import yaml

from playground.config import CONFIG_PATH, load_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tiny_default(tmp_path_factory):
    """The real spaces_config.yaml with tiny-random as the default preset; torch kept on one thread."""
    data = yaml.safe_load(CONFIG_PATH.read_text(encoding="utf-8"))
    data["default_preset"] = "tiny-random"
    path = tmp_path_factory.mktemp("cfg") / "spaces_config.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECPLAY_CONFIG", str(path))
        mp.setenv("SPECPLAY_THREADS", "1")
        yield load_config()


@pytest.fixture(scope="module")
def server(tiny_default):
    import app

    demo = app.build_demo()
    kwargs = {**app.launch_kwargs(port=free_port()), "server_name": "127.0.0.1"}
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **kwargs)
    yield url.rstrip("/")
    demo.close()
