"""Landlock: what stands in for the mount and network namespaces when a worker runs without them.

Landlock (Linux 5.13 and later) lets an unprivileged process give up access for good. A worker that
runs degraded (no user namespaces, ``require_isolation=False``) confines itself before any cell
runs: it may read the system and Python folders and a few files of ``/etc``, read and write its
work folder and the usual devices, and nothing else on the host's filesystem; where the kernel
knows them, it may neither connect nor bind TCP sockets (ABI 4), nor signal processes or reach
abstract Unix sockets outside its own domain (ABI 6). Landlock also keeps it from reading other
processes' ``/proc/PID/environ``. It does not cover UDP, Unix sockets with a path, or seeing
other processes, which only the namespaces hide.
"""

from __future__ import annotations

import ctypes
import os

from datalyst.sandbox import _linux as lx

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
"""Every filesystem right each ABI knows (execute ... make_sym; then refer, truncate, ioctl_dev)."""
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | (1 << 14) | (1 << 15)
"""The rights that apply to a file rather than a folder (with truncate and ioctl_dev)."""
_NET_TCP = 0b11  # bind and connect (ABI 4)
_SCOPE_ALL = 0b11  # abstract Unix sockets and signals (ABI 6)

_libc = ctypes.CDLL(None, use_errno=True)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def abi_version() -> int:
    """The Landlock ABI this kernel offers (0: none, or switched off)."""
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(version, 0)


def confine(read_only: list[str], read_write: list[str]) -> str:
    """Give up every filesystem access but reading ``read_only`` and using ``read_write`` (paths that do not
    exist are skipped), and TCP and signals out of the domain where the kernel can; needs ``no_new_privs``.
    Returns what is enforced, for ``sb.isolation``; OSError where Landlock is unavailable."""
    abi = abi_version()
    if abi == 0:
        raise OSError(ctypes.get_errno() or 38, "Landlock is not available in this kernel")
    everything = _FS_BY_ABI[max(k for k in _FS_BY_ABI if k <= abi)]
    attr = _RulesetAttr(everything, _NET_TCP if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0)
    size = ctypes.c_size_t(ctypes.sizeof(attr))
    ruleset = lx.check_fd(_libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0), "landlock_create_ruleset")
    try:
        for paths, rights in ((read_only, _EXECUTE | _READ_FILE | _READ_DIR), (read_write, everything)):
            for path in paths:
                _allow(ruleset, path, rights)
        lx.check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    covered = ["files (read-only system and Python, read-write work folder)"]
    covered += ["TCP"] if abi >= 4 else []
    covered += ["signals and abstract sockets outside the sandbox"] if abi >= 6 else []
    return f"Landlock ABI {abi}: {', '.join(covered)}"


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        rule = _PathBeneath(rights if os.path.isdir(path) else rights & _FILE_RIGHTS, fd)
        added = _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
        lx.check(added, f"landlock rule {path}")
    finally:
        os.close(fd)
