"""A seccomp filter for the jailed worker: the kernel refuses the system calls model code has no use for.

The worker has no capabilities, but without a filter a cell could still create a nested user
namespace (and so gain ``CAP_SYS_ADMIN`` inside it) or reach kernel code that is a frequent source of
exploits (io_uring, keyrings, BPF, perf events, userfaultfd). The filter is a classic BPF program
assembled here, with no library, and installed once in the worker before any model code runs; every
process the worker starts inherits it. A call it refuses fails with ``EPERM`` (``clone3`` with
``ENOSYS``, so the C library falls back to ``clone``, whose flags the filter can read). A call made
through a foreign ABI (32-bit x86 or x32 on x86_64, AArch32 on aarch64) kills the process: the
numbers below would not mean the same calls there.

This is trusted code, like ``_linux.py``: cells cannot import ctypes (``_screen.py``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import Any, NamedTuple

from datalyst.sandbox import _linux as lx

SUMMARY = (
    "seccomp filter (no new namespaces, mounts, io_uring, keyrings, bpf, perf events, userfaultfd, "
    "ptrace, kernel modules or kexec)"
)
"""What the filter refuses, in the words ``Sandbox.isolation`` uses."""

EPERM, ENOSYS = errno.EPERM, errno.ENOSYS
# name: (errno returned, number on x86_64, number on aarch64 or None where the call does not exist).
# Numbers from the kernel's uapi headers (asm/unistd_64.h for x86_64, asm-generic/unistd.h for aarch64).
REFUSED: dict[str, tuple[int, int, int | None]] = {
    # namespaces and mounts: the road to capabilities in a nested user namespace
    "unshare": (EPERM, 272, 97),
    "setns": (EPERM, 308, 268),
    "clone3": (ENOSYS, 435, 435),  # its flags live in memory the filter cannot read
    "mount": (EPERM, 165, 40),
    "umount2": (EPERM, 166, 39),
    "pivot_root": (EPERM, 155, 41),
    "chroot": (EPERM, 161, 51),
    "open_tree": (EPERM, 428, 428),
    "move_mount": (EPERM, 429, 429),
    "fsopen": (EPERM, 430, 430),
    "fsconfig": (EPERM, 431, 431),
    "fsmount": (EPERM, 432, 432),
    "fspick": (EPERM, 433, 433),
    "mount_setattr": (EPERM, 442, 442),
    "open_by_handle_at": (EPERM, 304, 265),
    "name_to_handle_at": (EPERM, 303, 264),
    # kernel interfaces with a record of exploits and no use in data analysis
    "io_uring_setup": (EPERM, 425, 425),
    "io_uring_enter": (EPERM, 426, 426),
    "io_uring_register": (EPERM, 427, 427),
    "keyctl": (EPERM, 250, 219),
    "add_key": (EPERM, 248, 217),
    "request_key": (EPERM, 249, 218),
    "bpf": (EPERM, 321, 280),
    "perf_event_open": (EPERM, 298, 241),
    "userfaultfd": (EPERM, 323, 282),
    "fanotify_init": (EPERM, 300, 262),
    "lookup_dcookie": (EPERM, 212, 18),
    # reaching into other processes
    "ptrace": (EPERM, 101, 117),
    "process_vm_readv": (EPERM, 310, 270),
    "process_vm_writev": (EPERM, 311, 271),
    "pidfd_getfd": (EPERM, 438, 438),
    "process_madvise": (EPERM, 440, 440),
    "kcmp": (EPERM, 312, 272),
    # the kernel, the machine and its clock
    "kexec_load": (EPERM, 246, 104),
    "kexec_file_load": (EPERM, 320, 294),
    "init_module": (EPERM, 175, 105),
    "finit_module": (EPERM, 313, 273),
    "delete_module": (EPERM, 176, 106),
    "reboot": (EPERM, 169, 142),
    "swapon": (EPERM, 167, 224),
    "swapoff": (EPERM, 168, 225),
    "acct": (EPERM, 163, 89),
    "quotactl": (EPERM, 179, 60),
    "quotactl_fd": (EPERM, 443, 443),
    "syslog": (EPERM, 103, 116),
    "iopl": (EPERM, 172, None),
    "ioperm": (EPERM, 173, None),
    "settimeofday": (EPERM, 164, 170),
    "clock_settime": (EPERM, 227, 112),
    "clock_adjtime": (EPERM, 305, 266),
    "adjtimex": (EPERM, 159, 171),
}
# Calls refused only for some first arguments; both read just its low 32 bits, as the kernel does.
CLONE = (56, 220)
PERSONALITY = (135, 92)
_SECCOMP = (317, 277)
NAMESPACE_FLAGS = (
    lx.CLONE_NEWNS
    | lx.CLONE_NEWCGROUP
    | lx.CLONE_NEWUTS
    | lx.CLONE_NEWIPC
    | lx.CLONE_NEWUSER
    | lx.CLONE_NEWPID
    | lx.CLONE_NEWNET
)
PERSONALITY_ALLOWED = (0, 0xFFFFFFFF)
"""personality(0) keeps Linux's default; 0xffffffff only asks which personality is in force."""


class Arch(NamedTuple):
    audit: int
    """AUDIT_ARCH_* value the kernel puts in ``seccomp_data.arch``."""
    column: int
    """Which number of a REFUSED entry applies (0: x86_64, 1: aarch64)."""
    x32_bit: int
    """Bit that marks a call through the x32 ABI (0 where there is none)."""


ARCHES = {
    "x86_64": Arch(audit=0xC000003E, column=0, x32_bit=0x40000000),
    "aarch64": Arch(audit=0xC00000B7, column=1, x32_bit=0),
}

# Classic BPF, as seccomp runs it (linux/filter.h, linux/seccomp.h).
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
NR_OFFSET, ARCH_OFFSET, ARG0_OFFSET = 0, 4, 16  # fields of struct seccomp_data (arguments little-endian)
RET_ALLOW, RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000


def ret_errno(err: int) -> int:
    return _RET_ERRNO | err


class Insn(NamedTuple):
    """One ``struct sock_filter``: jumps are relative to the next instruction."""

    code: int
    jt: int
    jf: int
    k: int


def _ld(offset: int) -> Insn:
    return Insn(LD_ABS_W, 0, 0, offset)


def _ret(action: int) -> Insn:
    return Insn(RET, 0, 0, action)


def program(machine: str) -> list[Insn]:
    """The filter for ``machine`` (``platform.machine()``); OSError for an architecture it does not know."""
    arch = ARCHES.get(machine)
    if arch is None:
        raise OSError(errno.ENOTSUP, f"no seccomp filter for the {machine} architecture")
    insns = [_ld(ARCH_OFFSET), Insn(JEQ, 1, 0, arch.audit), _ret(RET_KILL_PROCESS), _ld(NR_OFFSET)]
    if arch.x32_bit:
        insns += [Insn(JGE, 0, 1, arch.x32_bit), _ret(RET_KILL_PROCESS)]
    for err, *numbers in REFUSED.values():
        if (nr := numbers[arch.column]) is not None:
            insns += [Insn(JEQ, 0, 1, nr), _ret(ret_errno(err))]
    insns += [  # clone: refused when its flags ask for a new namespace
        Insn(JEQ, 0, 4, CLONE[arch.column]),
        _ld(ARG0_OFFSET),
        Insn(JSET, 0, 1, NAMESPACE_FLAGS),
        _ret(ret_errno(EPERM)),
        _ret(RET_ALLOW),
    ]
    insns += [  # personality: refused unless it keeps the default or only asks
        Insn(JEQ, 0, 5, PERSONALITY[arch.column]),
        _ld(ARG0_OFFSET),
        Insn(JEQ, 2, 0, PERSONALITY_ALLOWED[0]),
        Insn(JEQ, 1, 0, PERSONALITY_ALLOWED[1]),
        _ret(ret_errno(EPERM)),
        _ret(RET_ALLOW),
    ]
    return [*insns, _ret(RET_ALLOW)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_SET_MODE_FILTER = 1
# TSYNC: every thread of the process gets the filter (a forked worker has one, but this does not rely on it).
# SPEC_ALLOW: no speculative-store-bypass mitigation forced on the worker; the attacker is the process itself,
# so it protects nothing there and costs numeric code speed on kernels that would force it. Both flags are older
# (3.17, 4.17) than the pidfds the host already needs (5.3).
_FLAGS = 0x1 | 0x4
_libc = ctypes.CDLL(None, use_errno=True)


def install() -> None:
    """Install the filter on this process, for good; OSError if the kernel refuses it.

    The process must have set ``no_new_privs`` (or hold ``CAP_SYS_ADMIN``).
    """
    machine = platform.machine()
    insns = program(machine)
    code = b"".join(struct.pack("=HBBI", *insn) for insn in insns)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(insns), ctypes.cast(buffer, ctypes.c_void_p))
    nr = _SECCOMP[ARCHES[machine].column]
    result = _libc.syscall(
        ctypes.c_long(nr), ctypes.c_ulong(_SET_MODE_FILTER), ctypes.c_ulong(_FLAGS), ctypes.byref(fprog)
    )
    if result != 0:  # -1 with errno, or the ID of a thread the filter could not be given to
        err = ctypes.get_errno() if result == -1 else errno.EBUSY
        raise OSError(err, f"seccomp: {os.strerror(err)}")


def install_and_report() -> dict[str, bool | str]:
    """Install the filter; the worker's report entries saying whether it is in force, and if not why."""
    try:
        install()
    except OSError as exc:
        return {"seccomp": False, "seccomp_error": exc.strerror or str(exc)}
    return {"seccomp": True}


def describe(report: dict[str, Any]) -> str:
    """The words for ``Sandbox.isolation``, from a worker's report."""
    if report.get("seccomp") is True:
        return SUMMARY
    return f"NO seccomp filter ({report.get('seccomp_error', 'the worker did not report one')})"
