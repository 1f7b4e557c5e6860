"""The sandbox of one trajectory: a work folder, staged data files, and a jailed Python worker."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Literal, ParamSpec, TypeVar

from datalyst.errors import ConfigError, DataFileError, IsolationUnavailable, SandboxError
from datalyst.sandbox._cgroup import describe as describe_cgroup
from datalyst.sandbox._folder import copy_folder, empty_folder
from datalyst.sandbox._forkserver import ForkServer, default_forkserver, remove_tree
from datalyst.sandbox._install import AutoInstaller
from datalyst.sandbox._isolation import JailSpec, jail_identity
from datalyst.sandbox._limits import Limits
from datalyst.sandbox._process import Exchange, WorkerProcess
from datalyst.sandbox._replies import CellReply, SqlReply
from datalyst.sandbox._result import CellError, ExecResult, SqlResult
from datalyst.sandbox._screen import screen
from datalyst.sandbox._seccomp import describe as describe_seccomp
from datalyst.sandbox._sqlrules import output_path_problem, pick_database

Mode = Literal["session", "replay"]
ForkWay = Literal["snapshot", "replay"]
log = logging.getLogger(__name__)


T = TypeVar("T")
P = ParamSpec("P")


def _uncut(step: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """``step`` run as a task of its own, which cancelling the caller does not cut short."""

    @wraps(step)
    async def uncut(*args: P.args, **kwargs: P.kwargs) -> T:
        task = asyncio.ensure_future(step(*args, **kwargs))
        task.add_done_callback(lambda done: done.cancelled() or done.exception())  # seen, should no one await it
        return await asyncio.shield(task)

    return uncut


def _blocking(step: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The sync twin of the async method ``step``: it runs ``step`` on the sync methods' own event loop."""

    def blocking(*args: P.args, **kwargs: P.kwargs) -> T:
        return _portal.run(step(*args, **kwargs))

    blocking.__doc__ = f"``{step.__name__}``, blocking."
    return blocking


class _Portal:
    """An event loop in a thread of its own, on which the sync methods run the async core."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def run(self, step: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # a forked child has the loop but not its thread
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                threading.Thread(target=self._loop.run_forever, name="datalyst-sandbox", daemon=True).start()
            loop = self._loop
        if _running_loop() is loop:  # it would wait for itself
            step.close()
            raise RuntimeError("a sandbox's sync method was called on its own event loop; await the async one")
        return asyncio.run_coroutine_threadsafe(step, loop).result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_portal = _Portal()


@dataclass(frozen=True)
class _Step:
    """An earlier cell or query, as replay mode runs it again."""

    request: dict[str, Any]
    label: str
    error: str | None
    """The exception it raised the first time (its name), None if it raised none."""


class Sandbox:
    """Runs model-written Python and SQL for one trajectory: the jail, its worker and the steps run so far.

    Two backends differ in what stays between steps (``mode``): :class:`SessionSandbox` keeps one worker (and its
    variables) alive between cells; :class:`ReplaySandbox` keeps only the text of earlier cells (and queries) and
    re-runs it, silently, in a fresh worker before each new cell, so nothing stays in memory between steps. Before
    a replay the work folder is put back as it was before the first replayed step, so cells that create, append to
    or delete files meet the same files as in a session. Both give the same observations for the same cells.
    ``Sandbox(files, mode=...)`` makes the backend of that mode; ``fork()`` an independent sandbox in the same
    state. Both backends are :class:`~datalyst.sandbox.CodeExecutor` s.

    The core is async (``arun_python``, ``arun_sql``, ``afork``, ``aclose``); cancelling a caller never cuts a
    step midway (``aclose`` ends it early by killing the worker). The sync methods are a facade that runs the same
    coroutines on an event loop of their own; drive one sandbox from one event loop, or from the sync methods.

    Example::

        with Sandbox(files=["sales.csv"]) as sb:
            print(sb.run_python("import pandas as pd\\npd.read_csv('sales.csv').shape").stdout)
    """

    mode: Mode
    keeps_state: bool
    """Whether a worker holds the variables of earlier steps (a worker that dies loses them)."""

    async def _stepped(self, holds_history: bool) -> None:
        """What the backend does after a step that ``holds_history`` says the worker has run in full."""
        raise NotImplementedError

    def __new__(cls, *args: Any, mode: Mode = "session", **kwargs: Any) -> Sandbox:
        if cls is Sandbox:
            if mode not in _BACKENDS:
                raise ConfigError(f"unknown sandbox mode {mode!r}; use 'session' or 'replay'")
            cls = _BACKENDS[mode]
        return super().__new__(cls)

    def __init__(
        self,
        files: Iterable[str | os.PathLike[str]] = (),
        *,
        mode: Mode = "session",
        limits: Limits | None = None,
        screen_code: bool = True,
        require_isolation: bool = True,
        use_namespaces: bool = True,
        auto_install: AutoInstaller | None = None,
        forkserver: ForkServer | None = None,
    ) -> None:
        if mode != self.mode:
            raise ConfigError(f"a {type(self).__name__} runs in {self.mode} mode, not {mode!r}")
        if require_isolation and not use_namespaces:
            raise ConfigError("use_namespaces=False runs model code without isolation; pass require_isolation=False")
        self.limits = limits or Limits()
        self.screen_code = screen_code
        self.require_isolation = require_isolation
        self.use_namespaces = use_namespaces
        self.auto_install = auto_install
        self._forkserver = forkserver or default_forkserver()
        self._worker: WorkerProcess | None = None
        self._history: list[_Step] = []
        self._cells = 0
        self._state_lost = False
        self._synced = False
        """Session mode: the live worker has run every step of the history (a fork's first worker has not)."""
        self._closed = False
        self.forked_by: ForkWay | None = None
        """How this sandbox got its state: None when made directly; when made by ``fork()``, ``"snapshot"`` (its
        worker loaded the source's state) or ``"replay"`` (its first cell replays the source's history)."""
        self.fork_note = ""
        """Why a fork replays instead of loading a snapshot ("" otherwise)."""
        self._isolation = ""
        self._busy = asyncio.Lock()
        """Held by a running step, and by ``aclose``: a close (a cancelled trajectory's) first kills the worker,
        which ends the step, then waits for it to finish with the worker and the folder."""
        self._home = tempfile.mkdtemp(prefix="sandbox-", dir=self._forkserver.ensure_run_root())
        self.workdir = os.path.join(self._home, "work")
        """The work folder, as cells see it. On a private disk (see ``isolation``), this is only the empty
        folder the jail mounts it on: this process reaches the files through ``host_workdir``."""
        self._baseline = os.path.join(self._home, "baseline")
        """What the work folder held, besides the data files, before the first step of the history (replay mode
        restores it before each step, a fork before its first)."""
        os.mkdir(self.workdir)
        os.mkdir(self._baseline)
        self._disk: int | None = None
        self._disk_error = ""
        self._sources: dict[str, str] = {}
        """The file each staged data file was copied from, by name."""
        try:
            files = [os.fspath(f) for f in files]
            self._make_disk(files)
            self.host_workdir = self.workdir if self._disk is None else f"/proc/self/fd/{self._disk}"
            """The work folder as this process reads and writes it (``/proc/self/fd/N`` for a private disk)."""
            self.data_files = self._stage(files)
        except BaseException:
            self._close_disk()
            remove_tree(self._home)
            raise

    # -- set-up

    def _make_disk(self, files: list[str]) -> None:
        """Put the work folder on a tmpfs of ``Limits.disk_mb`` plus the data files' size, where namespaces work."""
        if why := self._no_namespaces():
            self._disk_error = why
            return
        staged_mb = sum(os.path.getsize(f) for f in files if os.path.isfile(f)) // (1 << 20) + 1
        try:
            self._disk = self._forkserver.make_disk(self.limits.disk_mb + staged_mb)
        except SandboxError as exc:
            self._disk_error = str(exc)

    def _no_namespaces(self) -> str:
        """Why workers get no namespaces ("" while they should)."""
        if not self.use_namespaces:
            return "namespaces disabled by the caller"
        return self._forkserver.namespaces_error or ""

    def _close_disk(self) -> None:
        if self._disk is not None:
            os.close(self._disk)
            self._disk = None

    def _stage(self, files: list[str]) -> list[str]:
        staged: list[str] = []
        for source in files:
            if not os.path.isfile(source):
                raise DataFileError(f"{source}: no such file; check the path")
            target = os.path.join(self.host_workdir, os.path.basename(source))
            if target in staged:
                raise ConfigError(f"two data files are named {os.path.basename(source)!r}; rename one")
            shutil.copyfile(source, target)
            os.chmod(target, 0o444)
            staged.append(target)
            self._sources[os.path.basename(source)] = source
        uid, gid = jail_identity()
        if uid != os.geteuid():  # the real root's jail runs as nobody, who must own the work folder
            os.chown(self.host_workdir, uid, gid)
        return staged

    def _spec(self) -> JailSpec:
        root = os.path.join(self._home, "root")
        os.makedirs(root, exist_ok=True)
        extra = [self.auto_install.target_dir] if self.auto_install else []
        return JailSpec(
            workdir=self.workdir,
            root=root,
            readonly_files=self._jail_data_files(),
            limits=self.limits.model_dump(),
            readonly_dirs=extra,
            python_path=extra,
            databases=[os.path.basename(p) for p in self.databases],
            disk=self._disk is not None,
        )

    async def _start_worker(self) -> WorkerProcess:
        known_error = self._forkserver.namespaces_error
        if self.require_isolation and known_error:
            raise _refusal(known_error)
        isolate = not self._no_namespaces()
        worker = await WorkerProcess.start(self._forkserver, self._spec(), isolate=isolate, disk=self._disk)
        if isolate and worker.degraded:
            self._forkserver.namespaces_error = worker.degraded
        reason = self._no_namespaces()
        missing, not_enforced = _missing_layer(worker.report, reason, self._disk_error)
        if missing:
            if self.require_isolation:
                worker.close()
                raise _refusal(missing)
            _warn_unisolated(missing, not_enforced)
        folder = (
            f"work folder on a private disk of {self.limits.disk_mb} MiB (and the data files)"
            if self._disk is not None
            else f"work folder on the host's disk, its total size unbounded ({self._disk_error})"
        )
        group = (
            describe_cgroup(worker.cgroup)
            if worker.cgroup is not None
            else f"no cgroup of its own ({self._forkserver.cgroups_error or 'not reported'})"
        )
        self._isolation = _describe_isolation(worker, reason, folder, group)
        return worker

    @property
    def isolation(self) -> str:
        """A short description of what is enforced (starts a worker if none ran yet)."""
        if not self._isolation:
            self.prestart()
        return self._isolation

    async def _ensure_worker(self) -> WorkerProcess:
        """The live worker, started if there is none (held busy)."""
        if self._worker is None:
            self._worker = await self._start_worker()
        return self._worker

    @classmethod
    async def astarted(cls, files: Iterable[str | os.PathLike[str]] = (), **options: Any) -> Sandbox:
        """A sandbox (``options`` as :class:`Sandbox` takes them) whose worker has started, made without blocking
        the event loop."""
        sandbox = await asyncio.to_thread(cls, files, **options)
        try:
            await sandbox.aprestart()
        except BaseException:
            await sandbox.aclose()
            raise
        return sandbox

    @_uncut
    async def aprestart(self) -> None:
        """Start the worker now, so the first cell does not wait for it."""
        async with self._busy:
            await self._ensure_worker()

    # -- Python

    @_uncut
    async def arun_python(self, code: str) -> ExecResult:
        """Run one cell and return its observation. Never raises for anything the cell does."""
        self._cells += 1
        name = f"<cell-{self._cells}>"
        if self.screen_code and (problem := screen(code, self.data_files)):
            return ExecResult(error=CellError(ename="SandboxViolation", evalue=problem, traceback=problem))
        async with self._busy:
            result = await self._run_cell(code, name)
            missing = result.error.missing_module if result.error else None
            if self.auto_install and missing and await asyncio.to_thread(self.auto_install.install, missing):
                if self._history and self._history[-1].label == name:
                    self._history.pop()  # the attempt that lacked the module: a replay runs the cell once
                result = await self._run_cell(code, name)
        return result

    async def _run_cell(self, code: str, name: str) -> ExecResult:
        replay = [] if self._synced else self._history
        if replay:
            await asyncio.to_thread(self._restore_workdir)
        worker = await self._ensure_worker()
        exchange = await worker.exchange(
            {"op": "run", "code": code, "name": name, "replay": [step.request for step in replay]},
            reply=CellReply,
            timeout_s=self.limits.wall_s * max(1, len(replay)),
            after_replay_s=self.limits.wall_s,
            cpu_s=self.limits.cpu_s * max(1, len(replay)),
            after_replay_cpu_s=self.limits.cpu_s,
            max_output_bytes=self.limits.max_output_chars,
        )
        result = _to_exec_result(exchange, self.limits, state_lost=self._state_lost)
        if mismatch := _replay_mismatch(replay, exchange.replay_errors):
            result = result.model_copy(update={"replay_mismatch": mismatch})
        self._state_lost = exchange.timed_out or exchange.died or exchange.cpu_exceeded
        if self._state_lost:
            await self._drop_worker()
            await asyncio.to_thread(self._restart_history)
            return result
        if not (result.error and result.error.ename == "CpuTimeExceeded"):  # too costly to replay each step
            error = result.error.ename if result.error else None
            self._history.append(_Step({"op": "run", "code": code, "name": name}, name, error))
        await self._stepped(holds_history=True)
        return result

    def _restore_workdir(self) -> None:
        """Put the work folder back as it was before the first step of the history (data files stay)."""
        empty_folder(self.host_workdir, keep=self._data_names())
        copy_folder(self._baseline, self.host_workdir)

    def _restart_history(self) -> None:
        """Forget the earlier steps (their worker died): the history starts again from the folder as it is."""
        self._history.clear()
        empty_folder(self._baseline, keep=())
        copy_folder(self.host_workdir, self._baseline, skip=self._data_names())

    def _data_names(self) -> set[str]:
        return {os.path.basename(path) for path in self.data_files}

    def _jail_data_files(self) -> list[str]:
        """The staged data files as cells see them (``data_files`` are this process's paths to them)."""
        return [os.path.join(self.workdir, name) for name in self._data_names()]

    # -- SQL

    @property
    def databases(self) -> list[str]:
        """Staged files that are SQLite databases."""
        from datalyst.data import FileKind, detect_kind  # imported here: it loads pandas, which the host may not need

        return [path for path in self.data_files if detect_kind(path) == FileKind.SQLITE]

    def db_info(self) -> str:
        """Schema, row counts and sample rows of every staged SQLite database."""
        from datalyst.data import describe

        if not self.databases:
            return "No SQLite database was provided."
        # Read from the files that were staged, which the staged copies equal byte for byte: SQLite
        # resolves links in a path, and a private disk is reached through /proc/self/fd/N.
        return "\n\n".join(describe(self._sources[os.path.basename(path)]).render() for path in self.databases)

    @_uncut
    async def arun_sql(self, sql: str, output_path: str | None = None, *, db: str | None = None) -> SqlResult:
        """Run a query on a staged database (read-only); save all rows as CSV at ``output_path``."""
        target = self._check_sql_target(output_path, db)
        if isinstance(target, SqlResult):
            return target
        async with self._busy:
            return await self._run_query(
                {
                    "op": "sql",
                    "sql": sql,
                    "db": target,
                    "output_path": output_path,
                    "timeout_s": self.limits.sql_timeout_s,
                }
            )

    async def _run_query(self, request: dict[str, Any]) -> SqlResult:
        holds_history = self._synced or not self._history  # a query changes no variable: what the worker holds stays
        worker = await self._ensure_worker()
        exchange = await worker.exchange(
            request,
            reply=SqlReply,
            timeout_s=self.limits.sql_timeout_s + self.limits.wall_s,
            cpu_s=self.limits.sql_timeout_s + self.limits.cpu_s,
            max_output_bytes=self.limits.max_output_chars,
        )
        if exchange.reply is None:
            await self._drop_worker()
            self._state_lost = self.keeps_state  # a replay worker holds no state
            if self._state_lost:
                await asyncio.to_thread(self._restart_history)
            note = "the query timed out" if exchange.timed_out else exchange.exit_note
            if exchange.cpu_exceeded:
                note = f"the query used more than {self.limits.sql_timeout_s + self.limits.cpu_s:g} CPU seconds"
            error = CellError(ename="SandboxError", evalue=note)
            return SqlResult(error=error, timed_out=exchange.timed_out, duration_s=exchange.duration_s)
        reply = exchange.reply.model_dump(exclude={"id"})
        result = SqlResult.model_validate({**reply, "duration_s": exchange.duration_s})
        self._history.append(_Step(request, "an SQL query", result.error.ename if result.error else None))
        await self._stepped(holds_history)  # a replayed query too: its output file is part of what later cells see
        return result

    def _check_sql_target(self, output_path: str | None, db: str | None) -> str | SqlResult:
        """The base name of the database to query, or the refusal to return instead."""
        name, why = pick_database([os.path.basename(p) for p in self.databases], db)
        if name is None:
            return SqlResult(error=CellError(ename="DatabaseNotFound", evalue=why))
        jail_files = self._jail_data_files()
        if output_path is not None and (problem := output_path_problem(self.workdir, output_path, jail_files)):
            return SqlResult(error=CellError(ename="OutputPathRefused", evalue=problem))
        return name

    # -- forking

    @_uncut
    async def afork(self, how: ForkWay = "snapshot") -> Sandbox:
        """An independent sandbox in this one's state: the same data files, limits and options, a copy of the work
        folder, and the variables of every earlier cell, in a fresh jail whose worker is started. By default the
        state is carried: this sandbox's worker pickles it and the fork's worker loads it before anything else
        (``forked_by == "snapshot"``). Where that cannot give the state exactly (``fork_note`` says why), or with
        ``how="replay"``, the fork's first cell replays the history silently instead (``forked_by == "replay"``).
        Later cells, files, crashes and limits of one never reach the other; close each on its own. A live fork
        of the worker is not offered: see docs/sandbox.md, "Forking".
        """
        if how not in ("snapshot", "replay"):
            raise ConfigError(f"unknown way to fork {how!r}; use 'snapshot' or 'replay'")
        async with self._busy:
            if self._closed:
                raise SandboxError("this sandbox is closed; only an open sandbox can be forked")
            fork = await asyncio.to_thread(
                type(self),
                self.data_files,
                mode=self.mode,
                limits=self.limits,
                screen_code=self.screen_code,
                require_isolation=self.require_isolation,
                use_namespaces=self.use_namespaces,
                auto_install=self.auto_install,
                forkserver=self._forkserver,
            )
            state = None
            started = asyncio.ensure_future(fork.aprestart())  # the fork's jail starts while this one's state is taken
            try:
                state, note = await self._snapshot() if how == "snapshot" else (None, "a replay was asked for")
                await started
                whole = await asyncio.to_thread(fork._take_state, self)
                if state is not None and not whole:
                    note = "the work folder holds what cannot be copied (a FIFO, a socket, a file made unreadable)"
                fork.fork_note = await fork._restore(state) if state is not None and whole else note
            except BaseException:
                await asyncio.gather(started, return_exceptions=True)
                await fork.aclose()
                raise
            finally:
                if state is not None:
                    os.close(state)
        return fork

    async def _snapshot(self) -> tuple[int | None, str]:
        """A memory file with this sandbox's live state, as its worker pickled it, or None and why not (held busy).

        The host never loads the state: it checks its size and copies it into a file of its own for the fork
        (code in this jail may still hold the one it wrote). The limit is a quarter of ``Limits.memory_mb`` and at
        most ``Limits.file_size_mb``. Should the state's own code end the worker (pickling runs methods that
        cells defined), the variables are lost, as when a cell ends it.
        """
        if self._worker is None or not self._synced:
            return None, "no worker holds the state (replay mode, or a fork that has not run a cell yet)"
        limit = min(self.limits.memory_mb << 18, self.limits.file_size_mb << 20)
        written = os.memfd_create("datalyst-snapshot", os.MFD_CLOEXEC)
        try:
            exchange = await self._worker.exchange(
                {"op": "snapshot", "max_bytes": limit},
                reply=CellReply,
                timeout_s=self.limits.wall_s,
                cpu_s=self.limits.cpu_s,
                max_output_bytes=self.limits.max_output_chars,
                fds=[written],
            )
            if exchange.reply is None:
                await self._drop_worker()
                self._state_lost = True
                await asyncio.to_thread(self._restart_history)
                return None, f"taking the snapshot ended the worker ({exchange.exit_note or 'it timed out'})"
            if (error := exchange.reply.error) is not None:
                return None, f"{error.ename}: {error.evalue}"
            size = os.fstat(written).st_size
            if size > limit:
                return None, f"the worker wrote a snapshot of {size} bytes, over the limit of {limit}"
            return _copy_memory_file(written, size), ""
        finally:
            os.close(written)

    async def _restore(self, state: int) -> str:
        """Load the state in the memory file ``state`` in this fork's worker: "" when it did, else why not (the
        worker is dropped, and the first cell replays instead)."""
        exchange = await (await self._ensure_worker()).exchange(
            {"op": "restore"},
            reply=CellReply,
            timeout_s=self.limits.wall_s,
            cpu_s=self.limits.cpu_s,
            max_output_bytes=self.limits.max_output_chars,
            fds=[state],
        )
        if exchange.reply is None or exchange.reply.error is not None:
            await self._drop_worker()  # whatever the loading did to the folder, the replay puts it back first
            error = exchange.reply.error if exchange.reply else None
            why = f"{error.ename}: {error.evalue}" if error else exchange.exit_note or "it timed out"
            return f"loading the snapshot failed ({why})"
        self._synced = True
        self.forked_by = "snapshot"
        return ""

    def _take_state(self, source: Sandbox) -> bool:
        """Become a fork of ``source`` (held busy) that replays: its history, its baseline, and a copy of its folder;
        False when something in the folder could not be copied (a replay makes it again)."""
        self._sources = dict(source._sources)
        self._history = list(source._history)
        self._cells = source._cells
        self._state_lost = source._state_lost
        self.forked_by = "replay"
        copy_folder(source._baseline, self._baseline)
        return copy_folder(source.host_workdir, self.host_workdir, skip=self._data_names())

    # -- ending

    async def _drop_worker(self) -> None:
        """Kill the worker and wait until every process of its jail has exited: nothing of it may still write
        when the folder is restored, re-used or deleted."""
        if self._worker is not None:
            await self._worker.exit_note()
            self._worker.close()
            self._worker = None
        self._synced = False

    @_uncut
    async def aclose(self) -> None:
        """Kill the worker, wait until nothing in its jail can still write, and delete the work folder.

        While a step runs, the step is interrupted (it returns a killed-worker result) and the folder goes once
        it has finished (``close``, from another thread while a sync step runs, too).
        """
        if (worker := self._worker) is not None:
            worker.kill()
        async with self._busy:
            self._closed = True
            try:
                await self._drop_worker()
            finally:
                self._close_disk()
                if os.path.isdir(self._home):
                    await asyncio.to_thread(remove_tree, self._home)

    prestart = _blocking(aprestart)
    run_python = _blocking(arun_python)
    run_sql = _blocking(arun_sql)
    fork = _blocking(afork)
    close = _blocking(aclose)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class SessionSandbox(Sandbox):
    """Keeps one worker, and the variables of every earlier cell, between steps."""

    mode = "session"
    keeps_state = True

    async def _stepped(self, holds_history: bool) -> None:
        self._synced = holds_history


class ReplaySandbox(Sandbox):
    """Keeps only the text of earlier steps: a fresh worker replays them, silently, before the next one."""

    mode = "replay"
    keeps_state = False

    async def _stepped(self, holds_history: bool) -> None:
        await self._drop_worker()


_BACKENDS: dict[str, type[Sandbox]] = {"session": SessionSandbox, "replay": ReplaySandbox}


def _copy_memory_file(fd: int, size: int) -> int:
    """A new memory file holding the first ``size`` bytes of ``fd`` (copied by the kernel)."""
    copy = os.memfd_create("datalyst-snapshot", os.MFD_CLOEXEC)
    try:
        offset = 0
        while offset < size and (sent := os.sendfile(copy, fd, offset, size - offset)):
            offset += sent
    except BaseException:
        os.close(copy)
        raise
    return copy


def _to_exec_result(exchange: Exchange[CellReply], limits: Limits, *, state_lost: bool) -> ExecResult:
    reply = exchange.reply or CellReply(id="")
    error = reply.error.cell_error() if reply.error else None
    if exchange.timed_out:
        evalue = f"the cell ran longer than {limits.wall_s:g} s and was stopped"
        error = CellError(ename="TimeoutError", evalue=evalue, traceback=f"TimeoutError: {evalue}")
    elif exchange.cpu_exceeded:
        evalue = (
            f"the cell's threads and processes used more than {limits.cpu_s:g} CPU seconds together "
            "and were stopped; variables from earlier cells are lost"
        )
        error = CellError(ename="CpuTimeExceeded", evalue=evalue, traceback=f"CpuTimeExceeded: {evalue}")
    elif exchange.died:
        evalue = f"{exchange.exit_note}; variables from earlier cells are lost"
        error = CellError(ename="WorkerCrashed", evalue=evalue, traceback=f"WorkerCrashed: {evalue}")
    stdout, stderr = exchange.stdout, exchange.stderr
    return ExecResult(
        stdout=stdout.text(),
        stderr=stderr.text(),
        error=error,
        timed_out=exchange.timed_out,
        memory_exceeded=reply.error is not None and reply.error.ename == "MemoryError",
        crashed=exchange.died,
        state_lost=state_lost,
        truncated=bool(stdout.dropped or stderr.dropped),
        duration_s=exchange.duration_s,
        files_created=reply.files,
    )


def _replay_mismatch(history: list[_Step], errors: list[str | None] | None) -> str:
    """Why re-running the history did not reproduce it (empty when it did, or when nothing was re-run)."""
    for step, error in zip(history, errors or [], strict=False):
        if error != step.error:
            before = f"raised {step.error}" if step.error else "raised nothing"
            now = f"raised {error}" if error else "raised nothing"
            return (
                f"Re-running the earlier cells did not reproduce them: {step.label} {before} the first time "
                f"and {now} when re-run, so variables may differ from what earlier outputs showed."
            )
    return ""


def _describe_isolation(worker: WorkerProcess, reason: str, folder: str, group: str) -> str:
    report = worker.report
    limits = ", ".join(report.get("limits", []))
    if report.get("namespaces"):
        return (
            f"namespaces: {', '.join(report['namespaces'])}; private read-only root with only the Python "
            f"installation and the work folder; {folder}; data files read-only; no capabilities; "
            f"{describe_seccomp(report)}; limits: {limits}; {group}; scrubbed environment; wall-clock watchdog"
        )
    landlock = report.get("landlock") or f"no Landlock ({report.get('landlock_error', 'not reported')})"
    return (
        f"DEGRADED ({reason}): {_open_without_namespaces(report)}; {landlock}; {describe_seccomp(report)}; "
        f"limits: {limits}; {group}; scrubbed environment; wall-clock watchdog"
    )


def _open_without_namespaces(report: dict[str, Any]) -> str:
    """What a worker without namespaces leaves open, with Landlock in their place or without it."""
    if report.get("landlock"):
        return (
            "NOT enforced: UDP and Unix sockets with a path, host processes visible (not their environments), "
            "data files writable where datalyst runs as root, no process-count limit"
        )
    return (
        "NOT enforced: no network isolation, host files readable and writable as this user, "
        "host processes visible (their environments too), no process-count limit"
    )


_warned: set[str] = set()


def _missing_layer(report: dict[str, Any], namespaces_reason: str, disk_error: str = "") -> tuple[str, str]:
    """Why a started worker is not fully isolated, and what that leaves open (empty when it is isolated)."""
    if not report.get("namespaces"):
        return namespaces_reason, _open_without_namespaces(report)
    if disk_error:
        return f"no size-limited work folder ({disk_error})", "NOT enforced: the work folder's total size"
    if report.get("seccomp") is not True:
        why = f"the seccomp filter could not be installed ({report.get('seccomp_error', 'not reported')})"
        return why, "NOT enforced: the system-call filter (nested namespaces, io_uring, bpf and the rest are reachable)"
    return "", ""


def _refusal(reason: str) -> IsolationUnavailable:
    return IsolationUnavailable(
        f"the sandbox cannot isolate model code here: {reason}. To run it anyway, without isolation, "
        "pass --allow-unisolated (in Python, require_isolation=False)"
    )


def _warn_unisolated(reason: str, not_enforced: str) -> None:
    """Say once per reason and process that model code runs without isolation, and what that leaves open."""
    if reason not in _warned:
        _warned.add(reason)
        log.warning("running model code WITHOUT isolation (%s). %s", reason, not_enforced)
