"""Shared fixtures.  ``ssh_server``: a real in-process SSH server on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `from tests.support...` works under plain `pytest` too
    sys.path.insert(0, str(ROOT))

from tests.support.sshd import SSHTestServer  # noqa: E402


@pytest.fixture
async def ssh_server(tmp_path: Path) -> AsyncIterator[SSHTestServer]:
    """A started SSHTestServer (see tests/support/sshd.py); stopped afterwards."""
    server = SSHTestServer(tmp_path / "sshd")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
