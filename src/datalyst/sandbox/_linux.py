"""Thin wrappers over the Linux system calls the sandbox needs (namespaces, mounts, capabilities).

This is trusted code: it runs in the fork server's children *before* any model code, and
nothing here is reachable from a cell (cells cannot import ctypes; see ``_screen.py``).
"""

from __future__ import annotations

import ctypes
import os
import platform

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def umount(target: str, flags: int = 0) -> None:
    check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    if _SYS_PIVOT_ROOT is None:
        raise OSError(38, f"pivot_root: unsupported architecture {platform.machine()}")
    check(_libc.syscall(_SYS_PIVOT_ROOT, new_root.encode(), put_old.encode()), "pivot_root")


# The mount API of Linux 5.2, numbered alike on every architecture.
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_FSOPEN, _SYS_FSCONFIG, _SYS_FSMOUNT = 428, 429, 430, 431, 432
_FSCONFIG_SET_STRING, _FSCONFIG_CMD_CREATE = 1, 6
_OPEN_TREE_CLONE, _AT_EMPTY_PATH, _MOVE_MOUNT_F_EMPTY_PATH, _AT_FDCWD = 1, 0x1000, 4, -100


def check_fd(result: int, what: str) -> int:
    """``result``, a descriptor a system call returned; OSError when the call failed."""
    if result < 0:
        check(result, what)
    return result


def new_tmpfs(options: dict[str, str]) -> int:
    """A tmpfs that is mounted nowhere yet: a descriptor of its root, to attach with :func:`attach_copy`
    or to reach through ``/proc/self/fd/N`` (needs CAP_SYS_ADMIN in the user namespace of this
    process's mount namespace)."""
    context = check_fd(_libc.syscall(_SYS_FSOPEN, b"tmpfs", ctypes.c_uint(1)), "fsopen tmpfs")  # FSOPEN_CLOEXEC
    try:
        for key, value in options.items():
            check(_libc.syscall(_SYS_FSCONFIG, context, _FSCONFIG_SET_STRING, key.encode(), value.encode(), 0), key)
        check(_libc.syscall(_SYS_FSCONFIG, context, _FSCONFIG_CMD_CREATE, None, None, 0), "create tmpfs")
        return check_fd(_libc.syscall(_SYS_FSMOUNT, context, ctypes.c_uint(1), ctypes.c_uint(0)), "fsmount")
    finally:
        os.close(context)


def attach_copy(mount_fd: int, target: str) -> None:
    """Mount a copy of the detached mount ``mount_fd`` on ``target`` (the original stays detached, so
    it can be copied again by the next process, in its own mount namespace)."""
    flags = _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_EMPTY_PATH
    copy = check_fd(_libc.syscall(_SYS_OPEN_TREE, mount_fd, b"", ctypes.c_uint(flags)), "open_tree")
    try:
        moved = _libc.syscall(_SYS_MOVE_MOUNT, copy, b"", _AT_FDCWD, target.encode(), _MOVE_MOUNT_F_EMPTY_PATH)
        check(moved, f"move_mount {target}")
    finally:
        os.close(copy)


def prctl(option: int, arg2: int = 0) -> None:
    zero = ctypes.c_ulong(0)
    check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), zero, zero, zero), f"prctl {option}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_all_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    for cap in range(last_cap + 1):
        prctl(PR_CAPBSET_DROP, cap)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def mount_flags_of(st: os.statvfs_result) -> int:
    """Mount flags a remount of a bind must keep (the kernel locks them); ``st`` from ``os.fstatvfs``."""
    flags = 0
    for st_flag, ms_flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)):
        if st.f_flag & st_flag:
            flags |= ms_flag
    return flags
