"""A worker's interpreter state as bytes, and back, for a fork that does not replay (runs in the worker).

``take`` pickles with cloudpickle, into a memory file the host passed, the cell namespace (functions
and classes defined in cells go by value, modules by reference) and what else cells change that a
fresh worker would not have: the global random states, the current folder, the environment,
``sys.path``, pandas options, matplotlib's ``rcParams``, numpy's print and error settings, warning
filters and the cells' source lines for tracebacks. ``restore`` loads them, from a copy the host
made, in a fresh worker before any other cell.

Both run beside model code, so nothing here is trusted by the host, which only copies the bytes. They
refuse, and the host replays instead, whenever the bytes could not give the same state as a replay:
a value that cannot be pickled (an open file, a generator, a lock), a thread or process a cell left
running, files in the private ``/tmp`` or ``/dev/shm``, a value that holds the work folder's path (each
sandbox has its own), a state over the size limit. Loading untrusted bytes runs whatever they say, but
only in the new jail, as a cell there would.
"""

from __future__ import annotations

import builtins
import io
import linecache
import marshal
import os
import pickle
import random
import sys
import threading
import types
import warnings
from collections import ChainMap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import cloudpickle
import matplotlib
import numpy as np
from pandas import set_option
from pandas._config.config import _global_config as pandas_options

_BUFFERED = {kind.__name__: kind for kind in (io.BufferedReader, io.BufferedWriter, io.BufferedRandom)}
_FILE_TYPES = (io.TextIOWrapper, io.FileIO, *_BUFFERED.values())
"""Files from ``open()``. One that a ``with`` block closed stays bound to its name: it goes as a closed file. An open
one is refused (cloudpickle would send a file read for reading as its text, which is no longer a file)."""


@dataclass(frozen=True)
class Start:
    """What a worker had before its first cell."""

    helpers: dict[str, Any]
    """The worker's own functions in the namespace (``execute_sql``...): a fork has its own."""
    environ: dict[str, str]
    workdir: str
    private_tmp: bool
    """``/tmp`` and ``/dev/shm`` are the jail's own (not the host's, as without namespaces)."""
    binds: tuple[str, ...] = ()
    """Host folders bound into the jail (the Python installation, a checkout): under ``/tmp`` they are not cells'."""


class Refused(Exception):
    """Why this state cannot be carried as bytes (the host replays instead)."""


class _Full(Exception):
    """The pickled state passed the size limit."""


class _Sink(io.BytesIO):
    """A buffer that stops the pickler once it holds more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, data: Any) -> int:
        if self.tell() + memoryview(data).nbytes > self.limit:
            raise _Full
        return super().write(data)


def _code_reduce(code: types.CodeType) -> tuple[Any, tuple[bytes]]:
    return marshal.loads, (marshal.dumps(code),)


class _Pickler(cloudpickle.Pickler):
    """Functions defined in cells keep ``namespace`` as their globals; the worker's own helpers and closed
    files go by a name (see ``_Unpickler``)."""

    # Code goes whole, by marshal (the fork runs the same interpreter): cloudpickle from 3.1.3 names every
    # code object's file "<dynamic-code>", and a fork's tracebacks would lose the lines of earlier cells.
    dispatch_table: ClassVar[ChainMap[type, Any]] = ChainMap(
        {types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table
    )

    def __init__(self, sink: io.BytesIO, namespace: dict[str, Any] | None, helpers: dict[str, Any]) -> None:
        super().__init__(sink, protocol=pickle.HIGHEST_PROTOCOL)
        if namespace is not None:
            # cloudpickle gives the functions it rebuilds the globals dict registered for the one they had; registered
            # as the namespace itself, which is pickled too, they share it with the fork's cells (checked on loading).
            self.globals_ref[id(namespace)] = namespace
        self.helpers = {id(value): name for name, value in helpers.items()}

    def persistent_id(self, obj: Any) -> Any:
        if id(obj) in self.helpers:
            return ("helper", self.helpers[id(obj)])
        if type(obj) in _FILE_TYPES:
            if not obj.closed:
                raise pickle.PicklingError(f"an open file ({obj.name!r:.100}) cannot be carried")
            return (
                "closed file",
                type(obj).__name__,
                obj.name,
                getattr(obj, "mode", None),
                getattr(obj, "encoding", None),
            )
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, helpers: dict[str, Any]) -> None:
        super().__init__(io.BytesIO(data))
        self.helpers = helpers

    def persistent_load(self, pid: Any) -> Any:
        if pid[0] == "helper":
            return self.helpers[pid[1]]
        if pid[0] == "closed file":
            return _closed_file(*pid[1:])
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r:.100}")


def _closed_file(kind: str, name: Any, mode: Any, encoding: Any) -> io.IOBase:
    """A closed file like the one the source's ``with open(...)`` left: its type, name, mode and encoding."""
    raw = io.FileIO(os.devnull, "r+")
    if kind == "TextIOWrapper":
        file: io.IOBase = io.TextIOWrapper(io.BufferedRandom(raw), encoding=encoding)
        if mode is not None:
            file.mode = mode  # type: ignore[attr-defined]
    else:
        file = raw if kind == "FileIO" else _BUFFERED[kind](raw)
    file.close()
    raw.name = name  # type: ignore[misc]
    return file


def take(namespace: dict[str, Any], start: Start, fd: int, limit: int) -> None:
    """Write the state to the file ``fd`` if it takes at most ``limit`` bytes; Refused says why it cannot be."""
    workdir = start.workdir
    _check_no_activity(start)
    state = {
        "names": namespace,
        "lines": {name: entry for name, entry in linecache.cache.items() if name.startswith("<cell-")},
        "cwd": os.path.relpath(os.getcwd(), workdir),
        "environ": {key: value for key, value in os.environ.items() if start.environ.get(key) != value},
        "unset": [key for key in start.environ if key not in os.environ],
        "path": list(sys.path),
        "random": random.getstate(),
        "numpy_random": np.random.get_state(),
        "pandas": dict(_flat(pandas_options)),
        "rc": dict(matplotlib.rcParams.copy().items()),  # the copy's values, read without resolving the backend
        "printoptions": np.get_printoptions(),
        "seterr": np.geterr(),
        "warnings": list(warnings.filters),
    }
    data = _dump(state, namespace, start.helpers, limit)
    own = os.path.basename(os.path.dirname(workdir))  # the sandbox's folder, named uniquely (sandbox-XXXXXXXX)
    if any(own.encode(codec) in data for codec in ("utf-8", "utf-32-le")):  # str, and numpy's str arrays
        raise Refused(f"a value holds this sandbox's folder ({own}), which has another name in a fork")
    with open(fd, "wb", closefd=False) as file:
        file.write(data)


def _check_no_activity(start: Start) -> None:
    """Refused when a thread, a process or a file outside the work folder that cells made would be lost."""
    if threading.active_count() > 1:
        raise Refused("a thread a cell started is still running")
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            if f.read().strip():
                raise Refused("a process a cell started is still running (or was never waited for)")
    if start.private_tmp:
        for folder in ("/tmp", "/dev/shm"):
            if found := _left_in(folder, (start.workdir, *start.binds)):
                raise Refused(f"{found} is in the private {folder}, which a fork does not copy")


def _left_in(folder: str, kept: tuple[str, ...]) -> str | None:
    """A file or folder under ``folder`` other than the ``kept`` ones (work folder, binds) and the folders that
    lead to them."""
    for path, dirs, files in os.walk(folder):
        if files:
            return os.path.join(path, files[0])
        for name in list(dirs):
            full = os.path.join(path, name)
            if full in kept:
                dirs.remove(name)
            elif not any(place.startswith(full + "/") for place in kept):
                return full
    return None


def _dump(state: dict[str, Any], namespace: dict[str, Any], helpers: dict[str, Any], limit: int) -> bytes:
    sink = _Sink(limit)
    try:
        _Pickler(sink, namespace, helpers).dump(state)
    except _Full:
        raise Refused(f"the state is larger than the limit of {limit / 2**20:.1f} MiB") from None
    except Exception as exc:
        raise Refused(_unpicklable(namespace, helpers, limit) or f"it cannot be pickled ({_describe(exc)})") from None
    return sink.getvalue()


def _unpicklable(namespace: dict[str, Any], helpers: dict[str, Any], limit: int) -> str:
    """Which variable cannot be pickled, and why ("" if each one can on its own)."""
    for name, value in namespace.items():
        try:
            _Pickler(_Sink(limit), None, helpers).dump(value)  # a function alone: only the globals it reads
        except _Full:
            continue
        except Exception as exc:
            return f"the variable {name!r} cannot be pickled ({_describe(exc)})"
    return ""


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def restore(fd: int, start: Start) -> dict[str, Any]:
    """Load the state that ``take`` wrote in another worker (the file ``fd`` holds a copy); return the namespace
    cells run in from now on. Raises whatever loading raised: the host then drops this worker and replays.
    """
    with open(fd, "rb", closefd=False) as file:
        file.seek(0)
        state = _Unpickler(file.read(), start.helpers).load()
    names = state["names"]
    for value in names.values():
        if isinstance(value, types.FunctionType) and value.__module__ == "__main__" and value.__globals__ is not names:
            raise Refused(f"the function {value.__name__!r} would not see the namespace it was defined in")
    if names.get("__builtins__") is vars(builtins):  # set by cloudpickle's rebuilt functions; cells had the module
        names["__builtins__"] = builtins
    linecache.cache.update(state["lines"])
    os.chdir(os.path.normpath(os.path.join(start.workdir, state["cwd"])))
    os.environ.update(state["environ"])
    for key in state["unset"]:
        os.environ.pop(key, None)
    sys.path[:] = state["path"]
    random.setstate(state["random"])
    np.random.set_state(state["numpy_random"])
    np.set_printoptions(**state["printoptions"])
    np.seterr(**state["seterr"])
    with warnings.catch_warnings():  # setting a deprecated option warns, as it did once in the source
        warnings.simplefilter("ignore")
        current = dict(_flat(pandas_options))
        for key, value in state["pandas"].items():
            if not _same(current.get(key), value):
                set_option(key, value)
        rc = matplotlib.rcParams
        rc.update({key: value for key, value in state["rc"].items() if not _same(rc[key], value)})
    warnings.resetwarnings()  # tells the warnings machinery that the filters change (what it remembers goes)
    warnings.filters[:] = state["warnings"]  # as they were, entries that match a message exactly (a str) included
    return names


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # an array, or a comparison that raises: set it again
        return False


def _flat(options: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """pandas' nested option dict as ``("display.max_rows", value)`` pairs."""
    for key, value in options.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
