"""Conversations of the Ask page: files, a sandbox that lives across questions, and the events of each answer.

A conversation's questions run one at a time in its own sandbox, so a follow-up sees the variables the
earlier cells made (:meth:`Agent.follow_up`). Model code runs only in that sandbox, never in the server.
A stopped or failed question closes the sandbox; the next question then starts afresh with the same files.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datalyst.agent import ActionKind, Agent, AgentConfig, AgentState, Step, Termination, Trajectory, Turn
from datalyst.errors import DatalystError
from datalyst.llm import ChatModel, load_model
from datalyst.synth import value_in_outputs
from datalyst.tasks import Task
from datalyst.web._security import Refused

Emit = Callable[[str, dict[str, Any]], None]
"""Sends one event (its name and its data) to the page that asked."""


class Models:
    """The chat models the server has loaded, one per spec, shared by every conversation."""

    def __init__(self) -> None:
        self._models: dict[str, ChatModel] = {}
        self._lock = asyncio.Lock()

    async def get(self, spec: str) -> ChatModel:
        async with self._lock:
            if spec not in self._models:
                self._models[spec] = await asyncio.to_thread(load_model, spec)
            return self._models[spec]

    async def aclose(self) -> None:
        models, self._models = list(self._models.values()), {}
        for model in models:
            await model.aclose()


@dataclass
class Conversation:
    """Questions about one set of files; ``folder`` holds its uploads and goes when it closes."""

    id: str
    files: list[Path]
    folder: Path | None
    model: str | None = None
    dialect: str | None = None
    trajectories: list[Trajectory] = field(default_factory=list)
    agent: Agent | None = None
    state: AgentState | None = None
    """Where the last question ended, its sandbox still open for a follow-up; None before the first question and
    after a stop."""
    running: asyncio.Task[None] | None = None
    touched: float = field(default_factory=time.monotonic)

    @property
    def busy(self) -> bool:
        return self.running is not None and not self.running.done()

    async def ask(self, question: str, model: ChatModel, config: AgentConfig, emit: Emit) -> None:
        """Answer ``question``, emitting each turn as the model writes it and again once its code has run."""
        self.touched = time.monotonic()
        if self.agent is None or self.agent.model is not model or self.agent.config != config:
            await self.close_sandbox()
            self.agent = Agent(model, config)
        task = Task(id=f"{self.id}-{len(self.trajectories) + 1}", question=question, files=[str(f) for f in self.files])
        emit("question", {"index": len(self.trajectories), "question": question, "follow_up": self.state is not None})
        state = self.agent.follow_up(self.state, task) if self.state else await self.agent.start(task)
        self.state, turns = state, []

        def on_turn(turn: Turn) -> None:
            turns.append(turn)
            emit("turn", _turn(turn))

        try:
            state = await self.agent.drive(state, on_step=lambda step: emit("step", _step(step)), on_turn=on_turn)
        except asyncio.CancelledError:
            await self._abandon(state, turns, "stopped by the user")
            emit("stopped", {"turns": len(turns)})
            return
        except DatalystError as exc:  # an unreachable model server, a sandbox that cannot start or crashed
            await self._abandon(state, turns, str(exc))
            emit("error", {"message": str(exc)})
            return
        finally:
            self.touched = time.monotonic()
        self.state = state
        self.trajectories.append(state.trajectory)
        trajectory = state.trajectory
        emit("answer", {"answer": trajectory.answer, "termination": trajectory.termination.value,
                        "ending": trajectory.termination.words,
                        "turns": len(trajectory.turns), "seconds": round(trajectory.duration_s, 2),
                        "evidence": evidence(trajectory)})  # fmt: skip

    async def _abandon(self, state: AgentState, turns: list[Turn], why: str) -> None:
        """Keep the turns the question finished (for the downloads) and close its sandbox."""
        update = {"turns": turns, "termination": Termination.FAILED, "error": why}
        trajectory = state.trajectory.model_copy(update=update)
        self.trajectories.append(trajectory)
        await self.close_sandbox()

    async def close_sandbox(self) -> None:
        state, self.state = self.state, None
        if state is not None:
            await state.sandbox.aclose()

    def stop(self) -> None:
        """Stop the question under way, once: a second cancel would cut short the closing of its sandbox."""
        if self.running is not None and not self.running.done() and not self.running.cancelling():
            self.running.cancel()

    async def aclose(self) -> None:
        if self.running is not None and not self.running.done():
            self.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await self.running
        await self.close_sandbox()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


class Conversations:
    """Every open conversation; idle ones are closed after ``idle_s`` seconds, all of them at shutdown."""

    def __init__(self, *, limit: int, idle_s: float) -> None:
        self.limit, self.idle_s = limit, idle_s
        self._open: dict[str, Conversation] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._open)

    def open(self, files: list[Path], folder: Path | None) -> Conversation:
        if len(self._open) >= self.limit:
            raise Refused(f"{self.limit} conversations are open already; close one first", 429)
        conversation = Conversation(id=uuid.uuid4().hex[:12], files=files, folder=folder)
        self._open[conversation.id] = conversation
        return conversation

    def get(self, conversation_id: str) -> Conversation:
        if conversation_id not in self._open:
            raise Refused(f"no open conversation {conversation_id!r} (it may have been closed when idle)")
        return self._open[conversation_id]

    async def close(self, conversation_id: str) -> None:
        conversation = self._open.pop(conversation_id, None)
        if conversation is not None:
            await conversation.aclose()

    def close_soon(self, conversation_id: str) -> None:
        """Close a conversation from where nothing may be awaited (a stream cut off by its client)."""
        task = asyncio.get_running_loop().create_task(self.close(conversation_id))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close_idle(self) -> None:
        now = time.monotonic()
        for conversation in list(self._open.values()):
            if not conversation.busy and now - conversation.touched > self.idle_s:
                await self.close(conversation.id)

    async def aclose(self) -> None:
        for conversation_id in list(self._open):
            await self.close(conversation_id)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


def _step(step: Step) -> dict[str, Any]:
    return {"kind": step.kind.value, "thought": step.thought, "code": step.code, "answer": step.answer}


def evidence(trajectory: Trajectory) -> dict[str, Any] | None:
    """The output line that backs the answer, and the turn of the cell that printed it: of the lines the cells
    printed without an error, the one with most of the answer's numbers (as mining finds a value in an output: a
    printed number that rounds to it counts; each counted twice) and words, a line with a value of its own before
    one without, the later line first on a tie; None without an answer or such a line."""
    numbers, words = _tokens(trajectory.answer or "")
    best, found = 0, None
    for turn in reversed(trajectory.turns):
        if turn.kind != ActionKind.CODE or turn.result is None or not turn.result.ok:
            continue
        for line in reversed(turn.result.stdout.splitlines()):
            printed, said = _tokens(line)
            score = 2 * sum(value_in_outputs(number, line) for number in numbers) + len(words & said)
            score += 0.5 * bool(score and printed)  # a line that names it and gives a value decides it
            if score > best:
                best, found = score, {"turn": turn.index, "line": line.strip()}
    return found


def _tokens(text: str) -> tuple[set[str], set[str]]:
    """The numbers and the words (less the most common) of ``text``."""
    tokens = [token.lower().rstrip(".,") for token in _TOKEN.findall(text)]
    numbers = {token.replace(",", "") for token in tokens if _NUMBER.fullmatch(token)}
    return numbers, {token for token in tokens if not _NUMBER.fullmatch(token)} - _COMMON


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_TOKEN = re.compile(rf"{_NUMBER.pattern}|[^\W\d_][\w'-]*")
_COMMON = {
    "the", "a", "an", "of", "is", "are", "was", "in", "and", "or", "to", "with", "has", "have", "for", "by", "its",
    "it", "on", "at", "as", "be", "that", "this", "which", "there", "their", "than",
}  # fmt: skip
"""Words too common to tie an answer to a line of output."""


def _without_figures(observation: str, figures: dict[str, str]) -> str:
    """The observation as the page shows it, with the figures drawn below it: their file names left out of the
    line that lists the files the cell wrote."""
    *lines, last = observation.split("\n")
    if not (figures and last.startswith("[files] ")):
        return observation
    files = [name for name in last.removeprefix("[files] ").split(", ") if name not in figures]
    return "\n".join([*lines, *(["[files] " + ", ".join(files)] if files else [])])


def _turn(turn: Turn) -> dict[str, Any]:
    ran = turn.kind == ActionKind.CODE and turn.result is not None
    return {
        "index": turn.index,
        "kind": turn.kind.value,
        "thought": turn.thought,
        "code": turn.code,
        "answer": turn.answer,
        "observation": _without_figures(turn.observation or "", turn.figures),
        "ok": turn.result.ok if ran and turn.result is not None else None,
        "figures": list(turn.figures.values()),
    }
