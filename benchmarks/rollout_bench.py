"""Rollout throughput: 64 concurrent trajectories against a model that takes a fixed time per call.

    python benchmarks/rollout_bench.py [--trajectories 1024] [--concurrency 64] [--latency-s 0.5]

By default 1024 trajectories flow through 64 slots, which is the steady state of a sampling or RL
rollout: the last seconds of any run, when the final trajectories wait on the model with little
left to execute, weigh little in it (they cost a 256-trajectory run about 5 % of its throughput).
``--trajectories 64`` measures a single wave that starts all at once (see BENCHMARKS.md).

The model is a scripted replay backend that waits ``--latency-s`` per call (an inference server
that is never the bottleneck); every code turn runs for real in the sandbox. The ideal throughput
is the smaller of two bounds measured in the same run:

- latency bound: ``concurrency / (turns * latency + one trajectory's own time with no latency)``;
- CPU bound: ``cores / CPU seconds one trajectory costs while the measured run goes on``: the busy
  time of the whole machine (/proc/stat) over that run, divided by its trajectories. Measured under
  the run's own load because that is what a trajectory costs there: with 64 sandboxes alive the
  kernel does more per fork, fault and exit, and kernel threads work for the sandboxes, than for
  trajectories run one at a time (printed beside it; docs/BENCHMARKS.md). Run it on an otherwise
  idle machine: the script prints how busy the machine was just before.

The engine's score is achieved throughput / ideal throughput (target >= 0.9).
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
from datalyst.llm._cores import machine_busy_s
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


async def run(n: int, concurrency: int, latency_s: float, out_dir: str) -> tuple[float, float, float, int]:
    """Wall seconds, own CPU seconds, machine busy seconds and answered count for ``n`` trajectories."""
    tasks = [Task(id=f"q{i}", question="Which region sells most?", files=[str(SALES)]) for i in range(n)]
    agent = Agent(ReplayModel(SCRIPT, per_turn=True, latency_s=latency_s), AgentConfig(max_turns=len(SCRIPT)))
    out = Path(out_dir) / f"rollout-{n}-{concurrency}-{latency_s}.jsonl"
    cpu, busy, started = cpu_seconds(), machine_busy_s(), time.monotonic()
    summary = await rollout(tasks, agent, out, concurrency=concurrency, progress=False)
    wall_s, cpu, busy = time.monotonic() - started, cpu_seconds() - cpu, machine_busy_s() - busy
    return wall_s, cpu, busy, summary.terminations.get(Termination.ANSWER, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-s", type=float, default=0.5)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    turns = len(SCRIPT)
    n = args.trajectories
    with tempfile.TemporaryDirectory() as out_dir:
        asyncio.run(run(2, 1, 0.0, out_dir))  # warm the fork server and the imports
        single_s, *_ = asyncio.run(run(1, 1, 0.0, out_dir))
        _, sequential_cpu, _, _ = asyncio.run(run(16, 1, 0.0, out_dir))
        idle_busy = machine_busy_s()
        time.sleep(1.0)
        idle_busy = machine_busy_s() - idle_busy
        wall_s, own_cpu, busy, answered = asyncio.run(run(n, args.concurrency, args.latency_s, out_dir))
    latency_bound = args.concurrency / (turns * args.latency_s + single_s)
    cpu_bound = cores / (busy / n)
    ideal = min(latency_bound, cpu_bound)
    achieved = n / wall_s
    print(f"{n} trajectories x {turns} turns, concurrency {args.concurrency}, "
          f"model latency {args.latency_s:g} s per call, {cores} cores")  # fmt: skip
    print(f"machine busy before the run:        {idle_busy / cores:8.1%} (should be near 0)")
    print(f"one trajectory alone, no latency:   {single_s * 1000:8.1f} ms wall")
    print(f"CPU per trajectory, 16 in a row:    {sequential_cpu / 16 * 1000:8.1f} ms (host + sandboxes)")
    print(f"CPU per trajectory, in the run:     {own_cpu / n * 1000:8.1f} ms (host + sandboxes), "
          f"{busy / n * 1000:.1f} ms (whole machine)")  # fmt: skip
    print(f"latency bound:                      {latency_bound:8.2f} trajectories/s")
    print(f"CPU bound:                          {cpu_bound:8.2f} trajectories/s")
    print(f"achieved:                           {achieved:8.2f} trajectories/s ({wall_s:.2f} s, {answered} answered)")
    ratio = achieved / ideal
    print(f"achieved / ideal:                   {ratio:8.2f}   {'PASS' if ratio >= 0.9 else 'FAIL'} (target >= 0.9)")


if __name__ == "__main__":
    main()
