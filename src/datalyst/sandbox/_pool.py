"""Many trajectories' sandboxes at once, with a cap, sharing one warm fork server."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from datalyst.sandbox._forkserver import ForkServer, default_forkserver
from datalyst.sandbox._sandbox import Sandbox


class SandboxPool:
    """Hands out sandboxes to concurrent trajectories, at most ``max_concurrent`` alive at once (their forks
    are not counted: a search bounds its own, see ``MCTSConfig.max_live``).

    Every sandbox forks its worker from the same warm fork server (the libraries of ``PREINSTALLED``
    already loaded, pages shared copy-on-write), and the worker is started as soon as the
    sandbox is handed out, so it is ready by the time the model has written its first cell.
    Workers are never handed from one trajectory to another: that would not be safe.

    Example::

        async with SandboxPool(max_concurrent=16) as pool:
            async with pool.sandbox(["sales.csv"], mode="session") as sb:
                result = await sb.arun_python("1 + 1")
    """

    def __init__(self, max_concurrent: int = 8, *, forkserver: ForkServer | None = None) -> None:
        self.max_concurrent = max_concurrent
        self._forkserver = forkserver or default_forkserver()
        self._slots: asyncio.Semaphore | None = None

    @asynccontextmanager
    async def sandbox(self, files: Iterable[str | os.PathLike[str]] = (), **options: Any) -> AsyncIterator[Sandbox]:
        """A sandbox for one trajectory; ``options`` are those of :class:`Sandbox`."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrent)
        async with self._slots, await Sandbox.astarted(list(files), forkserver=self._forkserver, **options) as sandbox:
            yield sandbox

    async def __aenter__(self) -> SandboxPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Nothing to release: each sandbox closes as its block ends."""
