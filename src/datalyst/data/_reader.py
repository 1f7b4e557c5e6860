"""Reading a data file in a process that can be stopped: a reader server forks one reader per read.

    host ──socket── reader server (the readers' libraries loaded) ──fork── reader (one read, within its limits)

For each read the host hands the server one end of a fresh socket pair. The forked reader sends its PID, which
the host holds as a pidfd, then reads the file under a memory limit (``RLIMIT_DATA``) and sends back the result
or the error's one line. The host stops the reader at the wall-time limit, or when its caller is cancelled.
A process that is itself the budget (a reader, the sandbox's worker) reads in place: see :func:`read_here`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import math
import os
import pickle
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datalyst.errors import ConfigError, DataFileError, DatalystError

from ._budget import ReadLimits, over_budget, set_active
from ._common import exc_text, file_error

if TYPE_CHECKING:
    import pandas as pd

    from ._models import FileInfo

START_TIMEOUT_S = 120.0
"""How long a read waits for a new reader server to load its libraries (about a second) and fork."""
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from datalyst.data._reader import serve; serve(int(sys.argv[2]))"
_SIZE = struct.Struct("!Q")
_KEPT_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "PYTHONPATH")
_here = False
_lock = threading.Lock()
_server: tuple[subprocess.Popen[bytes], socket.socket] | None = None


def _forget_server() -> None:
    """In a forked copy of the host: the server and its lock are the parent's."""
    global _lock, _server
    _lock, _server = threading.Lock(), None


def _stop_server() -> None:
    """At exit: end the server (readers still running end at their CPU limit)."""
    if _server is not None:
        _server[1].close()
        _server[0].kill()
        _server[0].wait()


os.register_at_fork(after_in_child=_forget_server)
atexit.register(_stop_server)


def read_here() -> None:
    """Read data files in this process from now on, for a process whose own limits bound what it reads."""
    global _here
    _here = True


def start_reader() -> None:
    """Start the reader server now, so that it loads its libraries (about a second) while the caller does other
    work, not when the first file is read."""
    if not _here:
        with _lock:
            _server_socket()


def read(function: str, path: str | os.PathLike[str], *args: Any, limits: ReadLimits | None, **kwargs: Any) -> Any:
    """``function`` (describe, load or load_table) of ``path``, read within ``limits`` (the environment's)."""
    if _here:
        return _call(function, path, args, kwargs)
    return _Read(path, limits or ReadLimits.from_env()).run(function, args, kwargs)


async def aread(
    function: str, path: str | os.PathLike[str], *args: Any, limits: ReadLimits | None, **kwargs: Any
) -> Any:
    """:func:`read` for a coroutine: cancelling it stops the reader."""
    if _here:
        return _call(function, path, args, kwargs)
    reading = _Read(path, limits or ReadLimits.from_env())
    try:
        return await asyncio.to_thread(reading.run, function, args, kwargs)
    except asyncio.CancelledError:
        reading.stop()
        raise


def _call(function: str, path: str | os.PathLike[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from . import _describe, _loaders  # the readers' libraries: loaded where files are read

    functions = {"describe": _describe.describe, "load": _loaders.load, "load_table": _loaders.load_table}
    return functions[function](path, *args, **kwargs)


class _Read:
    """One read of ``path`` in a forked reader, which :meth:`stop` ends from any thread, before it starts too."""

    def __init__(self, path: str | os.PathLike[str], limits: ReadLimits) -> None:
        self.path, self.limits = path, limits
        self._pidfd: int | None = None
        self._stopped = False
        self._state = threading.Lock()

    def run(self, function: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The read's result; its error, or the limit it hit, as a DataFileError of one line."""
        channel, theirs = socket.socketpair()
        try:
            self._start(channel, theirs, (os.getcwd(), function, self.path, args, kwargs, self.limits))
            channel.settimeout(self.limits.wall_s)
            status, value = _recv(channel)
        except TimeoutError:
            self.stop()
            wall = f"reading it took longer than the {self.limits.wall_s:g} s limit"
            raise over_budget(self.path, wall, "wall_s", self.limits) from None
        except (EOFError, OSError):  # killed by the kernel, by stop(), or by a crash in a parser
            died = "the reading process died (past the memory limit, or in a parser on a malformed file)"
            raise over_budget(self.path, died, "memory_mb", self.limits) from None
        finally:
            channel.close()
            with self._state:
                if self._pidfd is not None:
                    os.close(self._pidfd)
                    self._pidfd = None
        if status == "memory":
            memory = f"reading it needed more than the {self.limits.memory_mb} MiB memory limit"
            raise over_budget(self.path, memory, "memory_mb", self.limits)
        if status == "error":
            raise DataFileError(value)
        return value

    def stop(self) -> None:
        with self._state:
            self._stopped = True
            if self._pidfd is not None:
                with contextlib.suppress(ProcessLookupError):  # it has ended
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def _start(self, channel: socket.socket, theirs: socket.socket, request: tuple[Any, ...]) -> None:
        """Have the server fork a reader on ``theirs``, hold it by a pidfd, and send it the request."""
        try:
            with _lock:
                socket.send_fds(_server_socket(), [b"r"], [theirs.fileno()])
            theirs.close()
            channel.settimeout(START_TIMEOUT_S)
            (pid,) = struct.unpack("!q", _recv_exact(channel, 8))
            with self._state:
                self._pidfd = os.pidfd_open(pid)
            if self._stopped:
                self.stop()
            _send(channel, request)
        except (OSError, EOFError) as exc:
            theirs.close()
            raise DatalystError(f"the data-file reader process did not start: {exc_text(exc)}") from exc


def _server_socket() -> socket.socket:
    """The socket of the reader server, started when there is none (hold ``_lock``)."""
    global _server
    if _server is None or _server[0].poll() is not None:
        ours, theirs = socket.socketpair()
        kept = {name: os.environ[name] for name in _KEPT_ENVIRONMENT if name in os.environ}  # no API keys
        env = kept | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # and no thread pools to fork
        command = [sys.executable, "-c", _BOOT, str(Path(__file__).parents[2]), str(theirs.fileno())]
        quiet = subprocess.DEVNULL  # what a parser prints about a hostile file is no part of the one line
        process = subprocess.Popen(
            command, pass_fds=[theirs.fileno()], env=env, stdin=quiet, stdout=quiet, stderr=quiet
        )
        theirs.close()
        _server = (process, ours)
    return _server[1]


def serve(fd: int) -> None:
    """The reader server: fork a reader for each socket the host sends, until the host goes away."""
    _warm_up()
    gc.collect()
    gc.freeze()  # a collection in a reader would otherwise write to, and so copy, every page of these objects
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the readers
    server = socket.socket(fileno=fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(server, 1, 1)
        except OSError:
            return
        if not message:
            return
        for channel_fd in fds:
            if os.fork() == 0:
                server.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                try:
                    _read_one(socket.socket(fileno=channel_fd))
                finally:
                    os._exit(0)
            os.close(channel_fd)


def _warm_up() -> None:
    """Describe and load a small file of each kind once, so that every reader starts with its libraries loaded
    and their lazy parts touched."""
    import pandas as pd

    from ._writers import SUFFIXES, write_table

    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": ["2024-01-31", "2024-02-29"]})
    with tempfile.TemporaryDirectory(prefix="datalyst-reader-") as folder:
        for kind, suffix in SUFFIXES.items():
            path = write_table(frame, Path(folder, "warm" + suffix), kind)
            pickle.dumps((_call("describe", path, (), {}), _call("load", path, (), {})))


def _read_one(channel: socket.socket) -> None:
    """In a reader: take the request, read within its limits, send back what came of it."""
    channel.sendall(struct.pack("!q", os.getpid()))
    cwd, function, path, args, kwargs, limits = _recv(channel)
    os.chdir(cwd)  # a relative path names the file it names for the caller, and the messages say it as given
    set_active(limits)
    read_here()
    with open("/proc/self/statm") as statm:
        data = int(statm.read().split()[5]) * resource.getpagesize()
    memory = data + limits.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    cpu = math.ceil(limits.wall_s) + 1  # a reader outlives its limit by a second even when the host is gone
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    try:
        reply = ("ok", _call(function, path, args, kwargs))
    except DataFileError as exc:
        reply = ("error", str(exc))
    except MemoryError:
        reply = ("memory", None)
    except Exception as exc:
        reply = ("error", str(file_error(path, f"reading it failed: {exc_text(exc)}", "the file may be malformed")))
    try:
        _send(channel, reply)
    except MemoryError:  # in pickling it, before anything was sent
        _send(channel, ("memory", None))


def _send(channel: socket.socket, value: Any) -> None:
    """Pickle ``value`` onto the socket, its large arrays as buffers of their own (pickled, they would be copied)."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    parts = [memoryview(head), *(buffer.raw() for buffer in buffers)]
    channel.sendall(struct.pack(f"!{len(parts) + 1}Q", len(parts), *(part.nbytes for part in parts)))
    for part in parts:
        channel.sendall(part)


def _recv(channel: socket.socket) -> Any:
    (count,) = _SIZE.unpack(_recv_exact(channel, _SIZE.size))
    sizes = struct.unpack(f"!{count}Q", _recv_exact(channel, _SIZE.size * count))
    head, *buffers = (_recv_exact(channel, size) for size in sizes)
    return pickle.loads(head, buffers=buffers)


def _recv_exact(channel: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        n = channel.recv_into(view[got:])
        if n == 0:
            raise EOFError("the reader closed its socket")
        got += n
    return buffer


# -- what callers use


def describe(
    path: str | os.PathLike[str], *, max_columns: int = 40, max_chars: int = 6000, limits: ReadLimits | None = None
) -> FileInfo:
    """Meta-information about a data file: tables, columns, types, statistics and sample rows.

    Bounded whatever the file's size: statistics come from at most the first 100,000 rows and `max_columns`
    columns of each table, and `FileInfo.render()` never returns more than `max_chars` characters. The file is
    read in a reader process within `limits`. Raises DataFileError when the file cannot be read within them.
    """
    _check_bounds(max_columns, max_chars)
    return read("describe", path, max_columns=max_columns, max_chars=max_chars, limits=limits)


async def adescribe(
    path: str | os.PathLike[str], *, max_columns: int = 40, max_chars: int = 6000, limits: ReadLimits | None = None
) -> FileInfo:
    """:func:`describe` for a coroutine; cancelling it stops the reader."""
    _check_bounds(max_columns, max_chars)
    return await aread("describe", path, max_columns=max_columns, max_chars=max_chars, limits=limits)


def load(path: str | os.PathLike[str], *, limits: ReadLimits | None = None) -> dict[str, pd.DataFrame]:
    """Every table of a data file, by name, read in a reader process within `limits`.

    CSV, TSV, JSON lines and Parquet give one table named after the file stem; JSON gives one (or one per list
    of records it holds); XLSX gives every sheet; SQLite gives every table and view. Raises DataFileError when
    the file cannot be read within the limits.
    """
    return read("load", path, limits=limits)


def load_table(
    path: str | os.PathLike[str], table: str | None = None, *, limits: ReadLimits | None = None
) -> pd.DataFrame:
    """One table of a data file, `table` by name or the first one, read in a reader process within `limits`.

    Raises DataFileError when the file cannot be read within the limits or has no such table (the message
    lists the available names).
    """
    return read("load_table", path, table, limits=limits)


def _check_bounds(max_columns: int, max_chars: int) -> None:
    if max_columns < 1:
        raise ConfigError(f"max_columns must be at least 1, got {max_columns}")
    if max_chars < 1:
        raise ConfigError(f"max_chars must be at least 1, got {max_chars}")
