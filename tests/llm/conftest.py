"""Fixtures and markers for the llm tests."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Until pyproject lists it, register the marker here so --strict-markers accepts it.
    config.addinivalue_line("markers", "model: runs a real (small) language model in process; needs its weights")
