"""The ReAct loop: ask the model for a turn, run its code in the sandbox, show it the result, repeat."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import UTC, datetime
from functools import partial

from pydantic import BaseModel, ConfigDict, Field

from datalyst import __version__
from datalyst.agent._dialect import ActionKind, Dialect, PromptContext
from datalyst.agent._dialects import get_dialect
from datalyst.agent._export import observation_message
from datalyst.agent._figures import collect_figures
from datalyst.agent._trajectory import Termination, Trajectory, Turn
from datalyst.data import FileKind, describe, detect_kind
from datalyst.errors import DataFileError
from datalyst.llm import ChatMessage, ChatModel, ContextOverflow, Role, SamplingParams
from datalyst.sandbox import Limits, Sandbox
from datalyst.tasks import Task

log = logging.getLogger(__name__)

TurnCallback = Callable[[Turn], None]
"""Called with every finished turn (``datalyst ask`` prints them as they come)."""


class AgentConfig(BaseModel):
    """How the agent runs one task."""

    model_config = ConfigDict(extra="forbid")

    dialect: str = "datamind"
    """Turn format: ``datamind``, ``jupiter`` or ``datarus``."""
    max_turns: int = Field(10, ge=1)
    max_consecutive_errors: int = Field(3, ge=1)
    """Stop after this many code turns in a row that failed."""
    max_observation_chars: int = Field(4000, ge=200)
    """Longest observation shown to the model; longer ones keep their head and tail."""
    max_file_info_chars: int = Field(6000, ge=500)
    """Budget for the files' meta-information in the first prompt, shared by all files."""
    sampling: SamplingParams = SamplingParams(temperature=0.0, max_tokens=1024)
    sandbox_mode: str = "session"
    limits: Limits = Limits()


class Agent:
    """Runs tasks with one model. Example::

    agent = Agent(load_model("embedded:small"), AgentConfig(dialect="datamind"))
    trajectory = await agent.arun(Task(id="1", question="How many rows?", files=["sales.csv"]))
    """

    def __init__(self, model: ChatModel, config: AgentConfig | None = None, **sandbox_options: object) -> None:
        self.model = model
        self.config = config or AgentConfig()
        self.dialect: Dialect = get_dialect(self.config.dialect)
        self.sandbox_options = sandbox_options

    async def arun(
        self, task: Task, *, sample: int = 0, on_turn: TurnCallback | None = None, executor: Executor | None = None
    ) -> Trajectory:
        """Solve ``task`` once and return the whole trajectory.

        The model's mistakes are part of the trajectory; our own failures (an unreachable model
        server, a missing data file) are raised.

        ``executor`` runs the sandbox's blocking work (the rollout engine passes one sized to its
        concurrency; the default executor has only a few threads).
        """
        loop = asyncio.get_running_loop()
        context = await loop.run_in_executor(executor, build_context, task, self.config.max_file_info_chars)
        system, first = self.dialect.opening(context)
        sampling = self.config.sampling.model_copy(update={"n": 1, "stop": self.dialect.stop})
        trajectory = Trajectory(
            id=f"{task.id}#{sample}",
            task=task,
            sample=sample,
            dialect=self.dialect.name,
            model=self.model.spec,
            sampling=sampling,
            system_prompt=system,
            first_message=first,
            termination=Termination.MAX_TURNS,
            started_at=datetime.now(UTC),
            datalyst_version=__version__,
        )
        messages = [ChatMessage(role=Role.SYSTEM, content=system), ChatMessage(role=Role.USER, content=first)]
        started = time.monotonic()
        options = {**self.sandbox_options, "executor": executor} if executor else self.sandbox_options
        make = partial(_started_sandbox, task.files, self.config, options)
        # The sandbox starts while the model writes its first turn, which needs no sandbox yet.
        sandbox = loop.run_in_executor(executor, make)
        try:
            await self._loop(trajectory, messages, sandbox, on_turn)
        finally:
            await (await sandbox).aclose()
            trajectory.duration_s = time.monotonic() - started
        return trajectory

    async def _loop(
        self,
        trajectory: Trajectory,
        messages: list[ChatMessage],
        sandbox_ready: asyncio.Future[Sandbox],
        on_turn: TurnCallback | None,
    ) -> None:
        errors_in_a_row = 0
        for index in range(self.config.max_turns):
            generated = time.monotonic()
            try:
                [completion] = await self.model.agenerate(messages, _turn_sampling(trajectory, index))
            except ContextOverflow as exc:  # the conversation outgrew the model: an ending, not a failure
                trajectory.termination, trajectory.error = Termination.CONTEXT_OVERFLOW, str(exc)
                return
            step = self.dialect.parse(completion.text)
            turn = Turn(
                index=index,
                raw=completion.text,
                thought=step.thought,
                kind=step.kind,
                code=step.code,
                answer=step.answer,
                finish_reason=completion.finish_reason,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                generation_s=time.monotonic() - generated,
            )
            trajectory.turns.append(turn)
            messages.append(ChatMessage(role=Role.ASSISTANT, content=completion.text))
            if turn.kind == ActionKind.ANSWER:
                trajectory.answer, trajectory.termination = turn.answer, Termination.ANSWER
            elif turn.kind == ActionKind.VOID:
                turn.observation = self.dialect.void_feedback()
            else:
                sandbox = await sandbox_ready
                executed = time.monotonic()
                result = await sandbox.arun_python(turn.code or "")
                turn.execution_s = time.monotonic() - executed
                turn.result = result
                turn.figures = collect_figures(sandbox.workdir, result)
                turn.observation = clip_middle(result.render(), self.config.max_observation_chars)
                errors_in_a_row = 0 if result.ok else errors_in_a_row + 1
            if (reply := observation_message(self.dialect, turn)) is not None:
                messages.append(ChatMessage(role=Role.USER, content=reply))
            if on_turn is not None:
                on_turn(turn)
            if turn.kind == ActionKind.ANSWER:
                return
            if errors_in_a_row >= self.config.max_consecutive_errors:
                trajectory.termination = Termination.EXECUTION_ERRORS
                return


def _turn_sampling(trajectory: Trajectory, index: int) -> SamplingParams:
    """A seeded run gives every sample and turn its own seed, so trials differ yet replay exactly."""
    seed = trajectory.sampling.seed
    if seed is None:
        return trajectory.sampling
    return trajectory.sampling.model_copy(update={"seed": (seed + 100_003 * trajectory.sample + index) % 2**31})


def _started_sandbox(files: list[str], config: AgentConfig, options: dict[str, object]) -> Sandbox:
    sandbox = Sandbox(files, mode=config.sandbox_mode, limits=config.limits, **options)  # type: ignore[arg-type]
    sandbox.prestart()
    return sandbox


def build_context(task: Task, max_chars: int) -> PromptContext:
    """The files' names and bounded meta-information, as the first prompt shows them."""
    budget = max_chars // max(1, len(task.files))
    infos, has_database = [], False
    for path in task.files:
        try:
            stat = os.stat(path)
            info, is_database = _file_info(os.path.abspath(path), stat.st_mtime_ns, stat.st_size, budget)
        except (OSError, DataFileError) as exc:  # the agent can still try to read it; tell it what we know
            info, is_database = f"{os.path.basename(path)}: {exc}", False
        infos.append(info)
        has_database = has_database or is_database
    return PromptContext(
        task=task,
        file_names=[os.path.basename(p) for p in task.files],
        file_info="\n\n".join(infos),
        has_database=has_database,
    )


@functools.lru_cache(maxsize=256)
def _file_info(path: str, mtime_ns: int, size: int, max_chars: int) -> tuple[str, bool]:
    """A file's rendered description and whether it is a database, remembered per file version:
    many tasks and samples share a file, and describing it holds the GIL for tens of milliseconds."""
    return describe(path, max_chars=max_chars).render(), detect_kind(path) == FileKind.SQLITE


def clip_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail of a long observation, with a note of what was cut."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"
