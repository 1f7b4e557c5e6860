"""Turn a freshly forked process into a jailed worker: namespaces, a private root, limits, no privileges.

The layout inside the jail (same paths as on the host, so tracebacks read naturally)::

    /                 memory-backed, read-only after setup
    /usr /lib ...     read-only binds of the system and the Python installation
    /etc/<few files>  read-only binds (timezone, fonts, loader cache); passwd and group are our own
    /dev              null, zero, full, random, urandom; shm: a small private tmpfs
    /proc             a new procfs that shows only the jail's own processes
    /tmp              small private tmpfs
    <workdir>         the trajectory's work folder, read-write; staged data files read-only
"""

from __future__ import annotations

import errno
import os
import resource
import sys
from dataclasses import dataclass, field

from datalyst.sandbox import _landlock as landlock
from datalyst.sandbox import _linux as lx

NAMESPACES = ("user", "mount", "pid", "network", "ipc", "uts", "cgroup")
_UNSHARE_FLAGS = (
    lx.CLONE_NEWUSER
    | lx.CLONE_NEWNS
    | lx.CLONE_NEWPID
    | lx.CLONE_NEWNET
    | lx.CLONE_NEWIPC
    | lx.CLONE_NEWUTS
    | lx.CLONE_NEWCGROUP  # entered after the sandbox's cgroup, which becomes its root
)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_ENTRIES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
    "nsswitch.conf", "hosts", "fonts", "mime.types", "matplotlibrc",
)  # fmt: skip
_ACCOUNTS = {  # written fresh instead of bound from the host, whose account names are not the jail's business
    "passwd": "root:x:0:0:root:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
}
_DEVICES = ("null", "zero", "full", "random", "urandom")
NOBODY = 65534


@dataclass(frozen=True)
class JailSpec:
    """Everything the fork server needs to build one worker."""

    workdir: str
    root: str
    """An empty host folder the private root is mounted on."""
    readonly_files: list[str]
    """Staged data files (absolute paths inside ``workdir``) to make read-only."""
    limits: dict[str, float]
    readonly_dirs: list[str] = field(default_factory=list)
    """Extra folders to show read-only (the fork server adds its Python installation)."""
    python_path: list[str] = field(default_factory=list)
    """Folders to add to the worker's ``sys.path`` (packages installed on demand)."""
    databases: list[str] = field(default_factory=list)
    """Base names of staged SQLite files: cells get ``get_db_info()`` and ``execute_sql()`` for them."""
    disk: bool = False
    """The work folder is a tmpfs the host made (``make_disk``), passed as the spawn's fifth descriptor."""


def python_dirs() -> list[str]:
    """Folders of the running Python installation that a worker must be able to read."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    candidates.update(p for p in sys.path if p and os.path.isabs(p))
    dirs = sorted(os.path.realpath(p) for p in candidates if os.path.isdir(p))
    kept: list[str] = []
    for path in dirs:  # drop folders already inside a kept one (sorted, so parents come first)
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept + list(_SYSTEM_DIRS)):
            kept.append(path)
    return kept


def jail_identity() -> tuple[int, int]:
    """The host uid and gid that root inside the jail stands for: ``nobody`` for the real root (so the
    jail owns nothing of the host's), the caller's own identity for anyone else, the root of a user
    namespace (a rootless container) included."""
    if os.geteuid() == 0:
        with open("/proc/self/uid_map") as f:
            if f.read().split() == ["0", "0", "4294967295"]:  # the initial user namespace: real root
                return NOBODY, NOBODY
    return os.geteuid(), os.getegid()


def enter_namespaces() -> None:
    lx.unshare(_UNSHARE_FLAGS)


def why_no_namespaces(exc: OSError) -> str:
    """One line: why ``enter_namespaces`` failed here and what would let it work."""
    if exc.errno == errno.ENOSPC:
        return (
            "user namespaces are switched off (user.max_user_namespaces is 0); "
            "enable them with `sysctl -w user.max_user_namespaces=15000`"
        )
    if exc.errno == errno.EPERM:
        return (
            "creating a user namespace was refused; in Docker, start the container with "
            "`--security-opt seccomp=unconfined` (its default profile refuses it; on Ubuntu hosts add "
            "`--security-opt apparmor=unconfined`); on the host, `sysctl -w kernel.unprivileged_userns_clone=1` "
            "(Debian) or `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 23.10 and later)"
        )
    return f"creating namespaces failed ({exc.strerror})"


ID_MAP_FAILED = "the user-ID map of the jail could not be written"


def write_id_maps(pid: int, *, disk: bool = False) -> None:
    """Called by the (privileged) parent of a process that just entered a new user namespace: a jail's
    maps its root to the jail identity; a disk maker's (``disk``) also maps the host's own identity,
    since both the host and the jail write to the disk it makes."""
    uid, gid = jail_identity()
    uid_map, gid_map = f"0 {uid} 1\n", f"0 {gid} 1\n"
    if disk and uid != os.geteuid():  # the real root: the host as 0, the jail as nobody
        uid_map = gid_map = f"0 0 1\n{NOBODY} {NOBODY} 1\n"
    with open(f"/proc/{pid}/setgroups", "w") as f:
        f.write("deny")
    with open(f"/proc/{pid}/uid_map", "w") as f:
        f.write(uid_map)
    with open(f"/proc/{pid}/gid_map", "w") as f:
        f.write(gid_map)


def make_disk(size_mb: int, owner: int) -> int:
    """A detached tmpfs of ``size_mb`` for a work folder whose root belongs to ``owner`` (the jail's root);
    called as root of a user namespace whose maps ``write_id_maps(..., disk=True)`` wrote."""
    files = max(4096, 64 * size_mb)  # inodes live outside the size limit: bound their number too
    options = {"size": f"{size_mb}m", "nr_inodes": str(files), "mode": "0755", "uid": str(owner), "gid": str(owner)}
    return lx.new_tmpfs(options)


class _RootBuilder:
    """Builds the private root. Sources are opened first, with the host identity (which may be
    the owner of a private folder holding Python); everything is then created as the mapped
    user, relative to the new root, with sources reached through ``/proc/self/fd``."""

    def __init__(self) -> None:
        self.plan: list[tuple[str, int | str, bool, int]] = []  # (target, fd or link, readonly, extra flags)

    def add(self, path: str, *, readonly: bool = True, extra_flags: int = lx.MS_NOSUID | lx.MS_NODEV) -> None:
        if os.path.islink(path):
            self.plan.append((path, os.readlink(path), readonly, 0))
        elif os.path.exists(path):
            self.plan.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC), readonly, extra_flags))

    def build(self) -> None:
        for path, source, readonly, extra_flags in self.plan:
            target = "." + path
            if isinstance(source, str):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(source, target)
                continue
            fd_path = f"/proc/self/fd/{source}"
            if os.path.isdir(fd_path):
                os.makedirs(target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if not os.path.exists(target):
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
            lx.mount(fd_path, target, None, lx.MS_BIND)
            flags = lx.MS_REMOUNT | lx.MS_BIND | extra_flags | lx.mount_flags_of(os.fstatvfs(source))
            lx.mount(None, target, None, flags | (lx.MS_RDONLY if readonly else 0))
            os.close(source)


def build_root(spec: JailSpec, disk: int | None) -> None:
    """Mount the private root and switch to it. Must run as PID 1 of the new namespaces, before
    taking the mapped identity (``become_mapped_root``). ``disk``: a detached mount (``make_disk``)
    that holds the work folder; without one, the host's work folder is bound."""
    lx.mount(None, "/", None, lx.MS_REC | lx.MS_PRIVATE)
    lx.mount("tmpfs", spec.root, "tmpfs", lx.MS_NOSUID | lx.MS_NODEV, "size=1m,mode=755,uid=0,gid=0")
    builder = _RootBuilder()
    for path in (*_SYSTEM_DIRS, *spec.readonly_dirs, *(f"/etc/{name}" for name in _ETC_ENTRIES)):
        builder.add(path)
    for name in _DEVICES:
        builder.add(f"/dev/{name}", readonly=False, extra_flags=lx.MS_NOSUID)
    if disk is None:
        builder.add(spec.workdir, readonly=False)
        for path in spec.readonly_files:
            builder.add(path)
    os.chdir(spec.root)
    become_mapped_root()
    os.makedirs("./tmp")  # first, since the work folder may live under /tmp
    tmp_options = f"size={int(spec.limits['tmp_mb'])}m,mode=1777,uid=0,gid=0"
    lx.mount("tmpfs", "./tmp", "tmpfs", lx.MS_NOSUID | lx.MS_NODEV, tmp_options)
    builder.build()
    if disk is not None:
        os.makedirs("." + spec.workdir)
        lx.attach_copy(disk, "." + spec.workdir)
        for path in spec.readonly_files:  # bind each onto itself, read-only
            lx.mount("." + path, "." + path, None, lx.MS_BIND)
            lx.mount(None, "." + path, None, lx.MS_REMOUNT | lx.MS_BIND | lx.MS_RDONLY | lx.MS_NOSUID | lx.MS_NODEV)
    os.makedirs("./dev/shm")  # POSIX semaphores and shared memory (multiprocessing's Pool, Queue, Lock)
    lx.mount("tmpfs", "./dev/shm", "tmpfs", lx.MS_NOSUID | lx.MS_NODEV | lx.MS_NOEXEC, tmp_options)
    os.makedirs("./etc", exist_ok=True)
    for name, text in _ACCOUNTS.items():
        with open(f"./etc/{name}", "w") as f:
            f.write(text)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "fd/0"), ("stdout", "fd/1"), ("stderr", "fd/2")):
        os.symlink(link, f"./dev/{name}")
    os.makedirs("./proc")
    lx.mount("proc", "./proc", "proc", lx.MS_NOSUID | lx.MS_NODEV | lx.MS_NOEXEC)
    lx.pivot_root(".", ".")
    lx.umount(".", lx.MNT_DETACH)
    os.chdir("/")
    lx.mount(None, "/", None, lx.MS_REMOUNT | lx.MS_BIND | lx.MS_RDONLY | lx.MS_NOSUID | lx.MS_NODEV)


def confine_without_namespaces(spec: JailSpec) -> dict[str, str]:
    """Landlock in place of the mount and network namespaces (needs ``no_new_privs``): the report's
    ``landlock`` (what holds) or ``landlock_error`` (why nothing does)."""
    read_only = [*_SYSTEM_DIRS, *spec.readonly_dirs, *(f"/etc/{name}" for name in _ETC_ENTRIES)]
    read_write = [spec.workdir, *(f"/dev/{name}" for name in _DEVICES)]
    try:
        return {"landlock": landlock.confine(read_only, read_write)}
    except OSError as exc:
        return {"landlock_error": exc.strerror or str(exc)}


def become_mapped_root() -> None:
    """Take the identity the user-ID map gives (uid 0 inside), so created files have a valid owner."""
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def apply_limits(limits: dict[str, float], *, count_processes: bool) -> list[str]:
    """Set the kernel's per-process limits; return the names of those enforced."""
    mib = 1024 * 1024
    settings = {
        "cpu": (resource.RLIMIT_CPU, int(limits["session_cpu_s"])),
        "memory": (resource.RLIMIT_AS, _address_space_in_use() + int(limits["memory_mb"]) * mib),
        "file size": (resource.RLIMIT_FSIZE, int(limits["file_size_mb"]) * mib),
        "open files": (resource.RLIMIT_NOFILE, int(limits["open_files"])),
        "core dumps": (resource.RLIMIT_CORE, 0),
    }
    if count_processes:  # counted per user namespace; without one it would count all of the user's processes
        settings["processes"] = (resource.RLIMIT_NPROC, int(limits["processes"]))
    for limit, value in settings.values():
        resource.setrlimit(limit, (value, value))
    with open("/proc/self/oom_score_adj") as f:  # set by the monitor (``be_killed_first``), inherited
        first = f.read().strip() == str(OOM_SCORE_ADJ)
    return [*settings, *(["first killed when memory runs out"] if first else [])]


OOM_SCORE_ADJ = 1000


def be_killed_first() -> None:
    """Make the kernel's out-of-memory killer pick this process, and what it forks, before any other.

    Raising the score needs no privilege; it must happen before entering the user namespace, after
    which the process's own /proc files are no longer writable by it."""
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write(str(OOM_SCORE_ADJ))


def _address_space_in_use() -> int:
    """Bytes of address space this process has reserved already (pandas, numpy, Arrow's allocator).

    ``Limits.memory_mb`` counts on top of it, so a limit means what a cell may allocate, not what
    the preloaded libraries happened to reserve (Arrow alone reserves 1 GiB it never touches).
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def clean_environment(workdir: str) -> None:
    os.environ.clear()
    os.environ.update(
        PATH="/usr/local/bin:/usr/bin:/bin",
        HOME=workdir,
        TMPDIR="/tmp",
        LANG="C.UTF-8",
        MPLBACKEND="Agg",
        MPLCONFIGDIR="/tmp/matplotlib",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
