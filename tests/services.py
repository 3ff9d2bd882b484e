"""What the fixtures of real servers (PostgreSQL, S3) share: a free loopback port, and what they do
when a server cannot run here."""

from __future__ import annotations

import os
import socket

import pytest


def unavailable(label: str, reason: str, require_env: str) -> None:
    """Skip the test loudly because ``reason``; fail instead when ``require_env`` is set (as
    ``.ci/run`` sets it, so that CI never passes without the server)."""
    message = f"{label} TESTS NOT RUN: {reason}; set {require_env}=1 to make this a failure"
    if os.environ.get(require_env, "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
