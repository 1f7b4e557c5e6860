"""Helpers several commands share: a model loaded when first asked, tasks drawn by seed, and what a command line
writes turned into what a config model holds (a model spec resolved, paths made absolute)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from datalyst.llm import ChatMessage, Completion, SamplingParams, load_model, resolve_spec
from datalyst.tasks import Task


def model_spec(spec: str | None) -> str:
    """The spec a run uses: the one given, else the configured default (``datalyst.llm.resolve_spec``)."""
    return str(resolve_spec(spec))


def absolute(path: str | None) -> str | None:
    return str(Path(path).resolve()) if path else None


def absolute_all(paths: Sequence[str] | None) -> list[str] | None:
    return None if paths is None else [str(Path(path).resolve()) for path in paths]


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
