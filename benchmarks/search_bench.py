"""What does a sandbox in the state after cell k cost? Forking against re-running, for tree search.

On the 10-cell pandas trajectory of ``sandbox_bench.py`` (read from that file, so both always measure
the same cells), for k = 2, 5 and 10: the time until a sandbox in the state after cell k has answered
one more cell (a probe that reads that state), four ways, in one run:

    (a) live      ``os.fork`` of a plain, unjailed interpreter that ran cells 1..k: the floor a live fork
                  of the worker could reach. A reference only: datalyst does not offer it, because a
                  forked worker would share its source's namespaces and open files (docs/sandbox.md,
                  "Forking")
    (b) snapshot  ``Sandbox.fork()`` of a session that ran cells 1..k: the source's worker pickles its
                  state, a fresh jail with a copy of the work folder loads it, then runs the probe
    (c) replay    ``Sandbox.fork(how="replay")``: a fresh jail with a copy of the work folder whose first
                  cell replays cells 1..k silently before the probe
    (d) rerun     a new ``Sandbox`` that runs cells 1..k one by one, then the probe (JUPITER's way)

Ratios are to (c), measured in the same run; the issue's target is (b)/(c) at most 0.2 at k = 10.
Medians over ``--repeats``.

    . .venv/bin/activate
    python benchmarks/search_bench.py                        # k = 2, 5, 10; 5 repeats
    python benchmarks/search_bench.py --repeats 9 --json search.json
    python benchmarks/search_bench.py --source-mode replay  # fork a replay-mode sandbox (it holds no live
                                                             # state, so (b) replays as well)

The table is ``dabench/tables/abalone.csv`` under ``$DATALYST_BENCHMARKS`` (default: ``../shared/benchmarks``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from datalyst.paths import dabench_dir
from datalyst.sandbox import Limits, Sandbox

REPO = Path(__file__).resolve().parent.parent
PROBE = "print(df.shape, round(float(df['Rings'].mean()), 4))"
"""Reads the state every prefix of the trajectory leaves (``df`` comes from cell 1)."""
LIMITS = Limits(wall_s=120, cpu_s=120)
LIVE = r"""
import contextlib, io, json, os, sys
channel = os.fdopen(os.dup(1), "w", buffering=1)
sys.stdout = open(os.devnull, "w")
namespace = {"__name__": "__main__"}

def run(code):
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, "<cell>", "exec"), namespace)
    return buffer.getvalue()

for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "run":
        channel.write(json.dumps(run(request["code"])) + "\n")
        continue
    child = os.fork()  # "fork": a child in this state runs the probe and answers
    if child == 0:
        channel.write(json.dumps(run(request["code"])) + "\n")
        channel.flush()
        os._exit(0)
    os.waitpid(child, 0)
"""


def trajectory_cells() -> list[str]:
    """The ``CELLS`` list of ``sandbox_bench.py``, read without running that script."""
    tree = ast.parse((REPO / "benchmarks" / "sandbox_bench.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CELLS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("benchmarks/sandbox_bench.py defines no CELLS list")


def ok(result) -> str:
    if not result.ok:
        raise SystemExit(f"a benchmark cell failed:\n{result.render()}")
    return result.stdout


class LiveInterpreter:
    """A plain Python process (no jail) that runs cells and forks on request: reference (a)."""

    def __init__(self, folder: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LIVE], cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def ask(self, op: str, code: str) -> str:
        self.proc.stdin.write(json.dumps({"op": op, "code": code}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the live interpreter died")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def by_fork(source: Sandbox, how: str) -> tuple[Sandbox, str]:
    child = source.fork(how)  # type: ignore[arg-type]
    expected = how if source.mode == "session" else "replay"
    if child.forked_by != expected:
        raise SystemExit(f"fork(how={how!r}) forked by {child.forked_by}: {child.fork_note}")
    return child, ok(child.run_python(PROBE))


def by_rerun(table: Path, cells: list[str]) -> tuple[Sandbox, str]:
    sandbox = Sandbox([table], limits=LIMITS)
    for code in cells:
        ok(sandbox.run_python(code))
    return sandbox, ok(sandbox.run_python(PROBE))


WAYS = ("live", "snapshot", "replay", "rerun")


def measure(k: int, cells: list[str], table: Path, scratch: Path, repeats: int, source_mode: str) -> dict:
    """Seconds (one per repeat) of each way to a sandbox in the state after cell ``k`` that answered the probe."""
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    outputs: set[str] = set()
    live = LiveInterpreter(scratch)
    source = Sandbox([table], mode=source_mode, limits=LIMITS)  # type: ignore[arg-type]
    try:
        for code in cells[:k]:
            live.ask("run", code)
            ok(source.run_python(code))
        makers = {
            "snapshot": lambda: by_fork(source, "snapshot"),
            "replay": lambda: by_fork(source, "replay"),
            "rerun": lambda: by_rerun(table, cells[:k]),
        }
        for _ in range(repeats):
            started = time.perf_counter()
            outputs.add(live.ask("fork", PROBE))
            seconds["live"].append(time.perf_counter() - started)
            for way, make in makers.items():
                started = time.perf_counter()
                sandbox, output = make()
                seconds[way].append(time.perf_counter() - started)
                sandbox.close()  # not timed
                outputs.add(output)
    finally:
        live.close()
        source.close()
    if len(outputs) != 1:
        raise SystemExit(f"the four ways disagree after cell {k}: {sorted(outputs)}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 5, 10], help="cells run before the fork")
    parser.add_argument("--repeats", type=int, default=5, help="measurements of each way at each k (median)")
    parser.add_argument(
        "--source-mode", choices=["session", "replay"], default="session", help="mode of the forked sandbox"
    )
    parser.add_argument("--json", metavar="PATH", help="also write every measurement to this JSON file")
    args = parser.parse_args()

    table = dabench_dir() / "tables" / "abalone.csv"
    if not table.is_file():
        raise SystemExit(f"{table}: not found; set DATALYST_BENCHMARKS to the folder that holds dabench/tables")
    cells = trajectory_cells()
    if max(args.ks) > len(cells) or min(args.ks) < 1:
        raise SystemExit(f"--ks must lie between 1 and {len(cells)}")
    scratch = Path(tempfile.mkdtemp(prefix="search-bench-"))
    try:
        shutil.copyfile(table, scratch / table.name)
        with Sandbox(limits=LIMITS) as warm:  # start the fork server before anything is timed
            warm.prestart()
        results = {k: measure(k, cells, table, scratch, args.repeats, args.source_mode) for k in args.ks}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"state after cell k, then one probe cell; median of {args.repeats}; ratios to (c) replay")
    print(
        f"{'k':>3} {'(a) live ms':>12} {'(b) snapshot ms':>16} {'(c) replay ms':>14} {'(d) rerun ms':>13} "
        f"{'a/c':>6} {'b/c':>6} {'d/c':>6}"
    )
    for k, seconds in results.items():
        a, b, c, d = (statistics.median(seconds[way]) * 1e3 for way in WAYS)
        print(f"{k:>3} {a:>12.1f} {b:>16.1f} {c:>14.1f} {d:>13.1f} {a / c:>6.2f} {b / c:>6.2f} {d / c:>6.2f}")
    print("(a) is an unjailed reference, not a datalyst feature: see docs/sandbox.md, 'Forking'")
    if args.json:
        record = {"repeats": args.repeats, "source_mode": args.source_mode, "cpus": os.cpu_count(), "seconds": results}
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
