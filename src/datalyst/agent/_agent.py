"""The step-wise agent: explicit state, ``propose`` (ask the model) and ``advance`` (act and observe).

A plain run is a short driver over the two steps (:meth:`Agent.arun`); tree search proposes several
turns for one state and advances each; RL records what every step generated.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from datalyst import __version__
from datalyst.agent._described import description, file_columns
from datalyst.agent._dialect import ActionKind, Dialect, PromptContext, Step
from datalyst.agent._dialects import get_dialect
from datalyst.agent._export import observation_message, to_messages
from datalyst.agent._figures import collect_figures
from datalyst.agent._hints import column_hint
from datalyst.agent._preload import preload_cell
from datalyst.agent._tracebacks import compact_traceback
from datalyst.agent._trajectory import Termination, Trajectory, Turn, cell_key, trajectory_id
from datalyst.data import FileKind
from datalyst.errors import DataFileError
from datalyst.llm import ChatMessage, ChatModel, Completion, ContextOverflow, Role, SamplingParams
from datalyst.sandbox import CodeExecutor, ExecResult, Limits, Mode, Sandbox
from datalyst.tasks import Task, extract_answers, format_problems
from datalyst.text import clip_middle

log = logging.getLogger(__name__)
REPEATED_FAILURE = (
    "This is the code of an earlier cell, which failed, so it was not run again: it would fail the same way. "
    "Read the error below and change the code, or answer if you can."
)
REPEATED_SUCCESS = (
    "This is the code of an earlier cell, which already ran, so it was not run again: what it defined is "
    "still there and what it printed is above. Take the next step, or answer if you can."
)
"""What the agent says instead of running a cell again (``AgentConfig.repeat_guard``)."""
REDRAWS = 2
"""Times a turn that repeats an earlier cell is drawn again before the guard's message (``repeat_guard``)."""
REDRAW_TEMPERATURE = 0.8
"""The least temperature a turn is drawn again at: greedy decoding would write the same cell."""

TurnCallback = Callable[[Turn], None]
"""Called with every finished turn (``datalyst ask`` prints them as they come)."""
StepCallback = Callable[[Step], None]
"""Called with every turn as the model wrote it, before its code runs (the web app streams it)."""
Guidance = Callable[[Task], str]
"""Text to add to a task's first message while sampling (``""`` for none); recorded as ``Trajectory.guidance``."""


class AgentConfig(BaseModel):
    """How the agent runs one task."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dialect: str = "datamind"
    """Turn format: ``datamind``, ``jupiter`` or ``datarus``."""
    max_turns: int = Field(10, ge=1)
    """Turns per trajectory."""
    max_consecutive_errors: int = Field(3, ge=1)
    """Stop after this many code turns in a row that failed."""
    max_observation_chars: int = Field(4000, ge=200)
    """Longest output or traceback the model is shown (head and tail kept)."""
    max_file_info_chars: int = Field(6000, ge=500)
    """Characters of the first message that describe the data files (all files together)."""
    short_tracebacks: bool = False
    """Show a failing cell's own frames and its error, not the frames inside libraries. The record keeps the
    whole traceback."""
    repeat_guard: bool = False
    """Draw again a turn that repeats an earlier cell; if it still does, do not run it. A code turn that repeats
    an earlier cell of the run (whitespace aside) is drawn again (up to ``REDRAWS``
    times, at a temperature of at least ``REDRAW_TEMPERATURE``); one that still repeats it is not run again: its
    observation says so, above the earlier cell's error when it failed, and it counts as a failing cell (a step
    that made no progress). On for ``ask`` (:data:`ANALYST_OPTIONS`)."""
    column_hints: bool = False
    """Under a failing cell that named a missing column, show the closest real columns. A KeyError or a frame's
    AttributeError names it (``datalyst.agent._hints``)."""
    last_call: bool = False
    """When no turn is left, or too many cells failed, ask once more for the best answer. The model is told, and
    code in that one more turn is not run."""
    format_check: bool = False
    """When an answer misses a part of the task's answer format, say so and ask once again. Also when it gives a
    number with more decimal places than the format allows (:func:`datalyst.tasks.format_problems`): one more
    turn, begun with the answer keyword; a reply that is empty or fits the format worse keeps the first answer."""
    preload: bool = False
    """Load the data files into DataFrames (df) before the first turn and say so. It uses datalyst's own reader and
    shows that code and the frames' shapes in the first message (``datalyst.agent._preload``)."""
    sampling: SamplingParams = SamplingParams(temperature=0.0, max_tokens=1024)
    sandbox_mode: Mode = "session"
    limits: Limits = Limits()
    require_isolation: bool = True
    """Refuse to run code the sandbox cannot fully isolate; False runs it degraded, with a warning."""


ANALYST_OPTIONS: dict[str, Any] = {"last_call": True, "format_check": True, "repeat_guard": True}
"""The scaffold options that raised pass@1 on DABench's dev split (docs/RESULTS.md, the scaffold measured one
change at a time), turned on for the agent analysts talk to (:func:`analyst_config`)."""


def analyst_config(**fields: Any) -> AgentConfig:
    """The agent of ``ask`` and ``serve``: :data:`ANALYST_OPTIONS` on :class:`AgentConfig`'s plain defaults, which
    training, curation and search keep (every token of their trajectories is the model's own); ``fields`` set the
    rest."""
    return AgentConfig(**(ANALYST_OPTIONS | fields))


class PendingSandbox:
    """A trajectory's sandbox, starting (or forking) while the model writes.

    Awaiting it never cancels the start: a sandbox that finishes starting after its trajectory was
    cancelled is still closed by :meth:`aclose`, so nothing leaks.
    """

    def __init__(self, future: asyncio.Future[CodeExecutor]) -> None:
        self._future = future
        # A start that fails after its trajectory was cancelled has no one left to await it: mark its
        # error as seen, so asyncio does not print it as "never retrieved" (awaiters still get it).
        self._future.add_done_callback(lambda future: future.cancelled() or future.exception())

    @classmethod
    def start(cls, files: list[str], config: AgentConfig) -> PendingSandbox:
        options = {"mode": config.sandbox_mode, "limits": config.limits, "require_isolation": config.require_isolation}
        return cls(asyncio.ensure_future(Sandbox.astarted(files, **options)))

    def fork(self) -> PendingSandbox:
        """A sandbox of its own in this one's state (variables and files), made once this one has started."""

        async def forked() -> CodeExecutor:
            return await (await self.get()).afork()

        return PendingSandbox(asyncio.ensure_future(forked()))

    async def get(self) -> CodeExecutor:
        return await asyncio.shield(self._future)

    async def aclose(self) -> None:
        try:
            sandbox = await asyncio.shield(self._future)
        except Exception:  # it never started, so there is nothing to close
            return
        await sandbox.aclose()


@dataclass(frozen=True)
class AgentState:
    """Where one trajectory stands: the conversation so far, its record, and its sandbox.

    States are values: :meth:`Agent.advance` returns a new one. Successors of a state share its
    sandbox (session mode keeps variables in it), so advance only one successor of a state per sandbox;
    :meth:`Agent.branch` gives a state a forked sandbox of its own.
    """

    trajectory: Trajectory
    messages: tuple[ChatMessage, ...]
    sandbox: PendingSandbox
    errors_in_a_row: int = 0
    last_call: Termination | None = None
    """Set when the model was asked for its answer (the last call, or a format check): the next turn is begun for it
    (:meth:`Agent.begun`), and this is how the run ends if that turn gives no answer."""
    done: bool = False
    started: float = dataclasses.field(default_factory=time.monotonic)

    @property
    def turns(self) -> list[Turn]:
        return self.trajectory.turns


class Agent:
    """Runs tasks with one model. Example::

    agent = Agent(load_model("embedded:small"), AgentConfig(dialect="datamind"))
    trajectory = await agent.arun(Task(id="1", question="How many rows?", files=["sales.csv"]))
    """

    def __init__(
        self, model: ChatModel, config: AgentConfig | None = None, *, guidance: Guidance | None = None
    ) -> None:
        self.model = model
        self.config = config or AgentConfig()
        self.guidance = guidance
        self.dialect: Dialect = get_dialect(self.config.dialect)
        self.sampling = self.config.sampling.model_copy(update={"n": 1, "stop": self.dialect.stop})
        """What every turn is sampled with (the dialect's stop sequences added)."""

    async def arun(self, task: Task, *, trial: int = 0, on_turn: TurnCallback | None = None) -> Trajectory:
        """Solve ``task`` once and return the whole trajectory.

        The model's mistakes are part of the trajectory; our own failures (an unreachable model
        server, a missing data file) are raised.
        """
        state = await self.start(task, trial=trial)
        try:
            state = await self.drive(state, on_turn=on_turn)
        finally:
            await self.close(state)
        return state.trajectory

    async def drive(
        self, state: AgentState, *, on_turn: TurnCallback | None = None, on_step: StepCallback | None = None
    ) -> AgentState:
        """Take turns from ``state`` until it ends, and return the last state (its sandbox still open).

        ``on_step`` sees each turn as soon as it is written, before its code runs; ``on_turn`` sees it finished.
        """
        while not state.done:
            began = time.monotonic()
            try:
                completion, redraws = await self._next_turn(state)
            except ContextOverflow as exc:  # the conversation outgrew the model: an ending, not a failure
                return _ended(state, Termination.CONTEXT_OVERFLOW, str(exc))
            if on_step is not None:
                on_step(self.read(completion)[1])
            state = await self.advance(state, completion, generation_s=time.monotonic() - began, redraws=redraws)
            if on_turn is not None:
                on_turn(state.turns[-1])
        return state

    async def start(self, task: Task, *, trial: int = 0) -> AgentState:
        """The state before the first turn on ``task``'s question: the opening prompt written, the sandbox starting.

        A follow-up task's earlier questions are put first, each answered by the model in the same conversation and
        sandbox (:meth:`follow_up`); the state returned asks ``task``'s own question after them.
        """
        if not task.earlier:
            return await self._open(task, trial, guided=True)
        first, *rest = task.earlier_tasks()
        state = await self._open(first, trial, guided=False)
        try:
            for question in (*rest, task):
                state = self.follow_up(await self.drive(state), question)
        except BaseException:
            await self.close(state)
            raise
        return state

    async def _open(self, task: Task, trial: int, *, guided: bool) -> AgentState:
        """The opening prompt of ``task`` (with the sampling guidance when ``guided``), its sandbox starting."""
        context = await asyncio.to_thread(build_context, task, self.config.max_file_info_chars)
        sandbox = PendingSandbox.start(task.files, self.config)
        setup = preload_cell(task.files) if self.config.preload else None
        if setup is not None:
            try:
                result = await (await sandbox.get()).arun_python(setup)
            except BaseException:
                await sandbox.aclose()
                raise
            if result.ok:
                context.preloaded = f"```python\n{setup}\n```\n{result.stdout.strip()}"
            else:  # the model reads the files itself, as without preload (the cell's output is not shown)
                setup = None
        system, first = self.dialect.opening(context)
        hint = self.guidance(task).strip() if self.guidance and guided else ""
        added = f"\n\n{hint}" if hint else ""
        first += added
        trajectory = self.new_trajectory(
            task, trial, system_prompt=system, first_message=first, guidance=added, setup_code=setup,
            termination=Termination.MAX_TURNS,
        )  # fmt: skip
        messages = (ChatMessage(role=Role.SYSTEM, content=system), ChatMessage(role=Role.USER, content=first))
        return AgentState(trajectory, messages, sandbox)

    def follow_up(self, state: AgentState, task: Task) -> AgentState:
        """The state that asks ``task`` (a question about the same files) after ``state`` ended: the conversation
        goes on in the same sandbox, so the earlier cells' variables are still there. Its record is timed from the
        conversation's start (``duration_s`` is what the whole conversation took)."""
        first = self.dialect.follow_up(task)
        system, *earlier = state.messages
        trajectory = self.new_trajectory(
            task, state.trajectory.trial, system_prompt=system.content, earlier=earlier, first_message=first,
            termination=Termination.MAX_TURNS,
        ).model_copy(update={"started_at": state.trajectory.started_at})  # fmt: skip
        messages = (*state.messages, ChatMessage(role=Role.USER, content=first))
        return AgentState(trajectory, messages, state.sandbox, started=state.started)

    def new_trajectory(self, task: Task, trial: int, **fields: object) -> Trajectory:
        """A trajectory of ``task`` by this agent, started now, with ``fields`` (prompts, termination, ...)."""
        return Trajectory(
            id=trajectory_id(task.id, trial),
            task=task,
            trial=trial,
            dialect=self.dialect.name,
            model=self.model.spec,
            sampling=self.sampling,
            started_at=datetime.now(UTC),
            datalyst_version=__version__,
            **fields,
        )

    async def _next_turn(self, state: AgentState) -> tuple[Completion, int]:
        """The model's next turn and how many times it was drawn again (``repeat_guard``: while it repeats an
        earlier cell, up to ``REDRAWS`` times)."""
        [completion] = await self.propose(state)
        redraws = 0
        while self.config.repeat_guard and redraws < REDRAWS and _repeated(state, self.read(completion)[1]):
            redraws += 1
            [completion] = await self.propose(state, redraw=redraws)
        return completion, redraws

    async def propose(
        self, state: AgentState, n: int = 1, *, logprobs: bool = False, redraw: int = 0
    ) -> list[Completion]:
        """``n`` candidate next turns for ``state`` (raises ContextOverflow when the prompt no longer fits).

        A seeded configuration gives every trial and turn its own seed, so trials differ yet replay exactly;
        ``redraw`` k > 0 draws the turn again with a seed of its own, at ``REDRAW_TEMPERATURE`` at least.
        After the last call or a format check the turn is begun for the model (:meth:`begun`), so it answers: those
        turns' text holds that start, and no token ids (the model did not write them all).
        """
        params = turn_params(
            self.sampling, state.trajectory.trial, len(state.turns), n=n, logprobs=logprobs, redraw=redraw
        )
        if state.last_call is None:
            return await self.model.agenerate(list(state.messages), params)
        begun = ChatMessage(role=Role.ASSISTANT, content=self.begun(state))
        completions = await self.model.agenerate([*state.messages, begun], params)
        unknown = {"token_ids": None, "offsets": None, "logprobs": None}
        return [c.model_copy(update={"text": begun.content + c.text, **unknown}) for c in completions]

    def begun(self, state: AgentState) -> str:
        """How the agent begins a turn it asks an answer of: the dialect's ``answer_start``, and after a format check
        of an answer that gave none of the format's parts, the first part's name (``Formatted answer: @mean[``).
        Begun so after an answer that gave some parts, ``medium`` wrote that part alone (dev, docs/RESULTS.md)."""
        last = state.turns[-1] if state.turns else None
        asked = list(extract_answers(state.trajectory.task.format)) if last and last.format_check else []
        if not asked or set(extract_answers(last.answer or "")) & set(asked):
            return self.dialect.answer_start
        space = "" if self.dialect.answer_start[-1:].isspace() or self.dialect.answer_start.endswith(">") else " "
        return f"{self.dialect.answer_start}{space}@{asked[0]}["

    def read(self, completion: Completion) -> tuple[Completion, Step]:
        """``completion`` kept up to its first action, and the step it takes."""
        kept = completion.cut(self.dialect.action_end(completion.text))
        return kept, self.dialect.parse(kept.text)

    def branch(self, state: AgentState) -> AgentState:
        """``state`` with a sandbox of its own, forked from its sandbox: the two can then advance apart."""
        return dataclasses.replace(state, sandbox=state.sandbox.fork())

    async def advance(
        self, state: AgentState, completion: Completion, *, generation_s: float = 0.0, redraws: int = 0
    ) -> AgentState:
        """The state after ``completion``: the turn parsed, kept up to its first action, its code run and observed
        (``redraws``: the times the turn was drawn again before this one, recorded with it)."""
        kept, step = self.read(completion)
        turn = Turn(
            index=len(state.turns),
            raw=completion.text,
            text=kept.text,
            token_ids=kept.token_ids,
            logprobs=[token.logprob for token in kept.logprobs] if kept.logprobs is not None else None,
            thought=step.thought,
            kind=step.kind,
            code=step.code,
            answer=step.answer,
            finish_reason=completion.finish_reason,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            generation_s=generation_s,
            first_token_s=completion.first_token_s,
            redraws=redraws,
        )
        errors_in_a_row = state.errors_in_a_row
        if state.last_call is not None:
            pass  # the turn after the last call: nothing runs, nothing is said
        elif turn.kind == ActionKind.VOID:
            turn.observation = self.dialect.void_feedback()
        elif turn.kind == ActionKind.CODE and self.config.repeat_guard and (earlier := _repeated(state, turn)):
            turn.result = earlier.result
            turn.observation = (
                REPEATED_SUCCESS
                if earlier.result.ok
                else f"{REPEATED_FAILURE}\n{self.observe(earlier.result, state.trajectory.task.files)}"
            )
            errors_in_a_row += 1
        elif turn.kind == ActionKind.CODE:
            sandbox = await state.sandbox.get()
            executed = time.monotonic()
            result = await sandbox.arun_python(turn.code or "")
            turn.execution_s = time.monotonic() - executed
            turn.result = result
            turn.figures = collect_figures(sandbox.host_workdir, result)
            turn.observation = self.observe(result, state.trajectory.task.files)
            errors_in_a_row = 0 if result.ok else errors_in_a_row + 1
        ending = self._ending(state, turn, errors_in_a_row)
        if ending is not None and self.config.last_call and state.last_call is None:
            turn.last_call = self.dialect.last_call()
        if turn.kind == ActionKind.ANSWER and (problems := self._format_problems(state, turn)):
            turn.format_check = self.dialect.format_check(problems, state.trajectory.task.format)
            ending = Termination.ANSWER  # the run's end if the next turn gives no answer
        messages = [*state.messages, ChatMessage(role=Role.ASSISTANT, content=turn.text)]
        if (reply := observation_message(self.dialect, turn)) is not None:
            messages.append(ChatMessage(role=Role.USER, content=reply))
        trajectory = state.trajectory.model_copy(update={"turns": [*state.turns, turn]})
        new = dataclasses.replace(
            state,
            trajectory=trajectory,
            messages=tuple(messages),
            errors_in_a_row=errors_in_a_row,
            last_call=ending if turn.last_call or turn.format_check else None,
        )
        if turn.kind == ActionKind.ANSWER:
            trajectory.answer = self._kept_answer(state, turn)
            return new if turn.format_check else _ended(new, Termination.ANSWER)
        if state.last_call is not None:
            return _ended(new, state.last_call)
        return new if ending is None or turn.last_call else _ended(new, ending)

    def _kept_answer(self, state: AgentState, answer: Turn) -> str | None:
        """The run's answer after ``answer``: its own, unless the model wrote nothing after what the agent began the
        turn with, or the turn replies to a format check and fits the format worse than the answer checked."""
        before, answer_format = state.trajectory.answer, state.trajectory.task.format
        if not answer.answer or answer.raw.strip() == self.begun(state).strip():
            return before
        checked = bool(state.turns) and state.turns[-1].format_check is not None
        if (
            checked
            and before
            and len(format_problems(answer_format, answer.answer)) > len(format_problems(answer_format, before))
        ):
            return before
        return answer.answer

    def _format_problems(self, state: AgentState, answer: Turn) -> list[str]:
        """What keeps ``answer`` from fitting the task's format, when ``format_check`` asks and no check was made."""
        if not self.config.format_check or any(turn.format_check for turn in state.turns):
            return []
        return format_problems(state.trajectory.task.format, answer.answer or "")

    def _ending(self, state: AgentState, turn: Turn, errors_in_a_row: int) -> Termination | None:
        """How the run ends after ``turn`` when it gives no answer, or None while it goes on."""
        if turn.kind == ActionKind.ANSWER or state.last_call is not None:
            return None
        if errors_in_a_row >= self.config.max_consecutive_errors:
            return Termination.EXECUTION_ERRORS
        return Termination.MAX_TURNS if len(state.turns) + 1 >= self.config.max_turns else None

    def observe(self, result: ExecResult, files: Sequence[str] = ()) -> str:
        """What the model is shown of a cell's result: its text, the traceback compacted with
        ``short_tracebacks``, clipped in the middle to ``max_observation_chars``, then with ``column_hints`` the
        columns of ``files`` closest to a missing one."""
        error = result.error
        if self.config.short_tracebacks and error is not None:
            result = result.model_copy(
                update={"error": error.model_copy(update={"traceback": compact_traceback(error.traceback)})}
            )
        text = clip_middle(result.render(), self.config.max_observation_chars)
        if self.config.column_hints and error is not None and (hint := column_hint(error, file_columns(files))):
            text = f"{text}\n{hint}"
        return text

    async def restore(self, trajectory: Trajectory) -> AgentState:
        """The state ``trajectory`` ended in, rebuilt: its conversation, and its cells run again in a fresh sandbox
        (for variables and files; the record keeps what they printed the first time)."""
        messages = tuple(ChatMessage(role=m.role, content=m.content) for m in to_messages(trajectory))
        errors = 0
        for turn in trajectory.turns:
            if turn.kind == ActionKind.CODE:
                errors = 0 if turn.result is not None and turn.result.ok else errors + 1
        state = AgentState(trajectory, messages, PendingSandbox.start(trajectory.task.files, self.config),
                           errors_in_a_row=errors)  # fmt: skip
        try:
            sandbox = await state.sandbox.get()
            ran = [t.code or "" for t in trajectory.turns if t.kind == ActionKind.CODE and t.result is not None]
            for code in [trajectory.setup_code or "", *ran]:
                if code:
                    await sandbox.arun_python(code)
        except BaseException:
            await state.sandbox.aclose()
            raise
        return state

    async def close(self, state: AgentState) -> None:
        """Close the state's sandbox (and every successor's: they share it)."""
        await state.sandbox.aclose()


def turn_params(
    sampling: SamplingParams, trial: int, index: int, *, n: int = 1, logprobs: bool = False, redraw: int = 0
) -> SamplingParams:
    """How turn ``index`` of trial ``trial`` is sampled, in its drawing ``redraw`` (see :meth:`Agent.propose`)."""
    params = sampling.model_copy(update={"n": n, "logprobs": logprobs or sampling.logprobs})
    if redraw:
        params = params.model_copy(update={"temperature": max(params.temperature, REDRAW_TEMPERATURE)})
    if params.seed is not None:
        seed = params.seed + 100_003 * trial + index + 7_919 * redraw
        params = params.model_copy(update={"seed": seed % 2**31})
    return params


def recorded_calls(trajectory: Trajectory) -> list[tuple[list[ChatMessage], SamplingParams, Completion]]:
    """The model calls that wrote ``trajectory``'s turns: each turn's conversation, sampling and completion, up
    to the first turn whose call the record does not tell (one drawn again, or one after the last call)."""
    dialect, trial = get_dialect(trajectory.dialect), trajectory.trial
    conversation = [ChatMessage(role=m.role, content=m.content) for m in to_messages(trajectory)]
    calls, at = [], 2 + len(trajectory.earlier)  # the system prompt, any earlier conversation, the question
    for turn, before in zip(trajectory.turns, [None, *trajectory.turns], strict=False):
        if turn.redraws or (before is not None and (before.last_call or before.format_check)):
            break
        calls.append((conversation[:at], turn_params(trajectory.sampling, trial, turn.index), _as_completed(turn)))
        at += 1 + (observation_message(dialect, turn) is not None)
    return calls


def _as_completed(turn: Turn) -> Completion:
    """The completion that wrote ``turn``, cut by :meth:`Agent.read` where it was cut then. A cut keeps whole
    tokens, so the kept text may end past the action; the record keeps its length and token ids, not where each
    token ends, so the offsets given mark only the kept text's end (and the completion's)."""
    kept = len(turn.token_ids) if turn.token_ids else 1
    ends = [0] * (kept - 1) + [len(turn.text)] + ([len(turn.raw)] if turn.raw != turn.text else [])
    return Completion(
        text=turn.raw, finish_reason=turn.finish_reason, prompt_tokens=turn.prompt_tokens,
        completion_tokens=turn.completion_tokens, token_ids=turn.token_ids, offsets=ends,
    )  # fmt: skip


def _repeated(state: AgentState, turn: Turn | Step) -> Turn | None:
    """The latest code turn of ``state`` that ran the code ``turn`` would run, if any."""
    if turn.kind != ActionKind.CODE:
        return None
    key = cell_key(turn.code or "")
    ran = (t for t in reversed(state.turns) if t.kind == ActionKind.CODE and t.result is not None)
    return next((t for t in ran if cell_key(t.code or "") == key), None)


def _ended(state: AgentState, termination: Termination, error: str | None = None) -> AgentState:
    update = {"termination": termination, "error": error, "duration_s": time.monotonic() - state.started}
    trajectory = state.trajectory.model_copy(update=update)
    return dataclasses.replace(state, trajectory=trajectory, done=True)


def build_context(task: Task, max_chars: int) -> PromptContext:
    """The files' names and bounded meta-information, as the first prompt shows them."""
    budget = max_chars // max(1, len(task.files))
    infos, has_database = [], False
    for path in task.files:
        try:
            described = description(path)
            info, is_database = described.render(budget), described.kind == FileKind.SQLITE
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
