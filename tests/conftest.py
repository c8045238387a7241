"""Test-session settings shared by every test module."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

# This machine's measured profile (what cross-checks predict with) goes to a folder of this
# test session, never to the user's own cache: measured once here, shared by every test and
# every `simsync` the tests start.
_CACHE = tempfile.mkdtemp(prefix="simsync-test-cache-")
os.environ["SIMSYNC_CACHE_DIR"] = _CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_CACHE, ignore_errors=True)
