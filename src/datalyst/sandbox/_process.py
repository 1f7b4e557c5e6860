"""Host-side handle of one jailed worker: send a request, collect output under a deadline, kill."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic

from datalyst.errors import SandboxError
from datalyst.sandbox._forkserver import ForkServer
from datalyst.sandbox._isolation import JailSpec
from datalyst.sandbox._replies import MalformedReply, Ready, Replayed, ReplyT, max_reply_bytes, parse_reply
from datalyst.sandbox._tree import JailProcesses
from datalyst.sandbox._wire import FrameBuffer, WireError, asend_frame
from datalyst.text import cut_note

STARTUP_TIMEOUT_S = 60.0
CPU_CHECK_S = 0.25
"""How often the host reads the jail's CPU time while a request runs."""
CPU_GRACE_S = 1.0
"""CPU seconds past a request's budget before the host kills the worker: the worker's own limit (a
catchable error in the cell) fires first when the cell is the only thing running."""
EXIT_REPORT_TIMEOUT_S = 5.0
DRAIN_TIMEOUT_S = 0.25
DRAIN_MAX_BYTES = 4 << 20
"""After a reply, output still in the pipes is read for at most this long and this much: enough to
empty two full pipes (1 MiB each at most without privileges), never forever, so a writer the cell
left running (a thread, a child) cannot hold the host."""


class OutputCap:
    """Keeps the first and last ``max_bytes // 2`` bytes of a stream and counts the rest."""

    def __init__(self, max_bytes: int) -> None:
        self.half = max_bytes // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        excess = len(self.tail) - self.half
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        head = self.head.decode(errors="replace")
        tail = self.tail.decode(errors="replace")
        if not self.dropped:
            return head + tail
        return head + cut_note(self.dropped, "bytes") + tail


@dataclass
class Exchange(Generic[ReplyT]):
    """What came back for one request."""

    reply: ReplyT | None
    stdout: OutputCap
    stderr: OutputCap
    timed_out: bool = False
    cpu_exceeded: bool = False
    """The jail's processes together used more CPU than the request's budget, and the host killed them."""
    died: bool = False
    exit_note: str = ""
    duration_s: float = 0.0
    replayed: bool = False
    replay_errors: list[str | None] | None = None
    """What each replayed cell or query raised this time (``ename`` or None), as the worker reports it."""


class _Readiness:
    """Which of some descriptors the running event loop has seen readable: a selector for a coroutine."""

    def __init__(self, fds: Sequence[int]) -> None:
        self._loop = asyncio.get_running_loop()
        self._fds = list(fds)
        self._ready: set[int] = set()
        self._woken = asyncio.Event()
        for fd in self._fds:
            self._loop.add_reader(fd, self._saw, fd)

    def _saw(self, fd: int) -> None:
        self._ready.add(fd)
        self._woken.set()

    async def select(self, timeout_s: float) -> set[int]:
        """The descriptors readable now, waiting up to ``timeout_s`` for one (empty when none became readable)."""
        if not self._ready:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), timeout_s)
        ready, self._ready = self._ready, set()
        self._woken.clear()
        return ready

    def drop(self, fd: int) -> None:
        """Stop watching ``fd`` (it reached its end)."""
        self._loop.remove_reader(fd)
        self._fds.remove(fd)

    def __enter__(self) -> _Readiness:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for fd in self._fds:
            self._loop.remove_reader(fd)


class WorkerProcess:
    """One live worker in its jail, owned by one sandbox: :meth:`start` it, then :meth:`exchange` requests."""

    def __init__(self, forkserver: ForkServer, spec: JailSpec, *, isolate: bool, disk: int | None = None) -> None:
        """Spawn the worker (blocking, briefly); :meth:`start` also waits until it is ready."""
        ctrl_host, ctrl_worker = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            fds = [ctrl_worker.fileno(), out_w, err_w, status_w, *([] if disk is None else [disk])]
            spawned = forkserver.spawn(spec, fds, isolate=isolate)
        except BaseException:
            ctrl_host.close()
            for fd in (out_r, err_r, status_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, status_w):
                os.close(fd)
            ctrl_worker.close()
        self.cgroup = spawned.cgroup
        self.ctrl = ctrl_host
        self.ctrl.setblocking(False)
        self.stdout_fd, self.stderr_fd, self.status_fd = out_r, err_r, status_r
        for fd in (out_r, err_r, status_r):
            os.set_blocking(fd, False)
        self._status_buf = b""
        self._fds_lock = threading.Lock()
        """Lets another thread's ``kill`` signal the worker while its owner may be closing the descriptors."""
        self.pid = 0
        self.pidfd: int | None = None
        self.processes: JailProcesses | None = None
        self.wait_status: int | None = None
        self.report: dict[str, Any] = {}
        self.degraded = ""

    @classmethod
    async def start(cls, forkserver: ForkServer, spec: JailSpec, *, isolate: bool, disk: int | None) -> WorkerProcess:
        """A worker spawned in its jail that has said it is ready (SandboxError when it does not)."""
        worker = await asyncio.to_thread(cls, forkserver, spec, isolate=isolate, disk=disk)
        await worker._await_startup()
        return worker

    # -- startup

    async def _status_lines(self, timeout_s: float) -> list[dict[str, Any]]:
        """Read whatever status lines the monitor has written (waits up to ``timeout_s`` for one)."""
        with _Readiness([self.status_fd]) as readiness:
            if not await readiness.select(timeout_s):
                return []
        chunk = _read(self.status_fd)
        if chunk == b"":
            raise EOFError
        self._status_buf += chunk or b""
        *lines, self._status_buf = self._status_buf.split(b"\n")
        messages = [json.loads(line) for line in lines if line.strip()]
        for message in messages:
            self._note(message)
        return messages

    def _note(self, message: dict[str, Any]) -> None:
        if "pid" in message and self.pidfd is None:
            self.pid = message["pid"]
            with contextlib.suppress(ProcessLookupError):
                self.pidfd = os.pidfd_open(self.pid)
        if "wait_status" in message:
            self.wait_status = message["wait_status"]
        if "degraded" in message:
            self.degraded = message["degraded"]
        if "jailed" in message:
            self.report = message["jailed"]

    async def _await_startup(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        try:
            while not (self.report and self.pidfd is not None):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SandboxError(f"the sandbox worker did not start within {STARTUP_TIMEOUT_S:.0f} s")
                for message in await self._status_lines(remaining):
                    if "setup_error" in message:
                        raise SandboxError(f"the sandbox worker could not be jailed: {message['setup_error']}")
        except EOFError:
            raise SandboxError("the sandbox worker exited during start-up") from None
        except SandboxError:
            self.close()
            raise
        self.processes = JailProcesses(self.pid, namespaced=bool(self.report.get("namespaces")), cgroup=self.cgroup)
        ready = await self.exchange(None, reply=Ready, timeout_s=STARTUP_TIMEOUT_S, max_output_bytes=4096)
        if ready.reply is None:
            self.close()
            raise SandboxError(f"the sandbox worker did not answer: {ready.exit_note or 'timeout'}")

    # -- requests

    async def exchange(
        self,
        request: dict[str, Any] | None,
        *,
        reply: type[ReplyT],
        timeout_s: float,
        max_output_bytes: int,
        after_replay_s: float | None = None,
        cpu_s: float | None = None,
        after_replay_cpu_s: float | None = None,
        fds: Sequence[int] = (),
    ) -> Exchange[ReplyT]:
        """Send one request (None: wait for the worker's greeting) and wait for its reply, the
        worker's death, or the deadline. Replies are matched to the request by a random ID, so a
        late reply to an earlier request is never taken for this one; as a cell can read the ID and
        forge a reply, the reply (of type ``reply``) is validated, and one that is malformed, too
        large or too deep counts as the worker's death: it is killed, and ``exit_note`` says why.

        ``timeout_s`` covers replaying earlier cells; when the worker reports the replay done, the
        deadline restarts with ``after_replay_s`` for the new cell. ``cpu_s`` (then
        ``after_replay_cpu_s``) is the CPU time all the jail's processes and threads may use
        together, measured from the host; between requests the host keeps them stopped, so nothing a
        cell left running uses the CPU while the model thinks. ``fds`` travel with the request.
        """
        started = time.monotonic()
        processes = self.processes if cpu_s is not None else None
        if processes is not None:
            processes.resume()
            cpu_start, cpu_budget = processes.cpu_s(), cpu_s
        next_cpu_check = started + CPU_CHECK_S
        result: Exchange[ReplyT] = Exchange(None, OutputCap(max_output_bytes), OutputCap(max_output_bytes))
        caps = {self.stdout_fd: result.stdout, self.stderr_fd: result.stderr}
        frames = FrameBuffer(max_reply_bytes(max_output_bytes))
        malformed = ""
        request_id = None
        deadline = started + timeout_s
        ended = False
        try:
            if request is not None:
                request_id = secrets.token_hex(8)
                try:  # a worker that stops reading cannot hold the host past the deadline
                    await asyncio.wait_for(asend_frame(self.ctrl, {**request, "id": request_id}, fds), timeout_s)
                except TimeoutError:  # an OSError too: caught first
                    result.timed_out = True
                except OSError:
                    result.died = True
            with _Readiness([self.ctrl.fileno(), *caps]) as readiness:
                while result.reply is None and not result.died and not result.timed_out:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        result.timed_out = True
                        break
                    if processes is not None and time.monotonic() >= next_cpu_check:
                        next_cpu_check = time.monotonic() + CPU_CHECK_S
                        if processes.cpu_s() - cpu_start > cpu_budget + CPU_GRACE_S:
                            result.cpu_exceeded = True
                            break
                    for fd in await readiness.select(remaining if processes is None else min(remaining, CPU_CHECK_S)):
                        if fd in caps:
                            data = _read(fd)
                            if data == b"":
                                readiness.drop(fd)
                            elif data:
                                caps[fd].add(data)
                            continue
                        try:
                            data = self.ctrl.recv(1 << 20)
                        except BlockingIOError:
                            continue
                        except ConnectionResetError:  # the worker died with a request still unread
                            data = b""
                        if not data:
                            result.died = True
                            break
                        try:
                            for frame in frames.feed(data):
                                if frame.get("id") != request_id:
                                    continue  # not an answer to this request (a late or forged frame)
                                if frame.get("op") != "replayed":
                                    result.reply = parse_reply(reply, frame)
                                    break  # a second answer is not taken for the first
                                notice = parse_reply(Replayed, frame)  # a repeated one is checked, then ignored
                                if after_replay_s and not result.replayed:
                                    result.replayed = True
                                    result.replay_errors = notice.errors
                                    deadline = time.monotonic() + after_replay_s
                                    if processes is not None:
                                        cpu_start, cpu_budget = processes.cpu_s(), after_replay_cpu_s or cpu_s
                        except (WireError, MalformedReply) as exc:
                            result.died = True
                            malformed = f"the worker sent a malformed reply ({exc}) and was killed"
            self._drain(result)
            ended = True
        finally:
            if not ended:  # cancelled midway: the worker's state is unknown, so it goes
                self.kill()
        if result.timed_out or result.died or result.cpu_exceeded:
            result.exit_note = malformed or await self.exit_note()
        elif processes is not None:
            processes.stop()
        result.duration_s = time.monotonic() - started
        return result

    def _drain(self, result: Exchange) -> None:
        """Read what the worker wrote before its reply (see ``DRAIN_TIMEOUT_S``)."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        budget = DRAIN_MAX_BYTES
        for fd, cap in ((self.stdout_fd, result.stdout), (self.stderr_fd, result.stderr)):
            while budget > 0 and time.monotonic() < deadline and (data := _read(fd)):
                cap.add(data)
                budget -= len(data)

    # -- ending

    def kill(self) -> None:
        """Kill the worker, and with it its whole PID namespace (safe from any thread)."""
        with self._fds_lock:
            if self.pidfd is not None and self.wait_status is None:
                if not self.report.get("namespaces"):  # no PID namespace: kill the worker's process group
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    async def exit_note(self) -> str:
        """Kill the worker, wait until every process of its jail has exited, and say how it ended."""
        self.kill()
        deadline = time.monotonic() + EXIT_REPORT_TIMEOUT_S
        try:  # the monitor reports how the worker ended, then exits: its status pipe ends with it
            while time.monotonic() < deadline:
                await self._status_lines(deadline - time.monotonic())
        except EOFError:
            pass
        return describe_exit(self.wait_status)

    def close(self) -> None:
        """Kill the worker and close its descriptors (``await exit_note()`` first to wait for its jail to end)."""
        self.kill()
        with self._fds_lock:
            self.ctrl.close()
            for fd in (self.stdout_fd, self.stderr_fd, self.status_fd, self.pidfd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self.pidfd = None


def _read(fd: int) -> bytes | None:
    """Read what is available: bytes, b"" at end of file, None when nothing is ready."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None


def describe_exit(wait_status: int | None) -> str:
    if wait_status is None:
        return "the worker was killed"
    if os.WIFSIGNALED(wait_status):
        return f"the worker was killed by signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
    return f"the worker exited with code {os.WEXITSTATUS(wait_status)}"
