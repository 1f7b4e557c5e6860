"""How much does isolation cost? Times and memory of one 10-cell pandas analysis, five ways.

    (a) exec     in-process ``exec`` in one dict, no isolation at all (the floor)
    (b) session  datalyst Sandbox, mode="session": one jailed worker keeps the variables
    (c) replay   datalyst Sandbox, mode="replay": a fresh jailed worker per cell re-runs the earlier cells
    (d) respawn  a new ``python -c`` per step that re-runs all the code so far (DataMind style)
    (e) jupyter  one Jupyter kernel per trajectory, driven by jupyter_client

First, ``--repeats`` cold starts, each in a fresh fork server: its start-up and its first worker,
its memory once idle (RSS, PSS, USS), and the first ``import`` of scipy.stats, sklearn.linear_model,
statsmodels.api and seaborn in a new sandbox (what preloading them in the fork server saves).

For each: total time of the trajectory including start-up, median cell latency, and the memory
an idle trajectory holds after its 10 cells (sum of PSS over its processes). Then ``--concurrency``
trajectories at once for (b), (c) and (e) (and, with ``--concurrent-respawn``, (d)):
wall time for all of them and the memory of all of them idle and still open.

Run from the repo root, with the ``bench`` extra installed (jupyter-client, ipykernel, psutil)::

    . .venv/bin/activate
    python benchmarks/sandbox_bench.py                     # 3 repeats, 32 at once: ~1.5 min on 2 cores
    python benchmarks/sandbox_bench.py --concurrent-respawn  # adds (d) x 32 at once: ~5 min
    python benchmarks/sandbox_bench.py --repeats 5 --concurrency 16 --json bench.json
    python benchmarks/sandbox_bench.py --startup-only --repeats 5   # cold start and fork-server memory only

The table is read from ``<repo>/../shared/benchmarks/dabench/tables/abalone.csv``; point the
environment variable ``DATALYST_BENCHMARKS`` at another ``benchmarks`` folder to move it.
Memory is PSS (proportional set size): shared pages are split evenly between the processes that
map them, so summing PSS over processes never counts a shared page twice. Needs Linux.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import ctypes
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
parser.add_argument("--concurrency", type=int, default=32, help="trajectories run at once for (b), (c), (e)")
parser.add_argument("--table", default="abalone.csv", help="file name under dabench/tables")
parser.add_argument(
    "--concurrent-respawn",
    action="store_true",
    help="also run (d) concurrently (slow: ~4 min at 32 on 2 cores)",
)
parser.add_argument("--skip-concurrent", action="store_true", help="only the single-trajectory measurements")
parser.add_argument(
    "--startup-only", action="store_true", help="only the cold start and the idle fork server's memory, then stop"
)
parser.add_argument("--json", metavar="PATH", help="also write all raw numbers to this JSON file")
args = parser.parse_args()

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = Path(os.environ.get("DATALYST_BENCHMARKS", REPO.parent / "shared" / "benchmarks"))
TABLE = BENCHMARKS / "dabench" / "tables" / args.table
if not TABLE.is_file():
    sys.exit(f"{TABLE}: not found; set DATALYST_BENCHMARKS to the folder that holds dabench/tables")

CELL_TIMEOUT_S = 120.0
SETTLE_S = 0.5  # idle pause before reading memory: lets processes that are on their way out exit
MiB = 1 << 20

# A realistic exploratory analysis: every cell prints its result and uses names from earlier cells.
# Written for abalone.csv. Every cell prints (nothing relies on a notebook echoing the last line), and
# the display options are pinned, because pandas formats wide frames differently inside IPython.
CELLS = [
    "import pandas as pd\n"
    'pd.set_option("display.width", 120)\n'
    'pd.set_option("display.max_columns", 20)\n'
    'df = pd.read_csv("abalone.csv")\n'
    "print(df.shape)",
    "print(df.head())",
    "print(df.describe().round(3))",
    'by_sex = df.groupby("Sex").mean(numeric_only=True)\nprint(by_sex.round(3))',
    'ring_counts = df["Rings"].value_counts().sort_index()\nprint(ring_counts.head(15))',
    'df["Volume"] = df["Length"] * df["Diameter"] * df["Height"]\n'
    'df["Age"] = df["Rings"] + 1.5\n'
    'print(df[["Volume", "Age"]].describe().round(4))',
    'adults = df[(df["Sex"] != "I") & (df["Age"] > 10)]\nprint(len(adults), round(adults["Whole weight"].mean(), 4))',
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
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
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


def sandbox_breakdown():
    """PSS and USS (pages no other process maps) of the monitors and of the workers, in bytes."""
    server = forkserver_pid()
    totals = {"monitor_pss": 0, "monitor_uss": 0, "worker_pss": 0, "worker_uss": 0}
    if server is None:
        return totals
    for proc in psutil.Process(server).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            role = "monitor" if proc.ppid() == server else "worker"
            info = proc.memory_full_info()
            totals[f"{role}_pss"] += info.pss
            totals[f"{role}_uss"] += info.uss
    return totals


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


LIBC = ctypes.CDLL(None)


def release_free_memory():
    """Collect garbage and hand free heap pages back to the kernel, so PSS growth is not hidden
    by memory an earlier repeat freed but the allocator kept."""
    gc.collect()
    with contextlib.suppress(AttributeError):
        LIBC.malloc_trim(0)


def traj_exec():
    """One shared namespace in this process; memory is this process's PSS growth."""
    release_free_memory()
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
    namespace.clear()
    release_free_memory()
    return run, memory


# ----------------------------------------------------------------------------- (b, c) datalyst Sandbox

from datalyst.sandbox import ForkServer, Limits, Sandbox, SandboxPool  # noqa: E402

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
        time.sleep(SETTLE_S)
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


KERNEL_LOGS = SCRATCH / "kernel-logs"
KERNEL_LOGS.mkdir()
KERNEL_START_ATTEMPTS = 3
kernel_retries = []  # one line per kernel that died during start-up and was started again


class Kernel:
    """One IPython kernel with a blocking client. Its own output goes to a log file, not the terminal.

    Under heavy load a kernel occasionally dies before it answers (typically: another process
    took one of the TCP ports jupyter_client picked for it). Then a new kernel is started; the
    time lost stays in the measurement, and the retry is reported.
    """

    def __init__(self):
        for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
            self.km = KernelManager(kernel_name="python3")
            log = tempfile.NamedTemporaryFile("w", dir=KERNEL_LOGS, suffix=".log", delete=False)  # noqa: SIM115
            with log:
                self.km.start_kernel(cwd=str(SCRATCH), env=KERNEL_ENV, stdout=log, stderr=log)
            self.kc = self.km.blocking_client()
            self.kc.start_channels()
            try:
                self.kc.wait_for_ready(timeout=CELL_TIMEOUT_S)
                return
            except RuntimeError as exc:
                self.close()
                lines = Path(log.name).read_text(errors="replace").strip().splitlines()
                kernel_retries.append(f"attempt {attempt}: {exc}; kernel log: {lines[-1] if lines else '(empty)'}")
                if attempt == KERNEL_START_ATTEMPTS:
                    raise

    @property
    def pid(self):
        return self.km.provisioner.process.pid

    def execute(self, code):
        """Send one cell; collect its stream output from iopub until the kernel goes idle."""
        msg_id = self.kc.execute(code)
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
        if self.km.has_kernel:
            self.km.shutdown_kernel(now=True)


def traj_jupyter():
    run = Run()
    t0 = time.perf_counter()
    kernel = Kernel()
    run.startup = time.perf_counter() - t0
    try:
        for code in CELLS:
            timed(run, kernel.execute, code)
        time.sleep(SETTLE_S)
        memory = pss(descendants(kernel.pid))
    finally:
        kernel.close()
    return run, memory


# ----------------------------------------------------------------------------- concurrent runs
# All n trajectories start together. The wall time runs until the last one has finished its 10
# cells; then, with all n still open and idle, memory is read. For (b) and (e) every trajectory
# then runs one more cell, a full garbage collection, and memory is read again (see BENCHMARKS.md:
# in a forked worker a full collection un-shares pages inherited from the fork server).

GC_CELL = "import gc\ngc.collect()"


def concurrent_sandbox(mode, n, gc_phase):
    """n trajectories through one SandboxPool."""
    memory = {}

    def read_memory(tag):
        pids = sandbox_pids()
        memory.update({f"{tag}procs": len(pids), f"{tag}pss": pss(pids)})
        return pids

    async def main():
        barrier = asyncio.Barrier(n + 1)

        async def trajectory(pool):
            try:
                async with pool.sandbox([TABLE], mode=mode, limits=LIMITS) as sb:
                    for code in CELLS:
                        r = await sb.arun_python(code)
                        if r.error is not None:
                            raise RuntimeError(f"sandbox cell failed: {r.error.ename}: {r.error.evalue}")
                    await barrier.wait()  # all n done ...
                    await barrier.wait()  # ... and measured
                    if gc_phase:
                        await sb.arun_python(GC_CELL)
                        await barrier.wait()
                        await barrier.wait()
            except BaseException:
                await barrier.abort()
                raise

        async with SandboxPool(max_concurrent=n) as pool:
            t0 = time.perf_counter()
            tasks = [asyncio.create_task(trajectory(pool)) for _ in range(n)]
            try:
                await barrier.wait()
                wall = time.perf_counter() - t0
                await asyncio.sleep(SETTLE_S)
                read_memory("")
                memory.update(forkserver=pss([forkserver_pid()]), **sandbox_breakdown())
                await barrier.wait()
                if gc_phase:
                    await barrier.wait()
                    await asyncio.sleep(SETTLE_S)
                    read_memory("gc_")
                    await barrier.wait()
            except asyncio.BrokenBarrierError:
                pass
            await asyncio.gather(*tasks)  # raises the first trajectory's error, if any
        return wall

    wall = asyncio.run(main())
    return wall, memory


def run_threads(n, body, phases, on_phase):
    """Run body(wait) in n threads, where wait() is a barrier with the main thread.

    The main thread calls on_phase(i) after the i-th time all n threads reached the barrier, for
    ``phases`` rounds; returns the wall time until the first round.
    """
    barrier = threading.Barrier(n + 1)
    errors = queue.Queue()

    def target():
        try:
            body(barrier.wait)
        except BaseException as exc:
            errors.put(exc)
            barrier.abort()

    threads = [threading.Thread(target=target, daemon=True) for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    try:
        for phase in range(phases):
            barrier.wait()
            if phase == 0:
                wall = time.perf_counter() - t0
            on_phase(phase)
            barrier.wait()
    except threading.BrokenBarrierError:
        raise errors.get() from None
    for t in threads:
        t.join()
    return wall


def concurrent_jupyter(n, gc_phase):
    pids = []
    lock = threading.Lock()
    memory = {}

    def body(wait):
        kernel = Kernel()
        with lock:
            pids.append(kernel.pid)
        try:
            for code in CELLS:
                kernel.execute(code)
            wait()
            wait()
            if gc_phase:
                kernel.execute(GC_CELL)
                wait()
                wait()
        finally:
            kernel.close()

    def on_phase(phase):
        time.sleep(SETTLE_S)
        all_pids = [p for pid in pids for p in descendants(pid)]
        tag = "gc_" if phase else ""
        memory.update({f"{tag}procs": len(all_pids), f"{tag}pss": pss(all_pids)})

    wall = run_threads(n, body, 2 if gc_phase else 1, on_phase)
    return wall, memory


def concurrent_respawn(n):
    def body(wait):
        traj_respawn()
        wait()
        wait()

    wall = run_threads(n, body, 1, lambda phase: None)
    return wall, {"procs": 0, "pss": 0}


# ----------------------------------------------------------------------------- 1. cold start

print(f"table: {TABLE} ({TABLE.stat().st_size / 1024:.0f} KiB), {len(CELLS)} cells, repeats={args.repeats}")
ram_gib = psutil.virtual_memory().total / 2**30
print(f"machine: {os.cpu_count()} CPUs, {ram_gib:.0f} GiB RAM, Python {sys.version.split()[0]}")


# The first import of each library the agent has besides pandas, numpy and matplotlib, in a fresh sandbox.
STACK_IMPORTS = {
    "scipy": "import scipy.stats",
    "sklearn": "import sklearn.linear_model",
    "statsmodels": "import statsmodels.api",
    "seaborn": "import seaborn",
}


def cold_start():
    """One sandbox in a fresh fork server: seconds to start the server and its first worker, the
    server's memory once that sandbox is closed again (what every later sandbox shares), and how long
    the first import of each library of STACK_IMPORTS takes in a new sandbox (each in its own)."""
    server = ForkServer()
    try:
        t0 = time.perf_counter()
        server.ensure_run_root()
        t1 = time.perf_counter()
        with Sandbox(files=[TABLE], limits=LIMITS, forkserver=server) as sb:
            sb.prestart()
            t2 = time.perf_counter()
            isolation = sb.isolation
        time.sleep(SETTLE_S)
        info = psutil.Process(server.pid).memory_full_info()
        imports = {}
        for name, code in STACK_IMPORTS.items():
            with Sandbox(limits=LIMITS, forkserver=server) as sb:
                sb.prestart()
                imports[name] = timed_cell(sb, code)
    finally:
        server.close()
    measured = {"server_s": t1 - t0, "worker_s": t2 - t1, "rss": info.rss, "pss": info.pss, "uss": info.uss}
    return measured | {f"import_{name}_s": seconds for name, seconds in imports.items()}, isolation


def timed_cell(sb, code):
    t0 = time.perf_counter()
    sandbox_cell(sb)(code)
    return time.perf_counter() - t0


colds = []
for rep in range(args.repeats):
    measured, isolation = cold_start()
    colds.append(measured)
    print(
        f"  cold start {rep + 1}/{args.repeats}: fork server {measured['server_s']:.2f} s + first worker "
        f"{measured['worker_s'] * 1000:.0f} ms; fork server RSS {measured['rss'] / MiB:.0f} MiB, "
        f"PSS {measured['pss'] / MiB:.0f} MiB"
    )
cold_summary = {key: statistics.median(c[key] for c in colds) for key in colds[0]}
cold = cold_summary["server_s"] + cold_summary["worker_s"]
cold_line = (
    f"cold start (fork server start-up + first worker, median of {args.repeats}): {cold:.2f} s "
    f"({cold_summary['server_s']:.2f} s + {cold_summary['worker_s'] * 1000:.0f} ms); idle fork server: "
    f"RSS {cold_summary['rss'] / MiB:.0f} MiB, PSS {cold_summary['pss'] / MiB:.0f} MiB, "
    f"USS {cold_summary['uss'] / MiB:.0f} MiB"
)
imports_line = "first import in a new sandbox (median of {}): {}".format(
    args.repeats,
    ", ".join(f"{code} {cold_summary[f'import_{name}_s'] * 1000:.0f} ms" for name, code in STACK_IMPORTS.items()),
)
print(cold_line)
print(imports_line)
print(f"isolation: {isolation}")
if args.startup_only:
    sys.exit(0)
with Sandbox(files=[TABLE], limits=LIMITS) as sb:  # warm the shared fork server the measurements below use
    sb.prestart()

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
    wall, memory = concurrent_sandbox("session", N, gc_phase=True)
    conc["b"] = {"wall_s": wall, **memory}
    print(f"  (b) session: {wall:.2f} s, {memory['procs']} processes, {memory['pss'] / MiB:.0f} MiB")
    wall, memory = concurrent_sandbox("replay", N, gc_phase=False)
    conc["c"] = {"wall_s": wall, **memory}
    print(f"  (c) replay: {wall:.2f} s, {memory['procs']} processes")
    if args.concurrent_respawn:
        wall, memory = concurrent_respawn(N)
        conc["d"] = {"wall_s": wall, **memory}
        print(f"  (d) python per step: {wall:.2f} s")
    wall, memory = concurrent_jupyter(N, gc_phase=True)
    conc["e"] = {"wall_s": wall, **memory}
    print(f"  (e) jupyter: {wall:.2f} s, {memory['procs']} processes, {memory['pss'] / MiB:.0f} MiB")

# ----------------------------------------------------------------------------- 4. report

floor = summary["a"]
header = (
    f"{'method':<24} {'start-up s':>10} {'total s':>9} {'x (a)':>8} {'cell p50 ms':>11} {'x (a)':>7} {'idle MiB':>9}"
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
print(cold_line)
print(imports_line)
if "b" in conc and "e" in conc:
    print()
    print(f"memory of {N} idle trajectories, all still open (sum of PSS):")
    print(f"  {'':<22} {'total MiB':>10} {'per trajectory':>15} {'after gc.collect() in each':>28}")
    for key in ("b", "e"):
        m = conc[key]
        after = f"{m['gc_pss'] / MiB:.0f} MiB ({m['gc_pss'] / MiB / N:.1f} each)"
        print(f"  {METHODS[key][0]:<22} {m['pss'] / MiB:>10.0f} {m['pss'] / MiB / N:>15.1f} {after:>28}")
    ratio = conc["b"]["gc_pss"] / conc["e"]["gc_pss"]
    print(f"  after a full collection in every trajectory, sessions use {ratio:.2f}x the memory of kernels")
if "b" in conc:
    m = conc["b"]
    print(
        f"fork server itself (shared by all sandboxes, not counted above): {m['forkserver'] / MiB:.0f} MiB PSS "
        f"while {N} sessions were open"
    )
    print(
        f"{N} idle sessions, by role: workers {m['worker_pss'] / MiB:.0f} MiB PSS ({m['worker_uss'] / MiB:.0f} MiB "
        f"private), monitors {m['monitor_pss'] / MiB:.0f} MiB PSS ({m['monitor_uss'] / MiB:.0f} MiB private)"
    )

if kernel_retries:
    print(f"jupyter kernels that died during start-up and were started again: {len(kernel_retries)}")
    for line in kernel_retries:
        print(f"  {line}")

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
                "cold_start": cold_summary,
                "isolation": isolation,
                "cpus": os.cpu_count(),
                "summary": summary,
                "concurrent": conc,
                "kernel_retries": kernel_retries,
                "raw": raw,
                "checks": [{"name": n, "pass": ok, "detail": why} for n, ok, why in checks],
            },
            indent=2,
        )
    )
