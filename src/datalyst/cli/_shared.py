"""Helpers several commands share: a model loaded when first asked, and tasks drawn by seed."""

from __future__ import annotations

import random
from collections.abc import Sequence

from datalyst.llm import ChatMessage, Completion, SamplingParams, load_model
from datalyst.tasks import Task


class ManagedModel:
    """The model of ``spec``, loaded now (``eager``) or at its first call, and closed with the context."""

    def __init__(self, spec: str, *, eager: bool = False) -> None:
        self.spec = spec
        self._model = load_model(spec) if eager else None

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        if self._model is None:
            self._model = load_model(self.spec)
        return await self._model.agenerate(messages, params)

    async def aclose(self) -> None:
        if self._model is not None:
            await self._model.aclose()

    async def __aenter__(self) -> ManagedModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def drawn(tasks: list[Task], limit: int | None, seed: int) -> list[Task]:
    """``limit`` of ``tasks`` drawn by ``seed``, in their order (all of them without a limit)."""
    if limit is None or limit >= len(tasks):
        return tasks
    drawn = set(random.Random(seed).sample(range(len(tasks)), limit))
    return [task for index, task in enumerate(tasks) if index in drawn]
