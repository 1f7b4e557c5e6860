"""The loop that runs inside the sandbox: executes cells and SQL queries sent by the host.

Everything here shares a process with model code, so nothing here is trusted by the host:
results are informative, and every limit is enforced from outside (kernel, watchdog).
"""

from __future__ import annotations

import ast
import builtins
import csv
import importlib
import io
import linecache
import os
import resource
import signal
import socket
import sqlite3
import sys
import sysconfig
import time
import traceback
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from datalyst.data import read_here
from datalyst.sandbox import _snapshot as snapshot
from datalyst.sandbox._isolation import JailSpec
from datalyst.sandbox._replies import MAX_REPORTED_FILES
from datalyst.sandbox._result import SqlResult
from datalyst.sandbox._sqlrules import output_path_problem, pick_database
from datalyst.sandbox._wire import WireError, recv_frame_with_fds, send_frame
from datalyst.text import clip_middle

MAX_SCANNED_FILES = 5_000
MAX_TRACEBACK_FRAMES = 60
MAX_EVALUE_CHARS = 2_000
MAX_NAME_CHARS = 200
"""Exception and module names are clipped to this (what the host accepts is larger: see ``_replies``)."""
SQL_PREVIEW_ROWS = 10
_LABELS = {"purelib": "<site-packages>", "platlib": "<site-packages>", "stdlib": "<python>", "platstdlib": "<python>"}
_INSTALLED = sorted({(sysconfig.get_path(key), label) for key, label in _LABELS.items()}, key=lambda p: -len(p[0]))
"""Where Python and its libraries are installed on the host, and what tracebacks call them (longest first)."""


class CpuTimeExceeded(BaseException):
    """Raised in a cell that used up its CPU seconds (a BaseException, so `except Exception` can't eat it)."""


def _on_sigxcpu(signum: int, frame: Any) -> None:
    raise CpuTimeExceeded("the cell used up its CPU time limit")


def _set_cpu_budget(seconds: float | None) -> None:
    """Let the current phase use ``seconds`` more CPU (None: up to the session's hard limit)."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if seconds is None:
        soft = hard
    else:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime + seconds + 0.999)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _scan(root: str = ".") -> dict[str, tuple[int, int]]:
    """Size and mtime of regular files under the work folder (symlinks are not followed), at most
    ``MAX_SCANNED_FILES`` entries read, so a folder a cell fills with files cannot stall the reply."""
    found: dict[str, tuple[int, int]] = {}
    stack, seen = [root], 0
    while stack and seen < MAX_SCANNED_FILES:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > MAX_SCANNED_FILES:
                    break
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:  # a path longer than the kernel takes (so every path found fits in a reply)
                        continue
                    found[os.path.relpath(entry.path, root)] = (st.st_size, st.st_mtime_ns)
    return found


def _hide_installation(text: str) -> str:
    for path, label in _INSTALLED:
        text = text.replace(f'File "{path}/', f'File "{label}/')
    return text


def _frames_text(exc: BaseException, tb: Any) -> str:
    frames = [(frame, line) for frame, line in traceback.walk_tb(tb) if frame.f_code.co_filename != __file__]
    if len(frames) <= MAX_TRACEBACK_FRAMES:
        report = traceback.TracebackException(type(exc), exc, tb)  # keeps chained exceptions
        report.stack = traceback.StackSummary.from_list([f for f in report.stack if f.filename != __file__])
        return "".join(report.format())
    half = MAX_TRACEBACK_FRAMES // 2
    omitted = f"  ... {len(frames) - 2 * half} more frames ...\n"
    return "".join(
        [
            "Traceback (most recent call last):\n",
            *traceback.StackSummary.extract(iter(frames[:half])).format(),
            omitted,
            *traceback.StackSummary.extract(iter(frames[-half:])).format(),
            *traceback.format_exception_only(type(exc), exc),
        ]
    )


class Kernel:
    """Interpreter state of one trajectory plus the code to run a cell the way a notebook does."""

    def __init__(self, max_output_chars: int, cpu_s: float) -> None:
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        self.max_output_chars = max_output_chars
        self.cpu_s = cpu_s

    def run(self, code: str, name: str, *, quiet: bool = False) -> dict[str, Any]:
        """Run one cell; with ``quiet`` (a replay) its output is discarded, but its figures are saved all the
        same, so the work folder ends up as it did the first time."""
        before = {} if quiet else _scan()
        importlib.invalidate_caches()  # a package may have been installed since the last cell
        saved_fds = None
        if quiet:
            sys.stdout.flush()
            sys.stderr.flush()
            saved_fds = (os.dup(1), os.dup(2))
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.close(devnull)
        try:
            error = self._execute(code, name)
            figures = self._collect_figures(name)
        finally:
            _set_cpu_budget(None)
            if saved_fds is not None:
                os.dup2(saved_fds[0], 1)
                os.dup2(saved_fds[1], 2)
                os.close(saved_fds[0])
                os.close(saved_fds[1])
        result: dict[str, Any] = {"error": error}
        if not quiet:
            changed = [path for path, sig in _scan().items() if before.get(path) != sig]
            result["files"] = sorted(set(changed) | set(figures))[:MAX_REPORTED_FILES]
        return result

    def _execute(self, code: str, name: str) -> dict[str, Any] | None:
        linecache.cache[name] = (len(code), None, code.splitlines(keepends=True), name)
        try:
            tree = ast.parse(code, filename=name)
            tail = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            body = compile(tree, name, "exec")
            last = compile(ast.Expression(tail.value), name, "eval") if tail is not None else None
        except SyntaxError as exc:  # the cell's text, not a frame of the parser that found it
            return self._error(exc.with_traceback(None), skip_frames=0)
        _set_cpu_budget(self.cpu_s)
        try:
            exec(body, self.namespace)
            if last is not None:
                value = eval(last, self.namespace)
                if value is not None:
                    print(repr(value))
        except BaseException as exc:  # the cell's own exception, including SystemExit and CpuTimeExceeded
            return self._error(exc, skip_frames=1)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return None

    def _error(self, exc: BaseException, skip_frames: int) -> dict[str, Any]:
        tb = exc.__traceback__
        for _ in range(skip_frames):
            tb = tb.tb_next if tb is not None else None
        text = _hide_installation(_frames_text(exc, tb))
        error = _error_reply(exc)
        error["traceback"] = clip_middle(text, self.max_output_chars)
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            error["missing_module"] = clip_middle(exc.name.split(".")[0], MAX_NAME_CHARS)
        return error

    def _collect_figures(self, name: str) -> list[str]:
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return []
        saved = []
        for index, number in enumerate(plt.get_fignums(), start=1):
            path = f"{name.strip('<>')}-figure-{index}.png"
            try:
                plt.figure(number).savefig(path)
                saved.append(path)
            except Exception as exc:  # a broken figure must not break the cell's result
                print(f"could not save figure {number}: {exc}", file=sys.stderr)
        plt.close("all")
        return saved


def _error_reply(exc: BaseException, evalue: str | None = None) -> dict[str, Any]:
    """An exception's name and message, clipped to what the host accepts."""
    return {
        "ename": clip_middle(type(exc).__name__, MAX_NAME_CHARS),
        "evalue": clip_middle(str(exc) if evalue is None else evalue, MAX_EVALUE_CHARS),
    }


def run_sql(request: dict[str, Any], data_files: Sequence[str] = ()) -> dict[str, Any]:
    """Run one query on a read-only SQLite file; save all rows as CSV, return a preview. An ``output_path``
    that resolves outside the work folder or onto one of ``data_files`` (real paths) is refused: the host
    checks the name too, but only here, inside the jail, are the folder's links what they will be."""
    deadline = time.monotonic() + float(request["timeout_s"])
    result: dict[str, Any] = {"columns": [], "n_rows": 0, "preview": "", "output_path": None}
    output_path = request.get("output_path")
    if output_path and (problem := output_path_problem(os.getcwd(), output_path, list(data_files))):
        return {**result, "error": {"ename": "OutputPathRefused", "evalue": clip_middle(problem, MAX_EVALUE_CHARS)}}
    try:
        conn = sqlite3.connect(f"file:{quote(request['db'])}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return {**result, "error": _error_reply(exc)}
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = conn.execute(request["sql"])
        columns = [d[0] for d in cursor.description or []]
        preview_rows: list[tuple[Any, ...]] = []
        n_rows = 0
        with open(output_path, "w", newline="") if output_path else io.StringIO() as sink:
            writer = csv.writer(sink)
            writer.writerow(columns)
            for row in cursor:
                if n_rows < SQL_PREVIEW_ROWS:
                    preview_rows.append(row)
                writer.writerow(row)
                n_rows += 1
        result.update(columns=columns, n_rows=n_rows, output_path=output_path)
        result["preview"] = _render_rows(columns, preview_rows, n_rows)
    except sqlite3.OperationalError as exc:
        timed_out = str(exc) == "interrupted"
        evalue = f"the query ran longer than {request['timeout_s']} s" if timed_out else str(exc)
        result.update(error=_error_reply(exc, evalue), timed_out=timed_out)
    except (sqlite3.Error, OSError) as exc:
        result["error"] = _error_reply(exc)
    finally:
        conn.close()
    return result


def _render_rows(columns: list[str], rows: list[tuple[Any, ...]], n_rows: int) -> str:
    lines = [" | ".join(columns)] + [" | ".join(clip_middle(str(v), 60) for v in row) for row in rows]
    if n_rows > len(rows):
        lines.append(f"... ({n_rows - len(rows)} more rows)")
    return "\n".join(lines)


def sql_helpers(spec: JailSpec) -> dict[str, Any]:
    """``get_db_info()`` and ``execute_sql()`` for cells, when SQLite files are staged (DataMind's tools)."""
    if not spec.databases:
        return {}
    data_files = [os.path.realpath(p) for p in spec.readonly_files]

    def get_db_info() -> None:
        """Print the tables, columns, keys, row counts and first rows of every staged database."""
        from datalyst.data import describe

        print("\n\n".join(describe(name).render() for name in spec.databases))

    def execute_sql(sql: str, output_path: str | None = None, db: str | None = None) -> None:
        """Run a read-only SQLite query and print a preview; with ``output_path``, save every row as CSV."""
        name, why = pick_database(spec.databases, db)
        if name is None:
            raise ValueError(why)
        if output_path is not None and (problem := output_path_problem(os.getcwd(), output_path, data_files)):
            raise ValueError(problem)
        request = {"db": name, "sql": sql, "output_path": output_path, "timeout_s": spec.limits["sql_timeout_s"]}
        result = SqlResult.model_validate(run_sql(request))
        if result.error is not None:
            raise RuntimeError(f"{result.error.ename}: {result.error.evalue}")
        print(result.render())

    return {"get_db_info": get_db_info, "execute_sql": execute_sql}


def _replay(kernel: Kernel, step: dict[str, Any]) -> str | None:
    """Run an earlier cell or query again, its output discarded; return the exception it raised, if any."""
    outcome = run_sql(step) if step["op"] == "sql" else kernel.run(step["code"], step["name"], quiet=True)
    return (outcome.get("error") or {}).get("ename")


def _transfer(kernel: Kernel, request: dict[str, Any], fds: list[int], start: snapshot.Start) -> dict[str, Any]:
    """Take (``op == "snapshot"``) or restore the interpreter state through the memory file the host sent, under
    the cell's CPU limit; a refusal, or anything the state's own code raised, comes back as ``error``."""
    _set_cpu_budget(kernel.cpu_s)
    try:
        (fd,) = fds
        if request["op"] == "snapshot":
            snapshot.take(kernel.namespace, start, fd, int(request["max_bytes"]))
        else:
            kernel.namespace = snapshot.restore(fd, start)
        return {}
    except BaseException as exc:  # CpuTimeExceeded and SystemExit too: the code of pickled objects runs here
        return {"error": _error_reply(exc)}
    finally:
        _set_cpu_budget(None)


def serve(sock: socket.socket, spec: JailSpec, *, private_tmp: bool) -> None:
    """Answer requests until the host hangs up (``private_tmp``: the jail has its own ``/tmp`` and ``/dev/shm``)."""
    signal.signal(signal.SIGXCPU, _on_sigxcpu)
    read_here()  # the jail's limits bound what a cell reads: no reader process of its own
    # unbuffered, so output written before a crash still reaches the host
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), write_through=True)
    kernel = Kernel(int(spec.limits["max_output_chars"]), spec.limits["cpu_s"])
    helpers = sql_helpers(spec)
    kernel.namespace.update(helpers)
    start = snapshot.Start(helpers, dict(os.environ), spec.workdir, private_tmp, tuple(spec.readonly_dirs))
    send_frame(sock, {"op": "ready"})
    while True:
        try:
            request, fds = recv_frame_with_fds(sock, 1)
        except (WireError, OSError):
            return
        if request["op"] == "run":
            if request.get("replay"):
                errors = [_replay(kernel, step) for step in request["replay"]]
                send_frame(sock, {"op": "replayed", "id": request.get("id"), "errors": errors})
            reply = kernel.run(request["code"], request["name"])
        elif request["op"] == "sql":
            reply = run_sql(request, [os.path.realpath(p) for p in spec.readonly_files])
        elif request["op"] in ("snapshot", "restore"):
            reply = _transfer(kernel, request, fds, start)
        else:
            reply = {"error": {"ename": "ProtocolError", "evalue": f"unknown op {request['op']!r}"}}
        for fd in fds:
            os.close(fd)
        send_frame(sock, {**reply, "id": request.get("id")})
