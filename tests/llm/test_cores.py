"""The thread count for llama.cpp follows what other processes keep busy, read from the real machine."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from datalyst.llm._cores import SAMPLE_S, FreeCores, available_cores

WAIT_S = 10.0
"""Bound on waiting for the load to show (a failure bound, not a timing check)."""


def _reaches(free: FreeCores, wanted: Callable[[int], bool]) -> int | None:
    """The first count ``wanted`` accepts within ``WAIT_S`` (None if none did)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        time.sleep(SAMPLE_S)
        if wanted(count := free()):
            return count
    return None


@pytest.mark.skipif(available_cores() < 2, reason="needs two cores")
def test_a_busy_core_is_given_up_and_taken_back():
    free = FreeCores(available_cores())
    before = _reaches(free, lambda count: count >= 2)  # as many as the machine's other work leaves
    if before is None:
        pytest.skip("other processes keep this machine too busy to watch one more")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert _reaches(free, lambda count: count < before) is not None
    finally:
        spinner.kill()
        spinner.wait()
    assert _reaches(free, lambda count: count >= before) is not None


def test_it_never_goes_below_one_or_above_the_cores():
    free = FreeCores(1)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(available_cores())]
    try:
        time.sleep(2 * SAMPLE_S)
        assert free() == 1
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
