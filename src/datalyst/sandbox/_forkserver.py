"""A fork server: one clean process with the data-science stack loaded, forking jailed workers.

Process tree for one worker::

    host ──socket── fork server ──fork── monitor ──fork── worker (PID 1 of its own namespaces)

The monitor enters the new namespaces, waits for the fork server to write its user-ID map, forks
the worker and reports the worker's PID and, later, how it ended. Killing the worker (PID 1)
makes the kernel kill every process in its PID namespace, double-forked daemons included.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from typing import Any, NamedTuple

from datalyst.errors import SandboxError
from datalyst.sandbox import _cgroup as cgroup
from datalyst.sandbox import _isolation as iso
from datalyst.sandbox import _linux as lx
from datalyst.sandbox import _seccomp as seccomp
from datalyst.sandbox._wire import FrameBuffer, MalformedFrame, WireError, recv_frame, recv_frame_with_fds, send_frame

# What the fork server imports once, so that every worker starts with it: the libraries of PREINSTALLED,
# with the submodules cells use (about 1 s of cold start and 110 MiB, shared by all workers; docs/BENCHMARKS.md),
# and cloudpickle, which the worker imports to take and load snapshots for Sandbox.fork().
PRELOAD = (
    "datalyst.sandbox._worker",
    "datalyst.data",
    "numpy",
    "pandas",
    "matplotlib.pyplot",
    "scipy.stats",
    "sklearn.linear_model",
    "statsmodels.api",
    "seaborn",
)
_BOOTSTRAP = "import sys; sys.path.insert(0, sys.argv[1]); from datalyst.sandbox._forkserver import main; main()"
HANDSHAKE_TIMEOUT_S = 20.0
"""How long the fork server waits on a new monitor's handshake before it kills it and refuses the spawn."""
SPAWN_TIMEOUT_S = 60.0
"""How long the host waits for the answer to a spawn: longer than ``HANDSHAKE_TIMEOUT_S``, so that a stuck
monitor is reported by the fork server, and bounded, so that the host's spawn lock is never held forever."""
START_TIMEOUT_S = 120.0
"""How long the host waits for a new fork server to load its libraries and greet."""
MAX_REQUEST_FDS = 8


def remove_tree(path: str) -> None:
    """Delete a folder even if sandboxed code removed permissions inside it."""

    def fix_and_retry(func: Any, failed: str, exc: BaseException) -> None:
        try:
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
            func(failed)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=fix_and_retry)
    else:
        shutil.rmtree(path, onerror=lambda func, failed, info: fix_and_retry(func, failed, info[1]))


def close_fds_except(keep: set[int]) -> None:
    """Close every inherited descriptor above 2 that is not in ``keep``."""
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


# ---------------------------------------------------------------- inside the fork server


def _preload() -> None:
    import importlib
    import io

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    try:  # touch the lazy parts once so the first cell of every worker is fast
        import matplotlib.pyplot as plt
        import pandas as pd

        repr(pd.read_csv(io.StringIO("a,b\n1,x\n2,y\n")).describe(include="all"))
        fig = plt.figure()
        plt.plot([1, 2], [3, 4])
        fig.savefig(io.BytesIO(), format="png")
        plt.close("all")
    except ImportError:
        pass
    # Move every object made so far out of the collector's reach: a full collection in a worker
    # would otherwise write to (and so copy) every page holding them, un-sharing ~30 MiB per worker.
    gc.collect()
    gc.freeze()


def _run_monitor(
    spec: iso.JailSpec, fds: list[int], sync: socket.socket, isolate: bool, server_pid: int, group: str | None
) -> None:
    """The forked child of the fork server (``group``: the sandbox's cgroup, to enter first). Never returns."""
    ctrl, out, err, status, *rest = fds
    disk = rest[0] if rest else None
    for signum in (signal.SIGCHLD, signal.SIGTERM):  # the fork server's handlers are not ours
        signal.signal(signum, signal.SIG_DFL)
    os.setsid()
    lx.prctl(lx.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server_pid:  # the fork server died before the line above took effect
        os._exit(0)
    close_fds_except({ctrl, out, err, status, sync.fileno(), *rest})
    if group is not None:
        try:
            cgroup.enter(group)
        except OSError as exc:
            os.write(status, _line({"setup_error": f"cannot enter the sandbox's cgroup ({exc.strerror or exc})"}))
            os._exit(70)
    iso.be_killed_first()
    isolated = False
    if isolate:
        if os.geteuid() == 0:  # no supplementary groups (root's) inside the jail, where they may be dropped
            with contextlib.suppress(PermissionError):  # root of a user namespace that denies setgroups
                os.setgroups([])
        try:
            iso.enter_namespaces()
            sync.send(b"u")
            isolated = sync.recv(1) == b"g"
            if not isolated:
                os.write(status, _line({"degraded": iso.ID_MAP_FAILED}))
        except OSError as exc:
            os.write(status, _line({"degraded": iso.why_no_namespaces(exc)}))
    sync.close()
    pid = os.fork()
    if pid == 0:
        _run_worker(spec, ctrl, out, err, status, isolated, disk)
    for fd in rest:
        os.close(fd)
    os.close(ctrl)
    os.close(out)
    os.close(err)
    os.write(status, _line({"pid": pid}))
    _, wait_status = os.waitpid(pid, 0)
    os.write(status, _line({"wait_status": wait_status}))
    os._exit(0)


def _run_worker(
    spec: iso.JailSpec, ctrl: int, out: int, err: int, status: int, isolated: bool, disk: int | None
) -> None:
    """Jail this process, then serve cells. Never returns."""
    from datalyst.sandbox._worker import serve

    monitor = os.getppid()
    try:
        if isolated:
            iso.build_root(spec, disk)
        elif disk is not None:
            raise OSError("the work folder is a disk only a jail can mount, and namespaces are unavailable")
        # After build_root, whose change of user ID (for the real root) clears the setting: the jail dies
        # with its monitor even while the host keeps it stopped between cells and it cannot read its socket.
        lx.prctl(lx.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != monitor:
            os._exit(0)
        layers = iso.apply_limits(spec.limits, count_processes=isolated)
        os.setsid()
        iso.clean_environment(spec.workdir)
        os.chdir(spec.workdir)
        sys.path[:0] = spec.python_path
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        if isolated:
            lx.drop_all_capabilities()
        else:
            lx.prctl(lx.PR_SET_NO_NEW_PRIVS, 1)
        report: dict[str, Any] = {"namespaces": list(iso.NAMESPACES) if isolated else [], "limits": layers}
        if not isolated:
            report |= iso.confine_without_namespaces(spec)
        report |= seccomp.install_and_report()  # with no_new_privs set, and before any model code
        os.write(status, _line({"jailed": report}))
        close_fds_except({ctrl})
    except BaseException as exc:  # setup failed: tell the host why, then die
        os.write(status, _line({"setup_error": f"{type(exc).__name__}: {exc}"}))
        os._exit(70)
    try:
        serve(socket.socket(fileno=ctrl), spec, private_tmp=isolated)
    finally:
        os._exit(0)


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def main() -> None:
    """Entry point of the fork server process: ``python -s -P -c BOOTSTRAP SRC_DIR FD RUN_ROOT``."""
    sock = socket.socket(fileno=int(sys.argv[2]))
    run_root = sys.argv[3]
    monitors: dict[int, str | None] = {}
    """Each live monitor's PID and its sandbox's cgroup."""
    stale: list[str] = []
    """Cgroups of ended sandboxes that could not be deleted yet."""
    ended_maker = False
    """The disk maker has died (killed from outside): the next disk request starts another."""

    def reap(*_: Any) -> None:
        nonlocal ended_maker
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            ended_maker = ended_maker or pid == disk_maker_pid
            group = monitors.pop(pid, None)
            if group is not None and not cgroup.remove(group):
                stale.append(group)

    disk_maker, disk_maker_pid = _start_disk_maker()  # before the imports, so it stays small
    ours = {os.getppid(), os.getpid(), *([disk_maker_pid] if disk_maker_pid else [])}
    parent = cgroup.find_parent(ours, os.environ.get(cgroup.ENV))
    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _preload()
    greeting: dict[str, Any] = {"op": "ready", "pid": os.getpid(), "disk_maker": disk_maker_pid}
    if isinstance(parent, str):
        greeting["cgroups_error"], parent = parent, None
    names = (f"sandbox-{os.getpid()}-{n}" for n in itertools.count())
    try:
        send_frame(sock, greeting)
        while True:  # one framed request at a time; a malformed one is answered, never the end of the server
            try:
                request, fds = recv_frame_with_fds(sock, MAX_REQUEST_FDS)
            except MalformedFrame as exc:
                send_frame(sock, {"id": None, "error": f"malformed request: {exc}"})
                continue
            except (WireError, OSError):
                return
            if request.get("op") == "spawn":
                stale[:] = [group for group in stale if not cgroup.remove(group)]
                reply = _spawn(request, fds, monitors, (parent, next(names)) if parent else None)
            elif request.get("op") == "disk":
                if ended_maker and isinstance(disk_maker, socket.socket):
                    ended_maker = False
                    disk_maker.close()
                    disk_maker, disk_maker_pid = _start_disk_maker()
                reply = _disk(disk_maker, request, fds)
            else:
                for fd in fds:
                    os.close(fd)
                reply = {"error": f"unknown op {str(request.get('op'))[:100]!r}"}
            send_frame(sock, {**reply, "id": request.get("id")})
    except (BrokenPipeError, ConnectionResetError):  # the host is gone (it ended, or crashed): no one waits
        return
    finally:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for pid, group in monitors.items():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            stale.extend([group] if group else [])
        for group in stale:
            cgroup.remove(group)
        remove_tree(run_root)


def _spawn(
    request: dict[str, Any],
    fds: list[int],
    monitors: dict[int, str | None],
    group: tuple[cgroup.Parent, str] | None,
) -> dict[str, Any]:
    """Fork a monitor for one spawn request, in a new cgroup ``group`` (parent and name) where one is given:
    ``{"pid": ..., "cgroup": ...}``, or ``{"error": ...}`` for a request that is malformed or a monitor that
    cannot be started. The request's descriptors are closed here, whatever happens."""
    try:
        try:
            fields = request["spec"]
            spec = iso.JailSpec(**{**fields, "readonly_dirs": iso.python_dirs() + fields["readonly_dirs"]})
            isolate = request["isolate"]
            expected = 5 if spec.disk else 4
            if not isinstance(isolate, bool) or len(fds) != expected:
                raise ValueError(f"isolate={isolate!r:.20} with {len(fds)} descriptors ({expected} expected)")
        except (KeyError, TypeError, ValueError) as exc:
            return {"error": f"malformed spawn request ({type(exc).__name__}: {str(exc)[:200]})"}
        try:
            path = cgroup.create(group[0], group[1], spec.limits) if group else None
        except (OSError, KeyError, TypeError) as exc:
            return {"error": f"could not make the sandbox's cgroup ({exc})"}
        parent_end, child_end = socket.socketpair()
        server_pid = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            parent_end.close()
            child_end.close()
            if path:
                cgroup.remove(path)
            raise
        if pid == 0:
            try:
                parent_end.close()
                _run_monitor(spec, fds, child_end, isolate, server_pid, path)
            finally:
                os._exit(71)
        monitors[pid] = path
        child_end.close()
    except OSError as exc:  # no socket pair or no fork: out of descriptors, processes or memory
        return {"error": f"could not start a sandbox monitor ({exc})"}
    finally:
        for fd in fds:
            os.close(fd)
    with parent_end:
        parent_end.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            if parent_end.recv(1) == b"u":
                try:
                    iso.write_id_maps(pid)
                    answer = b"g"
                except OSError:
                    answer = b"x"
                parent_end.send(answer)
        except OSError as exc:  # stuck (timed out) or gone: it must not hold the fork server or the host
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return {"error": f"the sandbox monitor did not finish its handshake ({exc})"}
    return {"pid": pid, "cgroup": path}


def _start_disk_maker() -> tuple[socket.socket | str, int | None]:
    """Fork the process that makes work-folder disks; its socket and PID, or why there is none.

    It is root of its own user and mount namespaces, whose maps hold both the host's identity and the
    jail's (both write to a disk), and answers each request with a detached, size-limited tmpfs that it
    sends straight to the host: the host reaches it through the descriptor, jails mount copies of it.
    """
    parent_end, child_end = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            parent_end.close()
            _run_disk_maker(child_end)
        finally:
            os._exit(0)
    child_end.close()
    parent_end.settimeout(HANDSHAKE_TIMEOUT_S)
    try:
        step = parent_end.recv(256)
        if step != b"u":
            raise OSError(step[1:].decode(errors="replace") or "the disk maker exited")
        iso.write_id_maps(pid, disk=True)
        parent_end.send(b"g")
        if parent_end.recv(1) != b"r":
            raise OSError("the disk maker could not start")
    except OSError as exc:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        parent_end.close()
        return str(exc), None
    return parent_end, pid


def _run_disk_maker(sock: socket.socket) -> None:
    for signum in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    lx.prctl(lx.PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        lx.unshare(lx.CLONE_NEWUSER | lx.CLONE_NEWNS)
    except OSError as exc:
        sock.send(b"x" + iso.why_no_namespaces(exc).encode())
        return
    sock.send(b"u")
    if sock.recv(1) != b"g":
        return
    sock.send(b"r")
    while True:
        request, fds = recv_frame_with_fds(sock, 1)
        try:
            disk = iso.make_disk(request["size_mb"], request["owner"])
            try:
                with socket.socket(fileno=os.dup(fds[0])) as host:  # the host's end; fds are closed below
                    socket.send_fds(host, [b"d"], [disk])
            finally:
                os.close(disk)
            reply: dict[str, Any] = {"ok": True}
        except OSError as exc:
            reply = {"error": f"cannot make a work-folder disk: {exc.strerror or exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        send_frame(sock, {**reply, "id": request.get("id")})


def _disk(maker: socket.socket | str, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    """Have the disk maker send a tmpfs of ``request["size_mb"]`` over the host's socket (``fds[0]``)."""
    try:
        size_mb = request.get("size_mb")
        if isinstance(maker, str):
            return {"error": maker}
        if not isinstance(size_mb, int) or size_mb < 1 or len(fds) != 1:
            return {"error": "malformed disk request (an integer size_mb and one socket expected)"}
        owner = iso.NOBODY if iso.jail_identity()[0] != os.geteuid() else 0  # the jail's root, in the disk's terms
        request_id = secrets.token_hex(8)
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        try:
            maker.settimeout(HANDSHAKE_TIMEOUT_S)
            send_frame(maker, {"size_mb": size_mb, "owner": owner, "id": request_id}, fds)
            while True:  # a late answer to a request given up on is skipped
                maker.settimeout(max(deadline - time.monotonic(), 0.001))
                reply = recv_frame(maker)
                if reply.get("id") == request_id:
                    return reply
        except (OSError, WireError) as exc:
            return {"error": f"the disk maker did not answer ({exc})"}
    finally:
        for fd in fds:
            os.close(fd)


# ---------------------------------------------------------------- in the host


class Spawned(NamedTuple):
    monitor_pid: int
    cgroup: str | None
    """The sandbox's own cgroup (None where the machine gives datalyst none; see ``ForkServer.cgroups_error``)."""


class ForkServer:
    """Host-side handle of one fork server process (started on first use, thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self.run_root = ""
        self.namespaces_error: str | None = None
        """Why namespaces could not be used on this machine (None: they work or were not tried yet)."""
        self.disk_maker_pid: int | None = None
        """The fork server's child that makes work-folder disks, as it started (None where it could not start); a
        killed one is replaced, under another PID, at the next disk request."""
        self.cgroups_error: str | None = None
        """Why sandboxes get no cgroups of their own on this machine (None: they do, or not started yet)."""
        self._replies = FrameBuffer()
        """What the fork server sent, kept between calls: a spawn given up on may leave part of a frame."""

    def _start(self) -> None:
        self.run_root = tempfile.mkdtemp(prefix="datalyst-sandbox-")
        host_end, server_end = socket.socketpair()
        src_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": os.path.join(self.run_root, "matplotlib"),
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            # Objects in glibc's heap on transparent huge pages: forking a worker then copies one page
            # table entry per 2 MiB instead of per 4 KiB, which halves what each sandbox costs to start
            # (docs/BENCHMARKS.md). Python reads PYTHONMALLOC only without -E, so -s -P stand in for -I
            # and this dict is the whole environment.
            "PYTHONMALLOC": "malloc",
            "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
        }
        if cgroup.ENV in os.environ:
            env[cgroup.ENV] = os.environ[cgroup.ENV]
        argv = [sys.executable, "-s", "-P", "-c", _BOOTSTRAP, src_dir, str(server_end.fileno()), self.run_root]
        self._proc = subprocess.Popen(
            argv, env=env, pass_fds=[server_end.fileno()], stdin=subprocess.DEVNULL, cwd=self.run_root
        )
        server_end.close()
        self._sock = host_end
        self._replies = FrameBuffer()
        try:
            greeting = self._answer(None, START_TIMEOUT_S)
        except (WireError, OSError) as exc:
            self.close()
            raise SandboxError(
                f"the sandbox fork server failed to start ({exc}); run python -c 'import pandas'"
            ) from exc
        self.disk_maker_pid = greeting.get("disk_maker")
        self.cgroups_error = greeting.get("cgroups_error")
        atexit.register(self.close)

    def _answer(self, request_id: str | None, timeout_s: float) -> dict[str, Any]:
        """The next frame from the fork server that answers ``request_id`` (None: its greeting), skipping late
        answers to requests given up on; TimeoutError when none came within ``timeout_s``."""
        assert self._sock is not None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer within {timeout_s:g} s")
            self._sock.settimeout(remaining)
            data = self._sock.recv(1 << 16)
            if not data:
                raise WireError("the fork server closed the connection")
            for frame in self._replies.feed(data):
                if frame.get("id") == request_id:
                    return frame

    @property
    def pid(self) -> int | None:
        """PID of the fork server process (None until it is started)."""
        return self._proc.pid if self._proc is not None else None

    def ensure_run_root(self) -> str:
        """Start the server if needed; return the folder that holds every sandbox's files."""
        with self._lock:
            if self._sock is None:
                self._start()
        return self.run_root

    def spawn(self, spec: iso.JailSpec, fds: list[int], *, isolate: bool) -> Spawned:
        """Fork a jailed worker that will use ``fds`` (ctrl, stdout, stderr, status, and the work-folder disk
        when ``spec.disk``)."""
        reply = self._request({"op": "spawn", "spec": asdict(spec), "isolate": isolate}, fds)
        return Spawned(int(reply["pid"]), reply.get("cgroup"))

    def make_disk(self, size_mb: int) -> int:
        """A size-limited tmpfs for one sandbox's work folder, mounted nowhere: a descriptor of its root
        (reach it as ``/proc/self/fd/N``; jails mount copies of it). SandboxError where none can be made."""
        host_end, server_end = socket.socketpair()
        with host_end:
            try:
                self._request({"op": "disk", "size_mb": size_mb}, [server_end.fileno()])
            finally:
                server_end.close()
            host_end.settimeout(SPAWN_TIMEOUT_S)
            _, fds, _, _ = socket.recv_fds(host_end, 1, 1)
        if len(fds) != 1:
            raise SandboxError("the sandbox fork server sent no work-folder disk")
        return fds[0]

    def _request(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        with self._lock:
            if self._sock is None:
                self._start()
            assert self._sock is not None
            request_id = secrets.token_hex(8)
            try:
                self._sock.settimeout(SPAWN_TIMEOUT_S)
                send_frame(self._sock, {**request, "id": request_id}, fds)
                reply = self._answer(request_id, SPAWN_TIMEOUT_S)
            except TimeoutError:  # the fork server may still answer: that late answer will be skipped
                raise SandboxError(f"the sandbox fork server did not answer within {SPAWN_TIMEOUT_S:g} s") from None
            except (WireError, OSError) as exc:
                self._sock = None
                raise SandboxError(f"the sandbox fork server stopped unexpectedly ({exc})") from exc
        if "error" in reply:
            raise SandboxError(f"the sandbox fork server refused a request: {reply['error']}")
        return reply

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc = None
            if self.run_root and os.path.isdir(self.run_root):
                remove_tree(self.run_root)


_default: ForkServer | None = None
_default_lock = threading.Lock()


def default_forkserver() -> ForkServer:
    """The fork server shared by sandboxes that were not given one."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ForkServer()
        return _default
