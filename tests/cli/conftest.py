"""Fixtures for the command-line tests: run the real ``datalyst`` command the way a user does."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalyst", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def datalyst() -> Callable[..., subprocess.CompletedProcess[str]]:
    return _run
