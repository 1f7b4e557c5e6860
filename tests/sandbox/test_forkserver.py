"""The host <-> fork server protocol: framed, answered even when malformed, and never waited on forever."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from unittest.mock import ANY

import pytest

from datalyst.errors import SandboxError
from datalyst.sandbox import ForkServer, Limits, Sandbox, _forkserver
from datalyst.sandbox._isolation import JailSpec
from datalyst.sandbox._process import WorkerProcess
from datalyst.sandbox._wire import FrameBuffer, recv_frame, send_frame


def raw(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def spec(tmp_path: Path) -> JailSpec:
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "root").mkdir(exist_ok=True)
    return JailSpec(
        workdir=str(tmp_path / "work"), root=str(tmp_path / "root"), readonly_files=[], limits=Limits().model_dump()
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    fs = ForkServer()
    fs.ensure_run_root()
    yield fs
    fs.close()


def ask(fs: ForkServer, frame: bytes, fds: list[int] = ()) -> dict:
    """Send one raw frame to the fork server, bypassing the host's own requests, and read its answer."""
    with fs._lock:
        assert fs._sock is not None
        if fds:
            socket.send_fds(fs._sock, [frame], list(fds))
        else:
            fs._sock.sendall(frame)
        return recv_frame(fs._sock)


def still_serves(fs: ForkServer) -> None:
    with Sandbox(forkserver=fs, limits=Limits(wall_s=20, cpu_s=20)) as sb:
        result = sb.run_python("print(6 * 7)")
    assert result.stdout == "42\n", result.render()


# ---------------------------------------------------------------- the fork server's side


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        pytest.param(raw(b"{not json"), "malformed request", id="not-json"),
        pytest.param(raw(b"[" * 5_000 + b"]" * 5_000), "malformed request", id="deeply-nested"),
        pytest.param(raw(json.dumps({"op": "dance", "id": "a"}).encode()), "unknown op", id="unknown-op"),
        pytest.param(raw(json.dumps({"op": "spawn", "id": "b"}).encode()), "malformed spawn request", id="no-spec"),
        pytest.param(
            raw(json.dumps({"op": "spawn", "id": "c", "spec": [1], "isolate": True}).encode()),
            "malformed spawn request",
            id="spec-not-an-object",
        ),
        pytest.param(
            raw(json.dumps({"op": "spawn", "id": "d", "spec": {"workdir": "/x"}, "isolate": True}).encode()),
            "malformed spawn request",
            id="spec-incomplete",
        ),
    ],
)
def test_a_malformed_request_is_answered_and_the_server_keeps_serving(server, frame, expected):
    reply = ask(server, frame)
    assert expected in reply["error"], reply
    assert "\n" not in reply["error"]
    still_serves(server)


@pytest.mark.timeout(120)
def test_a_spawn_request_without_its_descriptors_is_refused_and_theirs_are_closed(server, tmp_path):
    r, w = os.pipe()
    request = {"op": "spawn", "id": "e", "spec": asdict(spec(tmp_path)), "isolate": True}
    reply = ask(server, raw(json.dumps(request).encode()), [w])  # one descriptor instead of four
    os.close(w)
    assert "malformed spawn request" in reply["error"] and reply["id"] == "e", reply
    assert os.read(r, 1) == b"", "the fork server kept the descriptor of a refused request"
    os.close(r)
    still_serves(server)


@pytest.mark.timeout(60)
def test_a_monitor_that_never_answers_its_handshake_is_killed(tmp_path, monkeypatch):
    """``_spawn`` runs here, in the test process; its child stands for a monitor stuck before the handshake."""
    monkeypatch.setattr(_forkserver, "HANDSHAKE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(_forkserver, "_run_monitor", lambda *args: time.sleep(600))
    pipes = [os.pipe() for _ in range(4)]
    fds = [w for _, w in pipes]
    monitors: dict[int, str | None] = {}
    request = {"op": "spawn", "id": "f", "spec": asdict(spec(tmp_path)), "isolate": True}
    reply = _forkserver._spawn(request, fds, monitors, None)
    assert "the sandbox monitor did not finish its handshake" in reply["error"], reply
    (pid,) = monitors
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status), "the stuck monitor was not killed"
    for r, _ in pipes:
        os.close(r)


def test_a_late_answer_of_the_disk_maker_is_not_taken_for_the_next_request():
    """``_disk`` runs here, in the test process, against a stand-in disk maker that answers late."""
    server_end, maker_end = socket.socketpair()
    host_end, host_far = socket.socketpair()
    with server_end, maker_end, host_end:

        def maker() -> None:
            request, fds = _forkserver.recv_frame_with_fds(maker_end, 1)
            for fd in fds:
                os.close(fd)
            send_frame(maker_end, {"error": "a late answer to an earlier request", "id": "earlier"})
            send_frame(maker_end, {"ok": True, "id": request["id"]})

        threading.Thread(target=maker, daemon=True).start()
        assert _forkserver._disk(server_end, {"size_mb": 8}, [host_far.detach()]) == {"ok": True, "id": ANY}


@pytest.mark.timeout(60)
def test_a_disk_maker_that_was_killed_is_started_again():
    fs = ForkServer()
    try:
        fs.ensure_run_root()
        if fs.disk_maker_pid is None:
            pytest.skip("this machine gives the fork server no disk maker (no user namespaces)")
        os.close(fs.make_disk(8))
        os.kill(fs.disk_maker_pid, signal.SIGKILL)
        while Path(f"/proc/{fs.disk_maker_pid}").exists():  # until the fork server has reaped it
            time.sleep(0.01)
        os.close(fs.make_disk(8))
    finally:
        fs.close()


# ---------------------------------------------------------------- the host's side


class SilentServer:
    """A fork server stand-in that reads requests and answers only when told."""

    def __init__(self) -> None:
        self.host_end, self.server_end = socket.socketpair()
        self.requests: list[dict] = []
        self._frames = FrameBuffer()

    def read_request(self) -> dict:
        while not (frames := self._frames.feed(socket.recv_fds(self.server_end, 1 << 16, 8)[0])):
            pass
        self.requests += frames
        return frames[-1]

    def close(self) -> None:
        self.host_end.close()
        self.server_end.close()


@pytest.fixture
def silent() -> Iterator[tuple[ForkServer, SilentServer]]:
    stand_in = SilentServer()
    fs = ForkServer()
    fs._sock = stand_in.host_end  # as if started: requests go to the stand-in
    yield fs, stand_in
    fs._sock = None
    stand_in.close()


@pytest.mark.timeout(60)
def test_a_fork_server_that_does_not_answer_lets_the_host_go(silent, tmp_path, monkeypatch):
    fs, stand_in = silent
    monkeypatch.setattr(_forkserver, "SPAWN_TIMEOUT_S", 0.5)
    with pytest.raises(SandboxError, match="did not answer"):
        fs.spawn(spec(tmp_path), [], isolate=True)
    assert not fs._lock.locked()
    late = stand_in.read_request()
    send_frame(stand_in.server_end, {"id": late["id"], "pid": 1})  # the answer to the request given up on

    def answer_next() -> None:
        request = stand_in.read_request()
        send_frame(stand_in.server_end, {"id": request["id"], "pid": 2})

    threading.Thread(target=answer_next, daemon=True).start()
    assert fs.spawn(spec(tmp_path), [], isolate=True).monitor_pid == 2  # the late answer is not taken for this one


@pytest.mark.timeout(60)
def test_a_failed_spawn_leaves_no_descriptor_open(tmp_path):
    class Refusing:
        def spawn(self, *args: object, **options: object) -> int:
            raise SandboxError("refused")

    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(SandboxError):
        WorkerProcess(Refusing(), spec(tmp_path), isolate=True)  # type: ignore[arg-type]
    assert set(os.listdir("/proc/self/fd")) == before


def test_a_host_that_crashes_while_its_server_starts_leaves_no_traceback():
    """Native code may kill the host (SIGILL) while its fork server still loads its libraries: the server's
    greeting then goes nowhere, and it ends quietly instead of printing a BrokenPipeError on the terminal."""
    script = (
        "import os, signal, threading, time\n"
        "from datalyst.sandbox import ForkServer\n"
        "threading.Thread(target=ForkServer().ensure_run_root, daemon=True).start()\n"
        "time.sleep(0.3)\n"  # the server has started and is importing pandas and the rest (about a second)
        "os.kill(os.getpid(), signal.SIGILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGILL
    assert done.stderr == ""
