"""The GGUF that llama.cpp tests run on: ``$DATALYST_TEST_GGUF``, else the smallest in the datalyst cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from datalyst.paths import cache_dir


@pytest.fixture(scope="session")
def test_gguf() -> Path:
    """The model file (tests that use it skip without llama-cpp-python or without a cached GGUF)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'datalyst[llamacpp]')")
    if explicit := os.environ.get("DATALYST_TEST_GGUF"):
        return Path(explicit)
    files = (path for path in (cache_dir() / "models").glob("**/*.gguf") if path.is_file())  # not a fetch's parts
    found = sorted(files, key=lambda path: path.stat().st_size)
    if not found:
        pytest.skip(f"no GGUF model: set DATALYST_TEST_GGUF or put one in {cache_dir() / 'models'}")
    return found[0]
