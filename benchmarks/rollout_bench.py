"""Rollout throughput: 64 concurrent trajectories against a model that takes a fixed time per call.

    python benchmarks/rollout_bench.py [--trajectories 256] [--concurrency 64] [--latency-s 0.5]

By default 256 trajectories flow through 64 slots, which is the steady state of a sampling or RL
rollout; ``--trajectories 64`` measures a single wave that starts all at once (see BENCHMARKS.md).

The model is a scripted replay backend that waits ``--latency-s`` per call (an inference server
that is never the bottleneck); every code turn runs for real in the sandbox. The ideal throughput
is the smaller of two bounds measured in the same run:

- latency bound: ``concurrency / (turns * latency + one trajectory's own time with no latency)``;
- CPU bound: ``cores / CPU seconds one trajectory costs``: this process plus the fork server and
  everything it forked (workers are reaped into its children's times), from /proc.

The engine's score is achieved throughput / ideal throughput (target >= 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import tempfile
import time
from pathlib import Path

from datalyst.agent import Agent, AgentConfig, Termination, rollout
from datalyst.llm import ReplayModel
from datalyst.sandbox import default_forkserver
from datalyst.tasks import Task

SALES = Path(__file__).resolve().parents[1] / "examples" / "sales.csv"
SCRIPT = [
    "<think>Load the data.</think>\n<code>\n```python\nimport pandas as pd\n"
    "df = pd.read_csv('sales.csv')\nprint(df.shape)\n```\n</code>",
    "<think>Revenue by region.</think>\n<code>\n```python\n"
    "by_region = df.groupby('region')['revenue'].sum().round(2)\nprint(by_region)\n```\n</code>",
    "<think>Best product.</think>\n<code>\n```python\n"
    "print(df.pivot_table(index='product', columns='region', values='units', aggfunc='sum'))\n```\n</code>",
    "<think>Done.</think>\n<answer>@top_region[West]</answer>",
]


def cpu_seconds() -> float:
    """CPU time used so far by this process and by the sandbox fork server with its reaped children."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    server = default_forkserver().pid
    if server is not None:
        with open(f"/proc/{server}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    return total


async def run(n: int, concurrency: int, latency_s: float, out_dir: str) -> tuple[float, float, int]:
    """Wall seconds, machine CPU seconds and answered count for ``n`` trajectories."""
    tasks = [Task(id=f"q{i}", question="Which region sells most?", files=[str(SALES)]) for i in range(n)]
    agent = Agent(ReplayModel(SCRIPT, per_turn=True, latency_s=latency_s), AgentConfig(max_turns=len(SCRIPT)))
    out = Path(out_dir) / f"rollout-{n}-{concurrency}-{latency_s}.jsonl"
    cpu, started = cpu_seconds(), time.monotonic()
    summary = await rollout(tasks, agent, out, concurrency=concurrency, progress=False)
    return time.monotonic() - started, cpu_seconds() - cpu, summary.terminations.get(Termination.ANSWER, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-s", type=float, default=0.5)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    turns = len(SCRIPT)
    with tempfile.TemporaryDirectory() as out_dir:
        asyncio.run(run(2, 1, 0.0, out_dir))  # warm the fork server and the imports
        single_s, _, _ = asyncio.run(run(1, 1, 0.0, out_dir))
        _, sequential_cpu, _ = asyncio.run(run(8, 1, 0.0, out_dir))
        wall_s, _, answered = asyncio.run(run(args.trajectories, args.concurrency, args.latency_s, out_dir))
    cpu_per_trajectory = sequential_cpu / 8
    latency_bound = args.concurrency / (turns * args.latency_s + single_s)
    cpu_bound = cores / cpu_per_trajectory
    ideal = min(latency_bound, cpu_bound)
    achieved = args.trajectories / wall_s
    print(f"{args.trajectories} trajectories x {turns} turns, concurrency {args.concurrency}, "
          f"model latency {args.latency_s:g} s per call, {cores} cores")  # fmt: skip
    print(f"one trajectory alone, no latency:   {single_s * 1000:8.1f} ms wall")
    print(f"CPU per trajectory (8 in a row):    {cpu_per_trajectory * 1000:8.1f} ms (host + sandboxes)")
    print(f"latency bound:                      {latency_bound:8.2f} trajectories/s")
    print(f"CPU bound:                          {cpu_bound:8.2f} trajectories/s")
    print(f"achieved:                           {achieved:8.2f} trajectories/s ({wall_s:.2f} s, {answered} answered)")
    ratio = achieved / ideal
    print(f"achieved / ideal:                   {ratio:8.2f}   {'PASS' if ratio >= 0.8 else 'FAIL'} (target >= 0.8)")


if __name__ == "__main__":
    main()
