"""How much does isolation cost? Times and memory of one 10-cell pandas analysis, five ways.

    (a) exec     in-process ``exec`` in one dict, no isolation at all (the floor)
    (b) session  datalyst Sandbox, mode="session": one jailed worker keeps the variables
    (c) replay   datalyst Sandbox, mode="replay": a fresh jailed worker per cell re-runs the earlier cells
    (d) respawn  a new ``python -c`` per step that re-runs all the code so far (DataMind style)
    (e) jupyter  one Jupyter kernel per trajectory, driven by jupyter_client

For each: total time of the trajectory including start-up, median cell latency, and the memory
an idle trajectory holds after its 10 cells (sum of PSS over its processes). Then ``--concurrency``
trajectories at once for (b) and (e) (and, with ``--concurrent-baselines``, (c) and (d)):
wall time for all of them and the memory of all of them idle and still open.

Run from the repo root, with the ``bench`` extra installed (jupyter-client, ipykernel, psutil)::

    . .venv/bin/activate
    python benchmarks/sandbox_bench.py                     # 3 repeats, 32 concurrent: ~3 min on 2 cores
    python benchmarks/sandbox_bench.py --repeats 5 --concurrency 16 --json bench.json

The table is read from ``<repo>/../shared/benchmarks/dabench/tables/abalone.csv``; point the
environment variable ``DATALYST_BENCHMARKS`` at another ``benchmarks`` folder to move it.
Memory is PSS (proportional set size): shared pages are split evenly between the processes that
map them, so summing PSS over processes never counts a shared page twice. Needs Linux.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import io
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

# ----------------------------------------------------------------------------- configuration

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--repeats", type=int, default=3, help="runs of each single-trajectory measurement (median)")
parser.add_argument("--concurrency", type=int, default=32, help="trajectories run at once for (b) and (e)")
parser.add_argument("--table", default="abalone.csv", help="file name under dabench/tables")
parser.add_argument(
    "--concurrent-baselines",
    action="store_true",
    help="also run (c) replay and (d) respawn concurrently ((d) alone takes ~2 min at 32 on 2 cores)",
)
parser.add_argument("--skip-concurrent", action="store_true", help="only the single-trajectory measurements")
parser.add_argument("--json", metavar="PATH", help="also write all raw numbers to this JSON file")
args = parser.parse_args()

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = Path(os.environ.get("DATALYST_BENCHMARKS", REPO.parent / "shared" / "benchmarks"))
TABLE = BENCHMARKS / "dabench" / "tables" / args.table
if not TABLE.is_file():
    sys.exit(f"{TABLE}: not found; set DATALYST_BENCHMARKS to the folder that holds dabench/tables")

CELL_TIMEOUT_S = 120.0
MiB = 1 << 20

# A realistic exploratory analysis: every cell prints its result and uses names from earlier cells.
# (Written for abalone.csv; every cell prints, so nothing relies on notebook-style echo of the last line.)
CELLS = [
    'import pandas as pd\ndf = pd.read_csv("abalone.csv")\nprint(df.shape)',
    "print(df.head())",
    "print(df.describe().round(3))",
    'by_sex = df.groupby("Sex").mean(numeric_only=True)\nprint(by_sex.round(3))',
    'ring_counts = df["Rings"].value_counts().sort_index()\nprint(ring_counts.head(15))',
    'df["Volume"] = df["Length"] * df["Diameter"] * df["Height"]\n'
    'df["Age"] = df["Rings"] + 1.5\n'
    'print(df[["Volume", "Age"]].describe().round(4))',
    'adults = df[(df["Sex"] != "I") & (df["Age"] > 10)]\n'
    'print(len(adults), round(adults["Whole weight"].mean(), 4))',
    'corr = df.drop(columns="Sex").corr()\nprint(corr["Age"].sort_values(ascending=False).round(3))',
    'df["AgeBand"] = pd.cut(df["Age"], bins=[0, 8, 12, 16, 40], labels=["young", "adult", "mature", "old"])\n'
    'pivot = df.pivot_table(index="Sex", columns="AgeBand", values="Whole weight", aggfunc="mean", '
    "observed=False)\n"
    "print(pivot.round(3))",
    'top = adults.sort_values("Volume", ascending=False).head(10)\n'
    'print(top[["Sex", "Length", "Volume", "Age"]].to_string(index=False))\n'
    'print("heaviest band:", pivot.mean().idxmax())',
]

# Cells read the table by its bare name, as they do in the sandbox's work folder: the other
# methods run in a scratch folder holding a copy of it.
SCRATCH = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
shutil.copyfile(TABLE, SCRATCH / "abalone.csv")

# ----------------------------------------------------------------------------- helpers


def pss(pids):
    """Sum of PSS over the given processes, in bytes (processes that are gone count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            total += psutil.Process(pid).memory_full_info().pss
    return total


def forkserver_pid():
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if "datalyst.sandbox._forkserver" in " ".join(child.cmdline()):
                return child.pid
    return None


def sandbox_pids():
    """Live descendants of the fork server: the monitor and the worker of every open sandbox."""
    pid = forkserver_pid()
    if pid is None:
        return []
    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


def descendants(pid):
    with contextlib.suppress(psutil.NoSuchProcess):
        return [pid] + [p.pid for p in psutil.Process(pid).children(recursive=True)]
    return []


class Run:
    """One trajectory's timings (seconds) and outputs."""

    def __init__(self):
        self.startup = 0.0
        self.cells: list[float] = []
        self.outputs: list[str] = []

    @property
    def total(self):
        return self.startup + sum(self.cells)


def timed(run, fn, code):
    t0 = time.perf_counter()
    out = fn(code)
    run.cells.append(time.perf_counter() - t0)
    run.outputs.append(out)


# ----------------------------------------------------------------------------- (a) in-process exec


def traj_exec():
    """One shared namespace in this process; memory is this process's PSS growth."""
    gc.collect()
    before = pss([os.getpid()])
    run = Run()
    t0 = time.perf_counter()
    namespace = {"__name__": "__main__"}
    run.startup = time.perf_counter() - t0

    def cell(code):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, "<cell>", "exec"), namespace)
        return buf.getvalue()

    cwd = os.getcwd()
    os.chdir(SCRATCH)
    try:
        for code in CELLS:
            timed(run, cell, code)
    finally:
        os.chdir(cwd)
    memory = pss([os.getpid()]) - before
    del namespace
    gc.collect()
    return run, memory


# ----------------------------------------------------------------------------- (b, c) datalyst Sandbox

from datalyst.sandbox import Limits, Sandbox, SandboxPool  # noqa: E402

LIMITS = Limits(wall_s=60, cpu_s=60)


def sandbox_cell(sb):
    def cell(code):
        r = sb.run_python(code)
        if r.error is not None:
            raise RuntimeError(f"sandbox cell failed: {r.error.ename}: {r.error.evalue}")
        return r.stdout

    return cell


def traj_sandbox(mode):
    run = Run()
    t0 = time.perf_counter()
    with Sandbox(files=[TABLE], mode=mode, limits=LIMITS) as sb:
        sb.prestart()
        run.startup = time.perf_counter() - t0
        cell = sandbox_cell(sb)
        for code in CELLS:
            timed(run, cell, code)
        memory = pss(sandbox_pids())
    return run, memory


# ----------------------------------------------------------------------------- (d) fresh python per step


def respawn_step(code_so_far):
    proc = subprocess.run(
        [sys.executable, "-c", code_so_far],
        cwd=SCRATCH,
        capture_output=True,
        text=True,
        timeout=CELL_TIMEOUT_S,
        env={**os.environ, "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"respawned python failed: {proc.stderr[-2000:]}")
    return proc.stdout


def traj_respawn():
    """Step k runs cells 1..k in a new interpreter; nothing stays alive between steps."""
    run = Run()
    for k in range(1, len(CELLS) + 1):
        timed(run, respawn_step, "\n".join(CELLS[:k]))
    return run, 0


# ----------------------------------------------------------------------------- (e) Jupyter kernel

from jupyter_client.manager import KernelManager  # noqa: E402

# Quiet kernels: no debugger warning about frozen modules, same thread caps as the sandbox.
KERNEL_ENV = {
    **os.environ,
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    "MPLBACKEND": "Agg",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
}


class Kernel:
    def __init__(self):
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(SCRATCH), env=KERNEL_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=CELL_TIMEOUT_S)

    @property
    def pid(self):
        return self.km.provisioner.process.pid

    def execute(self, code):
        """Send one cell; collect its stream output from iopub until the kernel goes idle."""
        msg_id = self.kc.execute(code, store_history=False)
        out = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=CELL_TIMEOUT_S)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                raise RuntimeError(f"kernel cell failed: {content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                break
        while self.kc.get_shell_msg(timeout=CELL_TIMEOUT_S)["parent_header"].get("msg_id") != msg_id:
            pass
        return "".join(out)

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def traj_jupyter():
    run = Run()
    t0 = time.perf_counter()
    kernel = Kernel()
    run.startup = time.perf_counter() - t0
    try:
        for code in CELLS:
            timed(run, kernel.execute, code)
        memory = pss(descendants(kernel.pid))
    finally:
        kernel.close()
    return run, memory


# ----------------------------------------------------------------------------- concurrent runs


def concurrent_sandbox(mode, n):
    """n trajectories through one SandboxPool; memory is read once all n are idle and still open."""
    memory = {}

    async def main():
        barrier = asyncio.Barrier(n + 1)

        async def trajectory(pool):
            async with pool.sandbox([TABLE], mode=mode, limits=LIMITS) as sb:
                for code in CELLS:
                    r = await sb.arun_python(code)
                    if r.error is not None:
                        raise RuntimeError(f"sandbox cell failed: {r.error.ename}: {r.error.evalue}")
                await barrier.wait()  # all n done ...
                await barrier.wait()  # ... and measured

        async with SandboxPool(max_concurrent=n) as pool:
            t0 = time.perf_counter()
            tasks = [asyncio.create_task(trajectory(pool)) for _ in range(n)]
            await barrier.wait()
            wall = time.perf_counter() - t0
            pids = sandbox_pids()
            memory.update(procs=len(pids), pss=pss(pids), forkserver=pss([forkserver_pid()]))
            await barrier.wait()
            await asyncio.gather(*tasks)
        return wall

    wall = asyncio.run(main())
    return wall, memory


def run_threads(n, body):
    """Run body(barrier) in n threads; return wall time until all n reach the barrier, plus errors."""
    barrier = threading.Barrier(n + 1)
    errors = queue.Queue()

    def target():
        try:
            body(barrier)
        except BaseException as exc:
            errors.put(exc)
            barrier.abort()

    threads = [threading.Thread(target=target, daemon=True) for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    return threads, barrier, errors, t0


def concurrent_jupyter(n):
    pids = []
    lock = threading.Lock()

    def body(barrier):
        kernel = Kernel()
        with lock:
            pids.append(kernel.pid)
        try:
            for code in CELLS:
                kernel.execute(code)
            barrier.wait()
            barrier.wait()
        finally:
            kernel.close()

    threads, barrier, errors, t0 = run_threads(n, body)
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        raise errors.get() from None
    wall = time.perf_counter() - t0
    all_pids = [p for pid in pids for p in descendants(pid)]
    memory = {"procs": len(all_pids), "pss": pss(all_pids)}
    barrier.wait()
    for t in threads:
        t.join()
    return wall, memory


def concurrent_respawn(n):
    def body(barrier):
        traj_respawn()
        barrier.wait()
        barrier.wait()

    threads, barrier, errors, t0 = run_threads(n, body)
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        raise errors.get() from None
    wall = time.perf_counter() - t0
    barrier.wait()
    for t in threads:
        t.join()
    return wall, {"procs": 0, "pss": 0}


# ----------------------------------------------------------------------------- 1. cold start

print(f"table: {TABLE} ({TABLE.stat().st_size / 1024:.0f} KiB), {len(CELLS)} cells, repeats={args.repeats}")
print(f"machine: {os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM, Python {sys.version.split()[0]}")

t0 = time.perf_counter()
with Sandbox(files=[TABLE], limits=LIMITS) as sb:
    sb.prestart()
    cold = time.perf_counter() - t0
    isolation = sb.isolation
print(f"cold start (fork server start-up + first worker): {cold:.2f} s")
print(f"isolation: {isolation}")

import pandas  # noqa: E402, F401  -- (a) runs in an interpreter that already has pandas, like the fork server

# ----------------------------------------------------------------------------- 2. one trajectory at a time

METHODS = {
    "a": ("(a) exec, no isolation", traj_exec),
    "b": ("(b) sandbox session", lambda: traj_sandbox("session")),
    "c": ("(c) sandbox replay", lambda: traj_sandbox("replay")),
    "d": ("(d) python per step", traj_respawn),
    "e": ("(e) jupyter kernel", traj_jupyter),
}
single = {key: [] for key in METHODS}
for rep in range(args.repeats):
    for key, (label, fn) in METHODS.items():  # interleaved, so drift hits every method alike
        run, memory = fn()
        single[key].append((run, memory))
        print(f"  repeat {rep + 1}/{args.repeats} {label:<24} total {run.total:7.3f} s  mem {memory / MiB:6.1f} MiB")
        print("     cells ms", " ".join(f"{x*1000:.1f}" for x in run.cells))

# Every method must have printed the same thing (for (d): the last step prints everything).
reference = "".join(single["a"][0][0].outputs)
for key, runs in single.items():
    outputs = runs[0][0].outputs
    text = outputs[-1] if key == "d" else "".join(outputs)
    if text != reference:
        print(f"WARNING: {METHODS[key][0]} printed something different from (a)")


def med(values):
    return statistics.median(values)


summary = {}
for key, runs in single.items():
    summary[key] = {
        "startup_s": med([r.startup for r, _ in runs]),
        "total_s": med([r.total for r, _ in runs]),
        "cell_median_s": med([med(r.cells) for r, _ in runs]),
        "idle_pss_mib": med([m for _, m in runs]) / MiB,
    }

# ----------------------------------------------------------------------------- 3. many trajectories at once

N = args.concurrency
conc = {}
if not args.skip_concurrent:
    print(f"concurrent: {N} trajectories ...")
    wall, memory = concurrent_sandbox("session", N)
    conc["b"] = {"wall_s": wall, **memory}
    print(f"  (b) session: {wall:.2f} s, {memory['procs']} processes, {memory['pss'] / MiB:.0f} MiB")
    if args.concurrent_baselines:
        wall, memory = concurrent_sandbox("replay", N)
        conc["c"] = {"wall_s": wall, **memory}
        print(f"  (c) replay: {wall:.2f} s, {memory['procs']} processes")
        wall, memory = concurrent_respawn(N)
        conc["d"] = {"wall_s": wall, **memory}
        print(f"  (d) python per step: {wall:.2f} s")
    wall, memory = concurrent_jupyter(N)
    conc["e"] = {"wall_s": wall, **memory}
    print(f"  (e) jupyter: {wall:.2f} s, {memory['procs']} processes, {memory['pss'] / MiB:.0f} MiB")

# ----------------------------------------------------------------------------- 4. report

floor = summary["a"]
header = (
    f"{'method':<24} {'start-up s':>10} {'total s':>9} {'x (a)':>8} {'cell p50 ms':>11} {'x (a)':>7} "
    f"{'idle MiB':>9}"
)
if conc:
    header += f" | {N} at once: {'wall s':>7} {'idle MiB':>9}"
lines = [header, "-" * len(header)]
for key, s in summary.items():
    line = (
        f"{METHODS[key][0]:<24} {s['startup_s']:>10.3f} {s['total_s']:>9.3f} {s['total_s'] / floor['total_s']:>7.0f}x "
        f"{s['cell_median_s'] * 1000:>11.1f} {s['cell_median_s'] / floor['cell_median_s']:>6.1f}x "
        f"{s['idle_pss_mib']:>9.1f}"
    )
    if conc:
        c = conc.get(key)
        pad = " " * len(f" | {N} at once:")
        line += f"{pad} {c['wall_s']:>7.2f} {c['pss'] / MiB:>9.0f}" if c else f"{pad} {'-':>7} {'-':>9}"
    lines.append(line)
table = "\n".join(lines)
print()
print(table)
print(f"cold start of the first sandbox in a process (fork server + first worker): {cold:.2f} s")
if "b" in conc:
    print(
        f"fork server itself (shared by all sandboxes, not counted above): {conc['b']['forkserver'] / MiB:.0f} MiB PSS "
        f"while {N} sandboxes were open"
    )

b, c, d, e = summary["b"], summary["c"], summary["d"], summary["e"]
checks = [
    (
        "session total <= 0.5 x jupyter total",
        b["total_s"] <= 0.5 * e["total_s"],
        f"{b['total_s']:.3f} s vs {e['total_s']:.3f} s ({b['total_s'] / e['total_s']:.2f}x)",
    ),
    (
        "session total >= 10x faster than python-per-step",
        d["total_s"] >= 10 * b["total_s"],
        f"{d['total_s'] / b['total_s']:.1f}x faster",
    ),
    (
        "replay total >= 3x faster than python-per-step",
        d["total_s"] >= 3 * c["total_s"],
        f"{d['total_s'] / c['total_s']:.1f}x faster",
    ),
]
if "b" in conc and "e" in conc:
    mb, me = conc["b"]["pss"], conc["e"]["pss"]
    checks.append(
        (
            f"{N} idle sessions memory <= 0.5 x {N} idle kernels",
            mb <= 0.5 * me,
            f"{mb / MiB:.0f} MiB vs {me / MiB:.0f} MiB ({mb / me:.2f}x)",
        )
    )
print()
for name, ok, detail in checks:
    print(f"  {'PASS' if ok else 'FAIL'}  {name:<50} {detail}")

if args.json:
    raw = {
        key: [{"startup_s": r.startup, "cells_s": r.cells, "idle_pss_bytes": m} for r, m in runs]
        for key, runs in single.items()
    }
    Path(args.json).write_text(
        json.dumps(
            {
                "cold_start_s": cold,
                "isolation": isolation,
                "cpus": os.cpu_count(),
                "summary": summary,
                "concurrent": conc,
                "raw": raw,
                "checks": [{"name": n, "pass": ok, "detail": why} for n, ok, why in checks],
            },
            indent=2,
        )
    )

shutil.rmtree(SCRATCH, ignore_errors=True)
