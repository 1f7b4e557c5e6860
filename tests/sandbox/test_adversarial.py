"""Hostile cells against the real jail: each attack must stay inside the sandbox.

The static screen is switched off (``screen_code=False``) so every attack actually runs and only
the kernel-level isolation stands in its way: namespaces, the private read-only root, rlimits and
the wall-clock watchdog. Every test checks that the attack was contained (the flag or error we
expect, the host unchanged), that the data file is byte-for-byte unchanged (the staged copy and
the original), and that an ordinary cell still works afterwards in the same sandbox.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import secrets
import select
import shutil
import signal
import socket
import sqlite3
import stat
import string
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from datalyst.data import _reader
from datalyst.sandbox import ExecResult, ForkServer, Limits, Sandbox

MiB = 1024 * 1024
# Every worker inherits about 1.5 GiB of address space from the fork server (preloaded libraries and a
# 1 GiB reservation), which counts against memory_mb: 2048 leaves a cell about 500 MiB to allocate.
LIMITS = Limits(wall_s=10, cpu_s=8, memory_mb=2048, processes=64, file_size_mb=16, tmp_mb=8, max_output_chars=2_000)
WAIT_FOR_EXIT_S = 30.0
"""Bound on waiting for the kernel to tear a killed jail down (a failure bound, not a timing check)."""
BOTH_MODES = pytest.mark.parametrize("mode", ["session", "replay"])


# ---------------------------------------------------------------- helpers


def sha256(path: str | os.PathLike[str]) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cell(template: str, **values: object) -> str:
    """Cell source from an indented template; ``$name`` placeholders become Python literals."""
    return string.Template(textwrap.dedent(template)).substitute({k: repr(v) for k, v in values.items()})


def token(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


def is_os_error(result: ExecResult) -> bool:
    """The cell failed with ``OSError`` or one of its built-in subclasses."""
    if result.error is None:
        return False
    raised = getattr(builtins, result.error.ename, None)
    return isinstance(raised, type) and issubclass(raised, OSError)


@dataclass(frozen=True)
class DataFile:
    source: Path
    digest: str
    stat: os.stat_result


def assert_contained_and_usable(sb: Sandbox, data: DataFile) -> None:
    """The postconditions shared by every attack: the data is untouched and the sandbox still answers."""
    (staged,) = sb.data_files
    assert sha256(data.source) == data.digest, "the original data file was changed"
    assert sha256(staged) == data.digest, "the staged data file was changed"
    assert stat.S_IMODE(os.stat(staged).st_mode) == 0o444, "the staged data file became writable"
    after = sb.run_python("print(1 + 1)")
    assert after.stdout == "2\n", after.render()
    assert after.error is None and not after.timed_out and not after.crashed, after.render()
    assert sha256(staged) == data.digest, "the staged data file was changed by a replayed cell"


def host_pids() -> set[int]:
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except OSError:  # the process ended while we looked
        return {}


def descendants() -> set[int]:
    """Live host processes started, directly or not, by this test process (fork server, monitors, jails)."""
    children: dict[int, list[int]] = {}
    for pid in host_pids():
        status = _status(pid)
        if "PPid" in status and not status.get("State", "").startswith(("Z", "X")):  # zombies run nothing
            children.setdefault(int(status["PPid"]), []).append(pid)
    found: set[int] = set()
    stack = [os.getpid()]
    while stack:
        kids = children.get(stack.pop(), [])
        found.update(kids)
        stack.extend(kids)
    return found


def jailed_descendants() -> set[int]:
    """Our live descendants that run in a nested PID namespace: jailed workers and what they started."""
    own_depth = len(_status(os.getpid())["NSpid"].split())
    return {pid for pid in descendants() if len(_status(pid).get("NSpid", "").split()) > own_depth}


def still_running_after_wait(pids: set[int] | list[int]) -> set[int]:
    """Wait (on pidfds, so on the exits themselves) until ``pids`` have exited; return any still running.

    ``Sandbox.close()`` and replay mode send SIGKILL to the jail's PID 1 without waiting: the kernel
    then tears the PID namespace down asynchronously, so a check right after ``close()`` would race.
    """
    pidfds: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # already gone
            pidfds[os.pidfd_open(pid)] = pid
    try:
        poller = select.poll()
        for fd in pidfds:
            poller.register(fd, select.POLLIN)
        pending = set(pidfds)
        deadline = time.monotonic() + WAIT_FOR_EXIT_S
        while pending and (left := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(left * 1000):
                pending.discard(fd)
                poller.unregister(fd)
        return {pidfds[fd] for fd in pending}
    finally:
        for fd in pidfds:
            os.close(fd)


def close_and_wait(sb: Sandbox) -> None:
    """Close the sandbox, then wait until every process it had on the host has exited."""
    doomed = descendants() - server_processes()
    sb.close()
    assert still_running_after_wait(doomed) == set(), "processes survived sb.close()"


def processes_with_arg(marker: str) -> list[int]:
    """Host PIDs whose command line contains ``marker``."""
    found = []
    for pid in host_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def forkserver_pids() -> list[int]:
    """The fork servers this test process started (its children running ``_forkserver``)."""
    mine = [pid for pid in host_pids() if _status(pid).get("PPid") == str(os.getpid())]
    return [pid for pid in mine if pid in processes_with_arg("datalyst.sandbox._forkserver")]


def server_processes() -> set[int]:
    """The fork servers, with the disk maker each keeps for its whole life, and the data-file reader server (the
    agent describes the files on the host): what no sandbox owns."""
    servers = forkserver_pids()
    makers = {pid for pid in host_pids() if int(_status(pid).get("PPid", 0)) in servers and _is_disk_maker(pid)}
    reader = {_reader._server[0].pid} if _reader._server is not None else set()
    return set(servers) | makers | reader


def _is_disk_maker(pid: int) -> bool:
    """A fork server's children are monitors, each leading its own session, and its one disk maker."""
    try:
        return os.getsid(pid) != pid
    except ProcessLookupError:
        return False


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def victim_data(tmp_path: Path) -> DataFile:
    """A small CSV on the host, with unique content, that every attack tries to reach."""
    source = tmp_path / "sales.csv"
    rows = "".join(f"{i},{i * 7 % 13},{token('row')}\n" for i in range(200))
    source.write_text("id,units,note\n" + rows)
    source.chmod(0o644)
    return DataFile(source, sha256(source), os.stat(source))


@pytest.fixture
def open_sandbox(victim_data: DataFile) -> Iterator[Callable[..., Sandbox]]:
    """Factory of fully isolated sandboxes over ``victim_data`` (closed at teardown)."""
    opened: list[Sandbox] = []

    def make(mode: str = "session", forkserver: ForkServer | None = None, **limits: float) -> Sandbox:
        sb = Sandbox(
            files=[victim_data.source],
            mode=mode,  # type: ignore[arg-type]
            limits=Limits(**{**LIMITS.model_dump(), **limits}),
            screen_code=False,
            require_isolation=True,  # never let these attacks run against an unjailed worker
            forkserver=forkserver,
        )
        opened.append(sb)
        assert sb.isolation.startswith("namespaces:"), sb.isolation
        return sb

    yield make
    for sb in opened:
        sb.close()


@pytest.fixture
def home_secret() -> Iterator[tuple[Path, str]]:
    """A secret file in the host user's home folder: (its path, its text)."""
    path = Path.home() / f".{token('datalyst-adversarial-secret')}"
    text = token("SECRET-HOME")
    path.write_text(text)
    try:
        yield path, text
    finally:
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------- 1. CPU


BUSY_LOOP = "while True:\n    pass"
SWALLOWING_LOOP = (
    "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
)


# In replay mode a cell that ended with an error (CpuTimeExceeded included) is replayed before the next
# cell, burning its CPU again; only cells stopped by the watchdog are forgotten. So replay mode only
# gets the variants the watchdog ends, which keeps the follow-up cell fast on a busy machine.
@pytest.mark.parametrize(
    "mode, code, wall_s, cpu_s",
    [
        pytest.param("session", BUSY_LOOP, 3, 30, id="busy-loop-wall-limit-session"),
        pytest.param("replay", BUSY_LOOP, 3, 30, id="busy-loop-wall-limit-replay"),
        pytest.param("session", BUSY_LOOP, 10, 1, id="busy-loop-cpu-limit-session"),
        pytest.param("session", SWALLOWING_LOOP, 3, 1, id="loop-swallowing-the-cpu-error-session"),
        pytest.param("replay", SWALLOWING_LOOP, 3, 1, id="loop-swallowing-the-cpu-error-replay"),
    ],
)
def test_infinite_loop_is_stopped(open_sandbox, victim_data, mode, code, wall_s, cpu_s):
    sb = open_sandbox(mode, wall_s=wall_s, cpu_s=cpu_s)
    result = sb.run_python(code)
    assert result.timed_out or (result.error and result.error.ename == "CpuTimeExceeded"), result.render()
    if cpu_s > wall_s:
        assert result.timed_out, result.render()
    if code == SWALLOWING_LOOP and not result.timed_out:  # the host stopped it from outside, one second past
        assert "threads and processes" in result.error.evalue, result.render()
    assert_contained_and_usable(sb, victim_data)


# ---------------------------------------------------------------- 2. memory


@BOTH_MODES
@pytest.mark.parametrize(
    "code",
    [
        pytest.param("blob = bytearray(4 * 1024**3)", id="bytearray-4GiB"),
        pytest.param("hoard = []\nwhile True:\n    hoard.append(bytearray(10**7))", id="growing-list"),
        pytest.param("text = 'x'\nwhile True:\n    text += text", id="doubling-string"),
        pytest.param("import numpy as np\narr = np.ones(10**10)", id="numpy-array"),
    ],
)
def test_memory_bomb_is_refused(open_sandbox, victim_data, mode, code):
    sb = open_sandbox(mode)
    result = sb.run_python(code)
    assert result.memory_exceeded or result.crashed, result.render()
    assert not result.timed_out
    assert_contained_and_usable(sb, victim_data)


# ---------------------------------------------------------------- 3. processes

FORK_LOOP = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
SUBPROCESS_FLOOD = """
import subprocess
import sys
started, refused = [], 0
for _ in range(300):
    try:
        started.append(subprocess.Popen(["/bin/sleep", "600"]))
    except OSError:
        refused += 1
print(len(started), refused)
"""
MULTIPROCESSING_FLOOD = """
import multiprocessing, time
context = multiprocessing.get_context("fork")
started, refused = 0, 0
for _ in range(300):
    try:
        context.Process(target=time.sleep, args=(600,), daemon=True).start()
        started += 1
    except OSError:
        refused += 1
print(started, refused)
"""


@pytest.mark.parametrize(
    "mode, code",
    [
        pytest.param("session", FORK_LOOP, id="os.fork-loop"),
        pytest.param("session", SUBPROCESS_FLOOD, id="subprocess-session"),
        pytest.param("replay", SUBPROCESS_FLOOD, id="subprocess-replay"),
        pytest.param("session", MULTIPROCESSING_FLOOD, id="multiprocessing"),
    ],
)
def test_fork_bomb_is_capped_and_cleaned_up(open_sandbox, victim_data, mode, code):
    sb = open_sandbox(mode, wall_s=3, cpu_s=5)
    # Counted among this test's own descendants: the host-wide total moves with other jobs on the machine.
    before = descendants()  # the fork server, and the monitor and worker of this sandbox
    result = sb.run_python(code)
    if code == FORK_LOOP:  # never ends by itself: the watchdog (or a limit) must stop it
        assert result.timed_out or result.crashed or result.error is not None, result.render()
    else:
        assert result.ok, result.render()
        started, refused = map(int, result.stdout.split())
        assert refused > 0 and started < LIMITS.processes, result.stdout
    assert_contained_and_usable(sb, victim_data)
    close_and_wait(sb)
    assert jailed_descendants() == set()
    assert descendants() <= before  # back to normal: nothing but the fork server is left
    assert descendants() == server_processes()


def test_thread_bomb_is_capped(open_sandbox, victim_data):
    sb = open_sandbox("session", wall_s=5)
    result = sb.run_python(
        cell("""
        import threading, time
        threading.stack_size(256 * 1024)  # small stacks: run into the process cap, not the memory limit
        started = 0
        try:
            for _ in range(5000):
                threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
                started += 1
        except (RuntimeError, MemoryError) as exc:
            print("refused:", type(exc).__name__)
        print(started)
        """)
    )
    if result.ok:
        assert "refused:" in result.stdout
        assert int(result.stdout.split()[-1]) < LIMITS.processes
    else:  # a thread that cannot finish starting leaves Thread.start() waiting: the watchdog ends it
        assert result.timed_out or result.crashed, result.render()
    assert_contained_and_usable(sb, victim_data)


# ---------------------------------------------------------------- 5. output


@BOTH_MODES
@pytest.mark.parametrize(
    "code, stream",
    [
        pytest.param("import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 10**6)", "stdout", id="50MB-stdout"),
        pytest.param("import sys\nfor _ in range(50):\n    sys.stderr.write('e' * 10**6)", "stderr", id="50MB-stderr"),
        pytest.param("import os\nfor _ in range(50):\n    os.write(1, b'r' * 10**6)", "stdout", id="50MB-raw-fd"),
        pytest.param("for i in range(300_000):\n    print(i)", "stdout", id="300k-lines"),
        pytest.param("raise ValueError('v' * 10**7)", "error", id="10MB-exception"),
    ],
)
def test_huge_output_is_truncated(open_sandbox, victim_data, mode, code, stream):
    sb = open_sandbox(mode)
    result = sb.run_python(code)
    bound = LIMITS.max_output_chars + 100  # room for the "... [N bytes cut] ..." note
    assert len(result.stdout) <= bound and len(result.stderr) <= bound
    if stream == "error":
        assert result.error is not None and result.error.ename == "ValueError"
        assert len(result.error.traceback) <= bound and len(result.error.evalue) <= bound
    else:
        assert result.truncated and "bytes cut]" in getattr(result, stream)
    assert len(result.render()) <= 3 * bound
    assert_contained_and_usable(sb, victim_data)


# ---------------------------------------------------------------- 6-8. crashes and signals


DIVE = "import sys\nsys.setrecursionlimit(10**6)\ndef dive(n):\n    return dive(n + 1)\ndive(0)"
NESTED_REPR = (
    "import sys\nsys.setrecursionlimit(10**6)\nnest = []\nfor _ in range(10**5):\n    nest = [nest]\nrepr(nest)"
)


@pytest.mark.parametrize(
    "mode, code",
    [
        # Not in replay mode: if it ends with RecursionError it is replayed, seconds long, before the next cell.
        pytest.param("session", DIVE, id="function-recursion-session"),
        pytest.param("session", NESTED_REPR, id="nested-repr-session"),
        pytest.param("replay", NESTED_REPR, id="nested-repr-replay"),
    ],
)
def test_deep_recursion_fails_inside_the_sandbox(open_sandbox, victim_data, mode, code):
    # RecursionError, MemoryError, a segfault of the worker, or (formatting a traceback of a million
    # frames is slow) the watchdog: any of them is fine as long as only the sandbox notices.
    sb = open_sandbox(mode, wall_s=3)
    result = sb.run_python(code)
    assert result.crashed or result.error is not None, result.render()
    assert_contained_and_usable(sb, victim_data)


@BOTH_MODES
@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import ctypes\nctypes.string_at(0)", id="ctypes-null-read"),
        pytest.param("import os\nos.abort()", id="abort"),
        pytest.param("import os\nos._exit(3)", id="os._exit"),
    ],
)
def test_worker_crash_is_reported_and_replaced(open_sandbox, victim_data, mode, code):
    sb = open_sandbox(mode)
    assert sb.run_python("kept = 41").ok
    result = sb.run_python(code)
    assert result.crashed and result.error is not None and result.error.ename == "WorkerCrashed"
    assert not result.state_lost
    after = sb.run_python("print('kept' in globals())")
    assert after.state_lost and after.stdout == "False\n", after.render()
    assert "variables from earlier cells are lost" in after.render()
    assert_contained_and_usable(sb, victim_data)


@BOTH_MODES
def test_cell_ignoring_termination_signals_is_killed_at_the_wall_limit(open_sandbox, victim_data, mode):
    sb = open_sandbox(mode, wall_s=3, cpu_s=2)
    result = sb.run_python(
        cell("""
        import signal
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM):
            signal.signal(sig, signal.SIG_IGN)
        while True:
            pass
        """)
    )
    assert result.timed_out, result.render()
    assert result.error is not None and result.error.ename == "TimeoutError"
    assert_contained_and_usable(sb, victim_data)


def test_forged_replay_notices_do_not_extend_the_wall_limit(open_sandbox, victim_data):
    """The worker's control socket is reachable from the cell; a cell that keeps writing
    ``{"op": "replayed"}`` frames on it must still be stopped after ``wall_s``."""
    sb = open_sandbox("session", wall_s=1)
    result = sb.run_python(
        cell("""
        import json, os, stat, struct, time
        control = next(fd for fd in range(3, 256) if os.path.exists(f"/proc/self/fd/{fd}")
                       and stat.S_ISSOCK(os.fstat(fd).st_mode))
        frame = json.dumps({"op": "replayed"}).encode()
        stop = time.monotonic() + 4
        while time.monotonic() < stop:
            os.write(control, struct.pack(">I", len(frame)) + frame)
            time.sleep(0.25)
        print("outlived the wall limit")
        """)
    )
    assert result.timed_out, f"ran {result.duration_s:.1f} s with wall_s=1: {result.render()}"
    assert "outlived the wall limit" not in result.stdout
    assert_contained_and_usable(sb, victim_data)


# ---------------------------------------------------------------- 9-10. the process tree


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("os.kill(os.getppid(), signal.SIGKILL)", id="kill-getppid"),
        pytest.param("os.kill(-1, signal.SIGKILL)", id="kill-minus-one"),
        pytest.param("os.killpg(0, signal.SIGKILL)", id="killpg-own-group"),
        pytest.param("os.kill(1, signal.SIGKILL)", id="kill-pid-1"),
        pytest.param("os.kill(HOST_PID, signal.SIGKILL)", id="kill-host-test-pid"),
        pytest.param("os.kill(FORKSERVER_PID, signal.SIGKILL)", id="kill-forkserver-pid"),
        pytest.param(
            "child = os.fork()\nif child == 0:\n    try:\n        os.kill(os.getppid(), signal.SIGKILL)\n"
            "        os.kill(-1, signal.SIGKILL)\n    finally:\n        os._exit(0)\nos.waitpid(child, 0)",
            id="kill-parent-from-a-child",
        ),
    ],
)
def test_killing_the_parent_leaves_the_host_alive(open_sandbox, victim_data, code):
    sb = open_sandbox("session")
    (server,) = forkserver_pids()
    prelude = f"import os, signal\nHOST_PID = {os.getpid()}\nFORKSERVER_PID = {server}\n"
    result = sb.run_python(prelude + code)
    assert not result.timed_out, result.render()
    assert result.ok or result.crashed or is_os_error(result), result.render()
    assert forkserver_pids() == [server], "the fork server was killed"
    assert_contained_and_usable(sb, victim_data)


DAEMON = """
import os
read_end, write_end = os.pipe()  # close-on-exec: EOF once the daemon has exec'd
child = os.fork()
if child == 0:
    try:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", $marker])
    finally:
        os._exit(0)
os.close(write_end)
os.read(read_end, 1)
os.close(read_end)
print("daemon started")
"""


@pytest.mark.parametrize(
    "mode, ending",
    [("session", "close"), ("session", "worker-crash"), ("replay", "close")],
)
def test_double_forked_daemon_does_not_survive_its_worker(open_sandbox, victim_data, mode, ending):
    marker = f"1000.{secrets.randbelow(10**12):012d}"  # a valid, unique argument for sleep
    sb = open_sandbox(mode)
    try:
        result = sb.run_python(cell(DAEMON, marker=marker))
        assert result.ok and result.stdout == "daemon started\n", result.render()
        if mode == "session":  # alive while its worker is, so its absence later means something
            assert processes_with_arg(marker), "the daemon never appeared on the host"
        else:  # replay mode kills the worker after every cell
            assert still_running_after_wait(processes_with_arg(marker)) == set()
        assert_contained_and_usable(sb, victim_data)
        if ending == "worker-crash":
            daemons = processes_with_arg(marker)
            assert sb.run_python("import os\nos._exit(1)").crashed
            assert still_running_after_wait(daemons) == set()
            assert processes_with_arg(marker) == []
            assert_contained_and_usable(sb, victim_data)
        close_and_wait(sb)
        assert processes_with_arg(marker) == []
        assert jailed_descendants() == set()
    finally:
        for pid in processes_with_arg(marker):  # never leave a stray daemon behind
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- 11-13. files


@BOTH_MODES
@pytest.mark.parametrize(
    "code",
    [
        pytest.param("with open('big.bin', 'wb') as f:\n    f.write(bytes(LIMIT + 4 * 2**20))", id="one-write"),
        pytest.param("with open('big.bin', 'wb') as f:\n    while True:\n        f.write(bytes(2**20))", id="appends"),
        pytest.param("with open('big.bin', 'wb') as f:\n    f.seek(64 * LIMIT)\n    f.write(b'x')", id="seek-far"),
        pytest.param("with open('big.bin', 'wb') as f:\n    f.truncate(10**12)", id="truncate-up"),
        pytest.param(
            "import os\nfd = os.open('big.bin', os.O_CREAT | os.O_WRONLY)\nos.posix_fallocate(fd, 0, 10**12)",
            id="fallocate",
        ),
    ],
)
def test_file_larger_than_the_limit_is_refused(open_sandbox, victim_data, mode, code):
    sb = open_sandbox(mode)
    limit = LIMITS.file_size_mb * MiB
    result = sb.run_python(f"LIMIT = {limit}\n" + code)
    assert result.crashed or (is_os_error(result) and "File too large" in result.error.evalue), result.render()
    big = Path(sb.host_workdir, "big.bin")
    if big.exists():
        assert big.stat().st_size <= limit
        assert big.stat().st_blocks * 512 <= limit + MiB
    assert_contained_and_usable(sb, victim_data)


def test_filling_the_private_tmp_stops_at_its_size(open_sandbox, victim_data):
    sb = open_sandbox("session", tmp_mb=8)
    result = sb.run_python(
        cell("""
        for i in range(1000):
            with open(f"/tmp/fill-{i}", "wb") as f:
                f.write(bytes(2**20))
        """)
    )
    assert is_os_error(result) and "No space left" in result.error.evalue, result.render()
    assert_contained_and_usable(sb, victim_data)


@BOTH_MODES
def test_filling_the_work_folder_stops_at_its_disk_size_and_the_host_disk_is_untouched(open_sandbox, victim_data, mode):
    sb = open_sandbox(mode, disk_mb=16)
    host_free = shutil.disk_usage(sb.workdir).free
    fill = cell("""
        for i in range(1000):
            with open(f"fill-{i}", "wb") as f:
                f.write(bytes(2**20))
        """)
    result = sb.run_python(fill)
    assert is_os_error(result) and "No space left" in result.error.evalue, result.render()
    assert "private disk of 16 MiB" in sb.isolation
    assert os.listdir(sb.workdir) == []  # on the host, the jail's mount point stays empty
    assert shutil.disk_usage(sb.workdir).free > host_free - 8 * MiB
    written = sum(p.stat().st_size for p in Path(sb.host_workdir).glob("fill-*"))
    assert 8 * MiB < written <= 16 * MiB + MiB
    many = sb.run_python("import os\nfor i in range(10**6):\n    open(f'empty-{i}', 'w').close()")
    assert is_os_error(many) and "No space left" in many.error.evalue, many.render()  # inodes are bounded too
    sb.run_python("import os, glob\nfor p in glob.glob('fill-*') + glob.glob('empty-*'):\n    os.remove(p)")
    assert_contained_and_usable(sb, victim_data)


def test_files_outlive_a_crashed_worker_on_the_private_disk(open_sandbox, victim_data):
    sb = open_sandbox("session")
    assert sb.run_python("open('kept.txt', 'w').write('still here')").ok
    assert sb.run_python("import os\nos._exit(3)").crashed
    after = sb.run_python("print(open('kept.txt').read())")
    assert after.state_lost and after.stdout == "still here\n", after.render()
    assert_contained_and_usable(sb, victim_data)


DATA_ATTACKS = [
    pytest.param("open(DATA, 'w').write('hacked')", id="open-for-write"),
    pytest.param("open(DATA, 'a').write('hacked')", id="open-for-append"),
    pytest.param("import os\nos.open(DATA, os.O_WRONLY | os.O_TRUNC)", id="os.open-truncate"),
    pytest.param("import os\nos.truncate(DATA, 0)", id="os.truncate"),
    pytest.param("import os\nos.remove(DATA)", id="remove"),
    pytest.param("import os\nos.rename(DATA, 'moved.csv')", id="rename"),
    pytest.param("import os\nopen('evil.csv', 'w').write('x')\nos.replace('evil.csv', DATA)", id="replace-over"),
    pytest.param("import os\nos.chmod(DATA, 0o666)\nopen(DATA, 'w').write('hacked')", id="chmod-then-write"),
    pytest.param("import shutil\nshutil.move(DATA, 'moved.csv')", id="shutil.move"),
    pytest.param("import os\nos.link(DATA, 'hard.csv')\nopen('hard.csv', 'w').write('x')", id="hard-link"),
    pytest.param("import os, shutil\nshutil.rmtree(os.getcwd())", id="rmtree-work-folder"),
    pytest.param(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nif libc.umount2(DATA.encode(), 2) != 0:\n"
        "    raise OSError(ctypes.get_errno(), 'umount2 refused')\nopen(DATA, 'w').write('hacked')",
        id="unmount-then-write",
    ),
]


@BOTH_MODES
@pytest.mark.parametrize("code", DATA_ATTACKS)
def test_data_file_cannot_be_changed_or_removed(open_sandbox, victim_data, mode, code):
    sb = open_sandbox(mode)
    result = sb.run_python(f"DATA = {victim_data.source.name!r}\n" + code)
    assert is_os_error(result), result.render()
    assert_contained_and_usable(sb, victim_data)


OUTSIDE_TARGETS = {
    "sandbox-home": lambda sb, data: Path(sb.workdir).parent,
    "sandbox-run-root": lambda sb, data: Path(sb.workdir).parent.parent,
    "host-tmp": lambda sb, data: Path("/tmp"),
    "host-var-tmp": lambda sb, data: Path("/var/tmp"),
    "host-home": lambda sb, data: Path.home(),
    "host-etc": lambda sb, data: Path("/etc"),
    "host-dev-shm": lambda sb, data: Path("/dev/shm"),
    "next-to-the-source-file": lambda sb, data: data.source.parent,
}


@BOTH_MODES
@pytest.mark.parametrize("where", OUTSIDE_TARGETS)
def test_writes_outside_the_work_folder_never_reach_the_host(open_sandbox, victim_data, mode, where):
    sb = open_sandbox(mode)
    target = OUTSIDE_TARGETS[where](sb, victim_data) / token("escaped")
    try:
        result = sb.run_python(
            cell(
                """
                import os
                for attempt in (lambda: os.makedirs($target + ".d"), lambda: open($target, "w").write("x")):
                    try:
                        attempt()
                        print("wrote (inside the jail)")
                    except OSError as exc:
                        print(type(exc).__name__)
                """,
                target=str(target),
            )
        )
        assert not result.timed_out and not result.crashed, result.render()
        assert not os.path.lexists(target) and not os.path.lexists(f"{target}.d")
        assert_contained_and_usable(sb, victim_data)
    finally:
        Path(target).unlink(missing_ok=True)
        if os.path.isdir(f"{target}.d"):
            os.rmdir(f"{target}.d")


# ---------------------------------------------------------------- 14-16. secrets on the host


@BOTH_MODES
def test_symlink_out_of_the_work_folder_reads_nothing(open_sandbox, victim_data, home_secret, mode):
    secret, text = home_secret
    sb = open_sandbox(mode)
    result = sb.run_python(
        cell(
            """
            import os, shutil
            os.symlink($secret, "link")
            os.symlink(os.path.dirname($secret), "home-link")
            attempts = {
                "via link": lambda: open("link").read(),
                "via folder link": lambda: open(os.path.join("home-link", os.path.basename($secret))).read(),
                "list folder link": lambda: os.listdir("home-link"),
                "absolute path": lambda: open($secret).read(),
                "hard link": lambda: os.link($secret, "hard") or open("hard").read(),
                "copy": lambda: shutil.copy($secret, "copied") and open("copied").read(),
            }
            for name, attempt in attempts.items():
                try:
                    print(name, attempt())
                except OSError as exc:
                    print(name, type(exc).__name__)
            """,
            secret=str(secret),
        )
    )
    assert text not in result.render()
    assert secret.name not in result.render()  # no listing showed it
    for path in Path(sb.host_workdir).rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert text not in path.read_text(errors="replace"), f"{path.name} holds the secret"
    assert_contained_and_usable(sb, victim_data)
    sb.close()  # removing the work folder must not follow the links into the host's home
    assert secret.read_text() == text


@BOTH_MODES
def test_host_home_folder_is_invisible(open_sandbox, victim_data, home_secret, mode):
    secret, text = home_secret
    sb = open_sandbox(mode)
    result = sb.run_python(
        cell(
            """
            import os
            print("HOME", os.path.expanduser("~"))
            for folder in (os.path.expanduser("~"), $host_home, "/home", "/root"):
                try:
                    print(folder, sorted(os.listdir(folder)))
                except OSError as exc:
                    print(folder, type(exc).__name__)
            try:
                print(open($secret).read())
            except OSError as exc:
                print("read", type(exc).__name__)
            """,
            host_home=str(Path.home()),
            secret=str(secret),
        )
    )
    assert result.ok, result.render()
    assert f"HOME {sb.workdir}\n" in result.stdout
    assert secret.name not in result.render()
    assert text not in result.render()
    assert_contained_and_usable(sb, victim_data)


def test_host_accounts_are_not_listed(open_sandbox, victim_data):
    sb = open_sandbox("session")
    if sb.isolation.startswith("DEGRADED"):
        pytest.skip("without namespaces the jail has no private /etc")
    result = sb.run_python(
        "import pwd\nprint(sorted(p.pw_name for p in pwd.getpwall()))\nprint(open('/etc/group').read())"
    )
    assert result.ok, result.render()
    assert "['nobody', 'root']" in result.stdout and "nogroup" in result.stdout
    host_only = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()} - {"root", "nobody"}
    assert not any(f"'{name}'" in result.stdout for name in host_only)
    assert_contained_and_usable(sb, victim_data)


def test_host_environment_secrets_do_not_leak(open_sandbox, victim_data, monkeypatch):
    secret = token("SECRET-ENV")
    monkeypatch.setenv("DATALYST_ADVERSARIAL_SECRET", secret)
    # A host process whose *initial* environment holds the secret, so /proc/<pid>/environ shows it.
    # It says "ready" once it runs, so its environment is in place before we look at it.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
        env={"DATALYST_ADVERSARIAL_SECRET": secret},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    fresh_server = ForkServer()  # started now, while the secret is in this process's environment
    try:
        assert holder.stdout.readline() == "ready\n"
        assert secret in Path(f"/proc/{holder.pid}/environ").read_text()  # the host can see it
        sb = open_sandbox("session", forkserver=fresh_server)
        result = sb.run_python(
            cell(
                """
                import os
                print(dict(os.environ))
                for pid in [$test_pid, $holder_pid, "self", *filter(str.isdigit, os.listdir("/proc"))]:
                    try:
                        with open(f"/proc/{pid}/environ", "rb") as f:
                            print(pid, f.read())
                    except OSError as exc:
                        print(pid, type(exc).__name__)
                """,
                test_pid=os.getpid(),
                holder_pid=holder.pid,
            )
        )
        assert result.ok, result.render()
        assert secret not in result.render()
        assert "DATALYST_ADVERSARIAL_SECRET" not in result.render()
        assert_contained_and_usable(sb, victim_data)
        sb.close()
    finally:
        holder.kill()
        holder.communicate()
        fresh_server.close()


# ---------------------------------------------------------------- 17-18. network and processes


@BOTH_MODES
def test_host_loopback_tcp_server_is_unreachable(open_sandbox, victim_data, mode):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        sb = open_sandbox(mode)
        result = sb.run_python(
            cell(
                """
                import socket
                with socket.create_connection(("127.0.0.1", $port), timeout=2) as conn:
                    conn.sendall(b"hello from the sandbox")
                """,
                port=port,
            )
        )
        assert is_os_error(result), result.render()
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing is waiting to be accepted
            server.accept()
    assert_contained_and_usable(sb, victim_data)


def test_host_abstract_unix_socket_and_udp_are_unreachable(open_sandbox, victim_data):
    name = "\0" + token("datalyst-adversarial")
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix_server,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp_server,
    ):
        unix_server.bind(name)
        unix_server.listen()
        udp_server.bind(("127.0.0.1", 0))
        sb = open_sandbox("session")
        result = sb.run_python(
            cell(
                """
                import socket
                targets = {
                    "unix": (socket.AF_UNIX, socket.SOCK_STREAM, $name),
                    "udp": (socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", $port)),
                }
                for label, (family, kind, address) in targets.items():
                    with socket.socket(family, kind) as s:
                        try:
                            s.connect(address)
                            s.send(b"hello from the sandbox")
                            print(label, "sent")
                        except OSError as exc:
                            print(label, type(exc).__name__)
                """,
                name=name,
                port=udp_server.getsockname()[1],
            )
        )
        assert result.ok, result.render()
        assert "unix sent" not in result.stdout  # abstract sockets belong to the host's network namespace
        unix_server.setblocking(False)
        udp_server.setblocking(False)
        with pytest.raises(BlockingIOError):
            unix_server.accept()
        with pytest.raises(BlockingIOError):
            udp_server.recv(100)
    assert_contained_and_usable(sb, victim_data)


@BOTH_MODES
def test_host_processes_are_invisible(open_sandbox, victim_data, mode):
    sb = open_sandbox(mode)
    (server,) = forkserver_pids()
    result = sb.run_python(
        cell(
            """
            import os
            print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
            print(os.path.exists(f"/proc/{$test_pid}"), os.path.exists(f"/proc/{$server_pid}"))
            """,
            test_pid=os.getpid(),
            server_pid=server,
        )
    )
    assert result.ok, result.render()
    listing, visible = result.stdout.splitlines()
    pids = [int(p) for p in listing.strip("[]").split(",")]
    assert pids == [1], "only the worker itself should be visible"
    if os.getpid() != 1 and server != 1:
        assert visible == "False False"
    assert_contained_and_usable(sb, victim_data)


# ---------------------------------------------------------------- ending the sandbox


@BOTH_MODES
def test_close_removes_the_work_folder_and_every_jailed_process(open_sandbox, victim_data, mode):
    sb = open_sandbox(mode)
    result = sb.run_python(
        "import subprocess\nsleeper = subprocess.Popen(['/bin/sleep', '600'])\nopen('notes.txt', 'w').write('x')"
    )
    assert result.ok, result.render()
    assert_contained_and_usable(sb, victim_data)
    if mode == "session":
        assert jailed_descendants(), "a live session should have a jailed worker"
    home = Path(sb.workdir).parent
    close_and_wait(sb)
    assert not Path(sb.workdir).exists() and not home.exists()
    assert jailed_descendants() == set()
    sb.close()  # a second close is harmless


def test_close_removes_the_work_folder_while_jailed_processes_keep_writing(open_sandbox, victim_data):
    leftovers = []
    try:
        for _ in range(2):
            sb = open_sandbox("session", cpu_s=60)  # four writers spinning: CPU is not what this is about
            result = sb.run_python(
                cell("""
                import os
                for writer in range(4):
                    if os.fork() == 0:
                        n = 0
                        while True:
                            n += 1
                            try:
                                open(f"litter-{writer}-{n}", "w").close()
                            except OSError:
                                pass
                ballast = b"x" * (400 * 2**20)  # a big worker takes longer to die, so the writers outlive it
                print("writers started")
                """)
            )
            assert result.ok, result.render()
            home = Path(sb.workdir).parent
            close_and_wait(sb)
            if home.exists():
                leftovers.append(home)
        assert leftovers == [], f"work folders left on the host after close(): {leftovers}"
    finally:
        for home in leftovers:
            shutil.rmtree(home, ignore_errors=True)


@BOTH_MODES
def test_cell_keeps_the_exit_status_of_its_own_children(open_sandbox, victim_data, mode):
    sb = open_sandbox(mode)
    result = sb.run_python(
        cell("""
        import os, signal
        print(signal.getsignal(signal.SIGCHLD) in (signal.SIG_DFL, None))
        child = os.fork()
        if child == 0:
            os._exit(7)
        os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)  # it has exited; it is not reaped yet
        total = sum(range(1000))  # a few bytecodes, so pending signal handlers run
        print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
        """)
    )
    assert result.ok and result.stdout == "True\n7\n", result.render()
    assert_contained_and_usable(sb, victim_data)


@BOTH_MODES
def test_source_data_file_is_never_touched(open_sandbox, victim_data, mode):
    before = victim_data.stat
    sb = open_sandbox(mode)
    (staged,) = sb.data_files
    assert os.stat(staged).st_ino != before.st_ino, "the staged file must be a copy, not a link"
    result = sb.run_python(
        cell(
            """
            import os
            for attempt in (lambda: open($source, "a").write("hacked"), lambda: os.chmod($source, 0o777),
                            lambda: os.utime($source, (0, 0)), lambda: os.remove($source)):
                try:
                    attempt()
                    print("done")
                except OSError as exc:
                    print(type(exc).__name__)
            """,
            source=str(victim_data.source),
        )
    )
    assert result.ok and "done" not in result.stdout, result.render()
    assert_contained_and_usable(sb, victim_data)
    sb.close()
    after = os.stat(victim_data.source)
    for field in ("st_ino", "st_mode", "st_uid", "st_gid", "st_size", "st_mtime_ns", "st_nlink"):
        assert getattr(after, field) == getattr(before, field), field
    assert sha256(victim_data.source) == victim_data.digest


# ---------------------------------------------------------------- 20. forged and malformed replies

# The worker's socket and the current request (with its ID) are locals of ``serve``, a few frames up
# the cell's own stack: a cell can answer for the worker, with anything.
FORGE = """
import json, struct, sys, time
frame = sys._getframe()
while frame.f_code.co_name != "serve":
    frame = frame.f_back
sock, request_id = frame.f_locals["sock"], frame.f_locals["request"]["id"]

def send(payload):
    sock.sendall(struct.pack(">I", len(payload)) + payload)

def forge(**reply):
    send(json.dumps({"id": request_id, **reply}).encode())
"""
MALFORMED_REPLIES = [
    pytest.param('forge(error={"ename": 1, "evalue": []})', id="wrong-types-in-error"),
    pytest.param('forge(error={"ename": "MemoryError"})', id="error-without-message"),
    pytest.param('forge(error="boom")', id="error-not-an-object"),
    pytest.param('forge(files="abc")', id="files-a-string"),
    pytest.param("forge(files=[1, None, {}])", id="files-not-strings"),
    pytest.param('forge(files=["/etc/passwd", "../../x.png"])', id="files-outside"),
    pytest.param('forge(error=None, files=[], stdout="forged")', id="unknown-field"),
    pytest.param('forge(op="replayed", errors={"KeyError": 1})', id="replay-notice-wrong-type"),
    pytest.param("forge(files=[[[[[[[[[[[[[[[[[[[[['deep']]]]]]]]]]]]]]]]]]]]])", id="nested"),
    pytest.param(
        'send(b\'{"id": "\' + request_id.encode() + b\'", "files": \' + b"[" * 200_000 + b"]" * 200_000 + b"}")',
        id="deeply-nested",
    ),
    pytest.param('forge(error={"ename": "E", "evalue": "x" * (40 << 20)})', id="huge"),
    pytest.param('send(b"{" * 100)', id="not-json"),
    pytest.param("send(json.dumps([request_id]).encode())", id="not-an-object"),
]


@BOTH_MODES
@pytest.mark.parametrize("forgery", MALFORMED_REPLIES)
def test_a_malformed_reply_is_a_crashed_cell(open_sandbox, victim_data, mode, forgery):
    sb = open_sandbox(mode)
    assert sb.run_python("x = 1").ok
    result = sb.run_python(FORGE + forgery + "\ntime.sleep(5)\nprint('the forgery was not noticed')")
    assert result.crashed and result.error is not None and result.error.ename == "WorkerCrashed", result.render()
    assert "the worker sent a malformed reply" in result.error.evalue, result.render()
    assert "\n" not in result.error.evalue and len(result.error.evalue) < 1000
    assert "not noticed" not in result.stdout
    assert result.files_created == []
    assert_contained_and_usable(sb, victim_data)
    assert sb.run_python("print(x)").error.ename == "NameError"  # a fresh worker, as after a crash


def test_a_well_formed_forged_reply_changes_nothing_outside_the_sandbox(open_sandbox, victim_data):
    """A cell can claim any result for itself (it is model code either way); the host still takes nothing
    from the claim but a plain result, and the next cell gets the worker as usual."""
    sb = open_sandbox("session")
    result = sb.run_python(
        FORGE + 'forge(error={"ename": "Fake", "evalue": "claimed"}, files=["a.png"])\ntime.sleep(1)'
    )
    assert not result.crashed and result.error is not None and result.error.ename == "Fake", result.render()
    assert result.files_created == ["a.png"]
    assert_contained_and_usable(sb, victim_data)


def test_a_symlinked_figure_folder_does_not_let_the_host_read_its_files(open_sandbox, victim_data, tmp_path):
    """(Session mode only: replay mode would run the forging cell again before the next one, and its forged
    reply would stand for that cell's too; that harms only the trajectory that forged it.)"""
    from datalyst.agent._figures import collect_figures

    host_png = tmp_path / "host-only" / "private.png"
    host_png.parent.mkdir()
    host_png.write_bytes(b"\x89PNG\r\n\x1a\n" + token("HOST-PICTURE").encode())
    sb = open_sandbox("session")
    result = sb.run_python(
        FORGE
        + cell(
            """
            import os
            os.symlink("/", "figs")
            os.makedirs("plots")
            os.symlink($folder, "plots/host")
            forge(error=None, files=["figs" + $png, "plots/host/private.png"])
            time.sleep(1)
            """,
            folder=str(host_png.parent),
            png=str(host_png),
        )
    )
    assert result.files_created == [f"figs{host_png}", "plots/host/private.png"], result.render()
    assert collect_figures(sb.host_workdir, result) == {}
    assert_contained_and_usable(sb, victim_data)


@pytest.fixture
def victim_database(tmp_path: Path) -> DataFile:
    source = tmp_path / "shop.sqlite"
    with sqlite3.connect(source) as connection:
        connection.execute("CREATE TABLE sale (id INTEGER, note TEXT)")
        connection.executemany("INSERT INTO sale VALUES (?, ?)", [(i, token("row")) for i in range(50)])
    connection.close()
    return DataFile(source, sha256(source), os.stat(source))


# A thread the first cell leaves behind watches the worker's main thread; when an SQL request arrives,
# it answers for the worker while the query runs.
SQL_FORGER = """
import json, struct, sys, threading, time

def forge_sql_reply():
    main = threading.main_thread().ident
    while True:
        frame = sys._current_frames().get(main)
        while frame is not None and frame.f_code.co_name != "serve":
            frame = frame.f_back
        request = frame.f_locals.get("request") if frame is not None else None
        if isinstance(request, dict) and request.get("op") == "sql":
            reply = {"id": request["id"], "columns": "abc", "n_rows": "many", "preview": 3, "output_path": None}
            payload = json.dumps(reply).encode()
            frame.f_locals["sock"].sendall(struct.pack(">I", len(payload)) + payload)
            return
        time.sleep(0.001)

threading.Thread(target=forge_sql_reply, daemon=True).start()
"""
SLOW_QUERY = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000000) SELECT MAX(x) FROM n"


def test_a_malformed_reply_to_a_query_is_an_error_result(victim_database):
    with Sandbox(files=[victim_database.source], limits=LIMITS, screen_code=False, require_isolation=True) as sb:
        assert sb.run_python(SQL_FORGER).ok
        result = sb.run_sql(SLOW_QUERY)
        assert result.error is not None and result.error.ename == "SandboxError", result.render()
        assert "the worker sent a malformed reply" in result.error.evalue
        assert sb.run_sql("SELECT COUNT(*) FROM sale").n_rows == 1
        assert_contained_and_usable(sb, victim_database)


def test_a_worker_that_exits_with_a_request_unread_is_a_crash(open_sandbox, victim_data):
    """A forged reply ends the request early; the worker then dies with the next request unread in its socket,
    which the kernel reports to the host as a reset connection."""
    sb = open_sandbox("session")
    result = sb.run_python(FORGE + "forge(error=None, files=[])\ntime.sleep(2)\nimport os\nos._exit(3)")
    assert not result.crashed, result.render()
    after = sb.run_python("print('never runs in that worker')")
    assert after.crashed and after.error is not None and after.error.ename == "WorkerCrashed", after.render()
    assert_contained_and_usable(sb, victim_data)


@BOTH_MODES
def test_names_that_are_not_utf8_cannot_break_what_the_caller_writes(open_sandbox, victim_data, mode):
    sb = open_sandbox(mode)
    code = "import os\nopen(b'\\xff-made.txt', 'w').close()\nraise ValueError(os.fsdecode(b'bad \\xfe name'))"
    result = sb.run_python(code)
    assert result.error is not None and result.error.ename == "ValueError", result.render()
    assert result.files_created == ["\ufffd-made.txt"]
    assert result.error.evalue == "bad \ufffd name" and "bad \ufffd name" in result.error.traceback
    ExecResult.model_validate_json(result.model_dump_json())  # trajectories are written as UTF-8 JSON
    assert_contained_and_usable(sb, victim_data)
