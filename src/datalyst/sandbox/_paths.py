"""Open a file of a work folder on the host without following any link a cell planted there.

A cell can leave symbolic links anywhere in its work folder, pointing at any path of the host
(``os.symlink("/", "figs")``), and can name any path in its reply. So the host never opens such a
path with a plain ``open``: every component is resolved inside the folder and none may be a link.
Where the kernel has ``openat2`` (Linux 5.6) it does this in one call (``RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS``); elsewhere (older kernels, containers whose seccomp profile refuses it) the
path is walked one component at a time, each opened with ``O_NOFOLLOW`` relative to the last.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import BinaryIO

_SYS_OPENAT2 = 437  # the same on every architecture since Linux 5.6
_AT_FDCWD = -100
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
"""``O_NONBLOCK``: a FIFO planted under a figure's name opens at once (and is then refused) instead of
waiting forever for a writer."""
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""``O_PATH``: a folder a cell left without read permission can still be crossed, as ``openat2`` crosses it."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_openat2_works: bool | None = None
"""Whether ``openat2`` can be called here (None: not tried yet)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def open_in_workdir(workdir: str, relpath: str) -> BinaryIO:
    """Open the regular file ``relpath`` of the folder ``workdir`` for reading.

    Raises OSError when the path is absolute, has a ``..`` component, passes through or ends at a
    symbolic link, or names anything but a regular file.
    """
    parts = [part for part in relpath.split("/") if part not in ("", ".")]
    if relpath.startswith("/") or not parts or ".." in parts:
        raise OSError(errno.EINVAL, f"{relpath!r} is not a file name inside the work folder")
    root = os.open(workdir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _openat2(root, "/".join(parts)) if openat2_available() else _walk(root, parts)
    finally:
        os.close(root)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{relpath!r} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def openat2_available() -> bool:
    """Whether the kernel's ``openat2`` can be used (tried once, on the current folder)."""
    global _openat2_works
    if _openat2_works is None:
        try:
            os.close(_openat2(_AT_FDCWD, ".", os.O_PATH | os.O_CLOEXEC))
            _openat2_works = True
        except OSError:  # ENOSYS before Linux 5.6; EPERM (or ENOSYS) from a container's seccomp profile
            _openat2_works = False
    return _openat2_works


def _openat2(dir_fd: int, path: str, flags: int = _READ_FLAGS) -> int:
    how = _OpenHow(flags=flags, mode=0, resolve=_RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


def _walk(dir_fd: int, parts: list[str]) -> int:
    """Open ``parts`` below ``dir_fd`` one component at a time, never following a link."""
    folders: list[int] = []
    try:
        for part in parts[:-1]:
            dir_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            folders.append(dir_fd)
        return os.open(parts[-1], _READ_FLAGS, dir_fd=dir_fd)
    finally:
        for fd in folders:
            os.close(fd)
