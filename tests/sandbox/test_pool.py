"""Many trajectories at once: a cap on live sandboxes, results that do not mix, async cells."""

from __future__ import annotations

import asyncio

from datalyst.sandbox import Limits, SandboxPool

CELLS = [
    "import pandas as pd\ndf = pd.read_csv('sales.csv')",
    "seed = {n}\nprint(seed * int(df['units'].sum()))",
]


async def _trajectories(pool: SandboxPool, sales, count: int, live: list[int]) -> list[str]:
    active = 0

    async def one(n: int) -> str:
        nonlocal active
        async with pool.sandbox([sales], mode="session", limits=Limits(wall_s=30)) as sb:
            active += 1
            live.append(active)
            try:
                outputs = [await sb.arun_python(code.format(n=n)) for code in CELLS]
            finally:
                active -= 1
        return outputs[-1].stdout

    return await asyncio.gather(*(one(n) for n in range(count)))


def test_pool_caps_live_sandboxes_and_keeps_results_apart(examples_dir):
    sales = examples_dir / "sales.csv"

    async def main() -> tuple[list[str], list[str], list[int]]:
        live: list[int] = []
        async with SandboxPool(max_concurrent=3) as pool:
            concurrent = await _trajectories(pool, sales, 8, live)
        async with SandboxPool(max_concurrent=1) as pool:
            sequential = await _trajectories(pool, sales, 8, [])
        return concurrent, sequential, live

    concurrent, sequential, live = asyncio.run(main())
    assert concurrent == sequential
    assert len(set(concurrent)) == 8 and max(live) <= 3


def test_pool_sandboxes_report_isolation(examples_dir):
    async def main() -> str:
        async with SandboxPool(max_concurrent=2) as pool, pool.sandbox([examples_dir / "sales.csv"]) as sb:
            result = await sb.arun_python("print('ok')")
            return sb.isolation + "|" + result.stdout

    assert asyncio.run(main()).startswith("namespaces:")
