"""The seccomp filter of the jailed worker: its program, read by a small BPF interpreter, and the real kernel.

The first half needs no kernel: it runs the assembled program on chosen (architecture, call, arguments)
and checks the uapi headers agree with the filter's syscall numbers. The second half runs hostile cells
(screen off, so ctypes works) in real sandboxes and checks the kernel refuses them, then runs the
ordinary work of an agent (pandas, matplotlib, SQLite, threads, processes) under the filter.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sqlite3
import struct
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from datalyst.sandbox import Limits, Sandbox
from datalyst.sandbox import _linux as lx
from datalyst.sandbox import _seccomp as sc

EPERM, ENOSYS = sc.ret_errno(sc.EPERM), sc.ret_errno(sc.ENOSYS)
NAMESPACE_FLAGS = {
    "newns": lx.CLONE_NEWNS,
    "newcgroup": lx.CLONE_NEWCGROUP,
    "newuts": lx.CLONE_NEWUTS,
    "newipc": lx.CLONE_NEWIPC,
    "newuser": lx.CLONE_NEWUSER,
    "newpid": lx.CLONE_NEWPID,
    "newnet": lx.CLONE_NEWNET,
}
SIGCHLD = 17
THREAD_FLAGS = 0x3D0F00  # what glibc's pthread_create passes to clone (VM, FS, FILES, SIGHAND, THREAD, ...)
# Calls the filter must let through, by architecture: read, write, openat, mmap, execve, futex, seccomp (only
# ever stricter), and on x86_64 fork and vfork.
ALLOWED = {
    "x86_64": [0, 1, 257, 9, 59, 202, 317, 57, 58],
    "aarch64": [63, 64, 56, 222, 221, 98, 277],
}
FOREIGN = {"x86_64": 0x40000003, "aarch64": 0x40000028}  # AUDIT_ARCH_I386, AUDIT_ARCH_ARM
HEADERS = {
    "x86_64": ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"],
    "aarch64": ["/usr/include/asm-generic/unistd.h"],
}
MACHINES = pytest.mark.parametrize("machine", sorted(sc.ARCHES))


# ---------------------------------------------------------------- the program, without a kernel


def decide(insns: list[sc.Insn], arch: int, nr: int, arg0: int = 0) -> tuple[int, bool]:
    """What the filter returns for one call, and whether it read an argument to decide."""
    data = struct.pack("<IIQ6Q", nr & 0xFFFFFFFF, arch, 0, arg0, 0, 0, 0, 0, 0)  # struct seccomp_data
    acc, pc, read_argument = 0, 0, False
    while True:
        insn = insns[pc]
        pc += 1
        if insn.code == sc.RET:
            return insn.k, read_argument
        if insn.code == sc.LD_ABS_W:
            assert insn.k in (sc.NR_OFFSET, sc.ARCH_OFFSET, sc.ARG0_OFFSET)
            (acc,) = struct.unpack_from("<I", data, insn.k)
            read_argument |= insn.k == sc.ARG0_OFFSET
            continue
        taken = {sc.JEQ: acc == insn.k, sc.JGE: acc >= insn.k, sc.JSET: bool(acc & insn.k)}[insn.code]
        pc += insn.jt if taken else insn.jf


def number(machine: str, name: str) -> int | None:
    return sc.REFUSED[name][1 + sc.ARCHES[machine].column]


@MACHINES
def test_every_listed_call_is_refused_with_its_errno(machine):
    arch = sc.ARCHES[machine]
    insns = sc.program(machine)
    for name, (err, *_) in sc.REFUSED.items():
        if (nr := number(machine, name)) is not None:
            assert decide(insns, arch.audit, nr) == (sc.ret_errno(err), False), name
    assert sc.REFUSED["clone3"][0] == sc.ENOSYS and sc.REFUSED["unshare"][0] == sc.EPERM


@MACHINES
def test_ordinary_calls_are_allowed_without_reading_arguments(machine):
    arch = sc.ARCHES[machine]
    insns = sc.program(machine)
    for nr in ALLOWED[machine]:
        assert decide(insns, arch.audit, nr, arg0=0xFFFFFFFF) == (sc.RET_ALLOW, False), nr
    # Only clone and personality look at an argument, so the kernel can cache "allowed" for every other call.
    column = arch.column
    for nr in range(600):
        _, read_argument = decide(insns, arch.audit, nr)
        assert read_argument == (nr in (sc.CLONE[column], sc.PERSONALITY[column])), nr


@MACHINES
def test_clone_is_refused_only_with_a_namespace_flag(machine):
    arch = sc.ARCHES[machine]
    insns = sc.program(machine)
    clone = sc.CLONE[arch.column]
    assert decide(insns, arch.audit, clone, SIGCHLD)[0] == sc.RET_ALLOW  # fork, multiprocessing
    assert decide(insns, arch.audit, clone, THREAD_FLAGS)[0] == sc.RET_ALLOW  # threads
    assert decide(insns, arch.audit, clone, 1 << 32 | SIGCHLD)[0] == sc.RET_ALLOW  # the kernel ignores high bits
    for name, flag in NAMESPACE_FLAGS.items():
        assert decide(insns, arch.audit, clone, flag | SIGCHLD)[0] == EPERM, name


@MACHINES
def test_personality_may_only_be_queried_or_reset(machine):
    arch = sc.ARCHES[machine]
    insns = sc.program(machine)
    personality = sc.PERSONALITY[arch.column]
    for allowed in (0, 0xFFFFFFFF):
        assert decide(insns, arch.audit, personality, allowed)[0] == sc.RET_ALLOW
    for change in (0x0040000, 0x0008, 0x0400000):  # ADDR_NO_RANDOMIZE, PER_LINUX32, READ_IMPLIES_EXEC
        assert decide(insns, arch.audit, personality, change)[0] == EPERM, hex(change)


@MACHINES
def test_a_foreign_abi_kills_the_process(machine):
    insns = sc.program(machine)
    assert decide(insns, FOREIGN[machine], 0)[0] == sc.RET_KILL_PROCESS
    if machine == "x86_64":  # x32: the same calls, numbered with bit 30 set
        assert decide(insns, sc.ARCHES[machine].audit, 0x40000000 | 272)[0] == sc.RET_KILL_PROCESS


def test_an_unknown_architecture_is_an_os_error():
    with pytest.raises(OSError, match="no seccomp filter for the riscv64 architecture"):
        sc.program("riscv64")


@MACHINES
def test_syscall_numbers_match_the_kernel_headers(machine):
    path = next((p for p in HEADERS[machine] if os.path.exists(p)), None)
    if path is None:
        pytest.skip(f"no uapi header for {machine} on this machine")
    defined = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", Path(path).read_text())}
    column = sc.ARCHES[machine].column
    expected = {name: number(machine, name) for name in sc.REFUSED}
    expected |= {"clone": sc.CLONE[column], "personality": sc.PERSONALITY[column]}
    for name, nr in expected.items():
        if nr is None:
            assert name not in defined, f"{name} exists on {machine}"
        elif name in defined:  # a call removed from newer headers keeps its number, and stays refused
            assert defined[name] == nr, name
    numbers = [nr for nr in expected.values() if nr is not None]
    assert len(numbers) == len(set(numbers)), "two calls share a number"


def test_a_worker_that_cannot_install_the_filter_says_so(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # in a child, so that nothing here can ever filter the test process itself
        os.write(write_end, json.dumps(sc.install_and_report()).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end) as f:
        report = json.load(f)
    assert report == {"seccomp": False, "seccomp_error": "no seccomp filter for the riscv64 architecture"}
    assert sc.describe(report) == "NO seccomp filter (no seccomp filter for the riscv64 architecture)"
    assert sc.describe({"seccomp": True}) == sc.SUMMARY


# ---------------------------------------------------------------- the real kernel, from a cell

LIMITS = Limits(wall_s=20, cpu_s=20, memory_mb=2048)
ATTACK_CELL = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(256)
NUMBERS = {numbers}

def syscall(name, *args):
    return libc.syscall(ctypes.c_long(NUMBERS[name]), *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))

me = os.getpid()
result = {call}
if os.getpid() != me:  # a clone that was not refused: the child must not run the rest of the cell
    os._exit(0)
print(errno.errorcode[ctypes.get_errno()] if result == -1 else f'allowed ({{result}})')
"""
NEWUSER, NEWNET = lx.CLONE_NEWUSER, lx.CLONE_NEWNET
ATTACKS = [  # (what the cell calls, the errno name it must end with)
    pytest.param(f"libc.unshare({NEWUSER})", "EPERM", id="unshare-user-namespace"),
    pytest.param(f"libc.unshare({NEWUSER | NEWNET})", "EPERM", id="unshare-user-and-network-namespaces"),
    pytest.param(f"libc.unshare({NEWNET})", "EPERM", id="unshare-network-namespace"),
    pytest.param("syscall('setns', -1, 0)", "EPERM", id="setns"),
    pytest.param(f"syscall('clone', {NEWUSER | SIGCHLD}, 0, 0, 0, 0)", "EPERM", id="clone-nested-user-namespace"),
    pytest.param("syscall('clone3', buf, 88)", "ENOSYS", id="clone3"),
    pytest.param("libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)", "EPERM", id="mount"),
    pytest.param("libc.umount2(b'/proc', 2)", "EPERM", id="umount2"),
    pytest.param("syscall('fsopen', b'tmpfs', 0)", "EPERM", id="fsopen"),
    pytest.param("syscall('io_uring_setup', 1, buf)", "EPERM", id="io_uring_setup"),
    pytest.param("syscall('keyctl', 0, -3, 0)", "EPERM", id="keyctl-session-keyring"),
    pytest.param("syscall('add_key', b'user', b'k', b'v', 1, -3)", "EPERM", id="add_key"),
    pytest.param("syscall('bpf', 0, buf, 72)", "EPERM", id="bpf"),
    pytest.param("syscall('perf_event_open', buf, 0, -1, -1, 0)", "EPERM", id="perf_event_open"),
    pytest.param("syscall('userfaultfd', 0)", "EPERM", id="userfaultfd"),
    pytest.param("libc.ptrace(0, 0, 0, 0)", "EPERM", id="ptrace-traceme"),
    pytest.param("syscall('process_vm_readv', 1, buf, 1, buf, 1, 0)", "EPERM", id="process_vm_readv"),
    pytest.param("libc.personality(0x0040000)", "EPERM", id="personality-no-randomize"),
]


def attack_cell(call: str) -> str:
    column = sc.ARCHES[platform.machine()].column
    numbers = {name: entry[1 + column] for name, entry in sc.REFUSED.items()} | {"clone": sc.CLONE[column]}
    return ATTACK_CELL.format(numbers=numbers, call=call)


@pytest.fixture
def jailed() -> Iterator[Sandbox]:
    """A fully isolated sandbox with the code screen off, so cells can use ctypes."""
    with Sandbox(limits=LIMITS, screen_code=False, require_isolation=True) as sb:
        yield sb


@pytest.mark.parametrize("call, refusal", ATTACKS)
def test_the_kernel_refuses_the_call_from_a_cell(jailed, call, refusal):
    result = jailed.run_python(attack_cell(call))
    assert result.ok and result.stdout == f"{refusal}\n", result.render()
    after = jailed.run_python("print(1 + 1)")
    assert after.ok and after.stdout == "2\n" and not after.state_lost, after.render()


@pytest.mark.skipif(not hasattr(os, "unshare"), reason="os.unshare needs Python 3.12")
def test_os_unshare_is_refused(jailed):
    result = jailed.run_python("import os\nos.unshare(os.CLONE_NEWUSER)")
    assert result.error is not None and result.error.ename == "PermissionError", result.render()
    assert jailed.run_python("print(1 + 1)").stdout == "2\n"


def test_the_filter_is_listed_in_the_isolation_report(jailed):
    assert sc.SUMMARY in jailed.isolation


def test_the_degraded_worker_is_filtered_too():
    with Sandbox(limits=LIMITS, screen_code=False, use_namespaces=False, require_isolation=False) as sb:
        assert sb.isolation.startswith("DEGRADED") and sc.SUMMARY in sb.isolation
        for call in (f"libc.unshare({NEWUSER})", "libc.personality(0x0040000)"):
            result = sb.run_python(attack_cell(call))
            assert result.stdout == "EPERM\n", result.render()
        assert sb.run_python("print(1 + 1)").stdout == "2\n"


# ---------------------------------------------------------------- ordinary work under the filter


EVERYDAY = [  # (cell, what it prints)
    (
        """
        import threading
        out = []
        threads = [threading.Thread(target=lambda i=i: out.append(i * i)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(sorted(out))
        """,
        "[0, 1, 4, 9]\n",
    ),
    (
        """
        import subprocess
        print(subprocess.run(['echo', 'x'], capture_output=True, text=True).stdout, end='')
        """,
        "x\n",
    ),
    (  # a Process and a Pipe: a Pool's semaphores need /dev/shm, which the jail does not have
        """
        import multiprocessing
        ctx = multiprocessing.get_context('fork')
        receiver, sender = ctx.Pipe()
        child = ctx.Process(target=sender.send, args=([1, 2],))
        child.start()
        print(receiver.recv())
        child.join()
        print(child.exitcode)
        """,
        "[1, 2]\n0\n",
    ),
    (
        """
        import os
        pid = os.fork()
        if pid == 0:
            os._exit(5)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """,
        "5\n",
    ),
    (
        """
        import numpy as np
        from scipy import stats
        from sklearn.linear_model import LinearRegression
        x = np.arange(10.0)
        y = 2 * x + 1
        fit = LinearRegression().fit(x[:, None], y)
        print(round(stats.pearsonr(x, y)[0], 6), np.round(fit.coef_, 6), np.linalg.solve([[2.0]], [4.0]))
        """,
        "1.0 [2.] [2.]\n",
    ),
]


def test_everyday_cells_work_under_the_filter(jailed):
    for code, expected in EVERYDAY:
        result = jailed.run_python(textwrap.dedent(code))
        assert result.ok and result.stdout == expected, result.render()


def test_a_dabench_trajectory_works_under_the_filter(dabench_tables, tmp_path):
    table = dabench_tables / "titanic.csv"
    database = tmp_path / "titanic.sqlite"
    with sqlite3.connect(database) as con:
        con.execute("CREATE TABLE fares (pclass INTEGER, fare REAL)")
        con.executemany("INSERT INTO fares VALUES (?, ?)", [(1, 80.0), (1, 60.0), (3, 8.0)])
    con.close()
    with Sandbox(files=[table, database], limits=Limits(wall_s=60, cpu_s=60)) as sb:
        assert sc.SUMMARY in sb.isolation
        cells = [
            ("import pandas as pd\ndf = pd.read_csv('titanic.csv')\nprint(df.shape)", "(891, 12)\n"),
            ("print(df.groupby('Pclass')['Survived'].mean().round(3).to_dict())", "{1: 0.63, 2: 0.473, 3: 0.242}\n"),
            ("import matplotlib.pyplot as plt\ndf['Age'].plot(kind='hist')\nprint(df['Age'].isna().sum())", "177\n"),
            (
                textwrap.dedent("""\
                    import sqlite3
                    con = sqlite3.connect('scratch.sqlite')
                    df.to_sql('people', con, index=False)
                    print(con.execute('SELECT COUNT(*) FROM people WHERE Survived = 1').fetchone()[0])"""),
                "342\n",
            ),
        ]
        results = [sb.run_python(code) for code, _ in cells]
        for result, (_, expected) in zip(results, cells, strict=True):
            assert result.ok and result.stdout == expected, result.render()
        assert results[2].files_created == ["cell-3-figure-1.png"]
        query = sb.run_sql("SELECT pclass, AVG(fare) AS fare FROM fares GROUP BY pclass", output_path="fares.csv")
        assert query.error is None and query.n_rows == 2, query
        result = sb.run_python("print(pd.read_csv('fares.csv').to_dict('list'))")
        assert result.stdout == "{'pclass': [1, 3], 'fare': [70.0, 8.0]}\n", result.render()
