"""The host side of a worker: output that never stops cannot hold the host."""

from __future__ import annotations

import pytest

from datalyst.sandbox import _process
from datalyst.sandbox._process import DRAIN_MAX_BYTES, Exchange, OutputCap, WorkerProcess

CHUNK = b"x" * 65536


@pytest.mark.timeout(30)
def test_draining_after_the_reply_stops_for_a_writer_that_never_stops(monkeypatch):
    reads = []

    def endless(fd: int) -> bytes:  # a pipe that always has more to read
        reads.append(fd)
        return CHUNK

    monkeypatch.setattr(_process, "_read", endless)
    worker = WorkerProcess.__new__(WorkerProcess)  # no real worker: only its pipes are read
    worker.stdout_fd, worker.stderr_fd = 101, 102
    result = Exchange(None, OutputCap(1000), OutputCap(1000))
    worker._drain(result)
    assert len(reads) * len(CHUNK) <= DRAIN_MAX_BYTES + len(CHUNK)
    assert result.stdout.dropped > 0 and result.stdout.text().startswith("x" * 500)
