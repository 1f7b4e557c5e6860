"""The offline expert: a synthesized task's canonical solution, played as a real agent trajectory.

:class:`ExpertAgent` is an :class:`~datalyst.agent.Agent` that writes its own turns instead of sampling
them: a look at the data (the solution's loader, then shape, columns, dtypes and missing values), the
computation in one or more cells, and the answer copied from what those cells really printed. Every
turn goes through the agent's own ``advance``, so it is parsed, run in the sandbox and recorded
exactly like a sampled turn, and ``datalyst.agent.rollout`` runs the expert like any other agent.
A seeded share of trajectories make one mistake (see ``_mistakes``), get its real traceback back and
fix it in the next turn. The solution is cut into cells by ``_solution``; the thoughts that say why
each step is taken come from ``_thoughts``.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Generator, Iterable, Sequence
from random import Random

from pydantic import BaseModel, ConfigDict, Field, field_validator

from datalyst.agent import Agent, AgentConfig, Step, Trajectory, Turn
from datalyst.curate._mistakes import MISSING_IMPORT, MISTAKES, WRONG_FILE, Cell, Facts, Mistake
from datalyst.curate._solution import bound_names_of, compute_cells, split_solution
from datalyst.curate._thoughts import ThoughtWriter
from datalyst.errors import ConfigError
from datalyst.llm import ChatMessage, Completion, SamplingParams
from datalyst.tasks import Task, extract_answers

EXPERT_SPEC = "expert"
"""What ``Trajectory.model`` (and the rollout manifest) reads for the expert's trajectories."""


class ExpertOptions(BaseModel):
    """How the offline expert plays its tasks."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    seed: int = 0
    """Seeds every choice (phrasing, cells, mistakes), together with the task id and the trial."""
    error_share: float = Field(0.25, ge=0.0, le=1.0)
    """Share of trajectories that make one mistake and fix it (where a mistake applies to the task)."""
    mistakes: tuple[str, ...] = tuple(MISTAKES)
    """The kinds of mistake to make (``wrong_column``, ``missing_import``, ``dtype``, ``wrong_file``)."""
    max_compute_cells: int = Field(2, ge=1, le=4, json_schema_extra={"flag": "--max-cells"})
    """Most cells the computation is split into, at results worth printing on the way."""

    @field_validator("mistakes")
    @classmethod
    def _known(cls, kinds: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(kinds) - set(MISTAKES))
        if unknown:
            raise ValueError(f"unknown mistakes {unknown}; choose from {sorted(MISTAKES)}")
        return kinds


class _Unsampled:
    """The expert's model: only a name for the records, since the expert writes its turns itself."""

    spec = EXPERT_SPEC

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        raise ConfigError("the offline expert writes its own turns; it cannot be sampled (use a model for search)")

    async def aclose(self) -> None:
        return None


class ExpertAgent(Agent):
    """Plays each task's canonical solution as a trajectory in the configured dialect. Example::

    agent = ExpertAgent(AgentConfig(dialect="jupiter"), ExpertOptions(seed=1))
    await rollout(expert_tasks(tasks)[0], agent, "run/samples.jsonl")
    """

    def __init__(self, config: AgentConfig | None = None, options: ExpertOptions | None = None) -> None:
        super().__init__(_Unsampled(), config)
        self.options = options or ExpertOptions()

    async def arun(
        self,
        task: Task,
        *,
        trial: int = 0,
        on_turn: Callable[[Turn], None] | None = None,
    ) -> Trajectory:
        """Play ``task`` once; raises ConfigError when it has no usable solution or a planned cell fails."""
        script = _Play(task, trial, self.options).steps()  # a task without a solution fails before any sandbox
        state = await self.start(task, trial=trial)
        try:
            step = next(script)
            while True:
                completion = Completion(text=self.dialect.render(step), finish_reason="stop")
                state = await self.advance(state, completion)
                if on_turn is not None:
                    on_turn(state.turns[-1])
                if state.done:
                    break
                step = script.send(state.turns[-1])
        finally:
            await self.close(state)
        return state.trajectory


def expert_tasks(tasks: Iterable[Task]) -> tuple[list[Task], dict[str, str]]:
    """The tasks the expert can play, and why it cannot play each of the others (task id -> reason)."""
    playable, skipped = [], {}
    for task in tasks:
        if task.earlier:
            skipped[task.id] = "a follow-up question: the expert plays one question per conversation"
            continue
        try:
            split_solution(task)
        except ConfigError as exc:
            skipped[task.id] = str(exc)
        else:
            playable.append(task)
    return playable, skipped


class _Play:
    """One trajectory's script: a generator of steps that reads each turn's real outcome."""

    def __init__(self, task: Task, trial: int, options: ExpertOptions) -> None:
        self.task = task
        self.rng = Random(f"{options.seed}:{task.id}:{trial}")
        solution = split_solution(task)
        kinds = list(options.mistakes)
        self.rng.shuffle(kinds)
        self.kinds = kinds if self.rng.random() < options.error_share else []
        self.write = ThoughtWriter(self.rng, task)
        self.files = tuple(os.path.basename(path) for path in task.files)
        self.look = Cell(_look_code(solution.prelude, self.rng))
        self.cells = compute_cells(solution.body, self.rng, options.max_compute_cells, bound_names_of(self.look.code))

    def steps(self) -> Generator[Step, Turn, None]:
        mistake = self._look_mistake()
        turn = yield from self._run(self.look, self.write.look(self.files), mistake)
        facts = _read_facts(turn.result.stdout if turn.result else "", self.files)
        pending = [] if mistake else [kind for kind in self.kinds if kind != WRONG_FILE]
        answers: dict[str, str] = {}
        previous = None
        for cell, shown in self.cells:
            mistake = next((m for kind in pending if (m := MISTAKES[kind](cell, facts, self.rng))), None)
            pending = [] if mistake else pending
            written = mistake.code if mistake else cell.code  # the thought goes with the cell as run
            thought = self.write.compute(written, facts, previous, shown, mistake.intent if mistake else "")
            turn = yield from self._run(cell, thought, mistake)
            answers.update(extract_answers(turn.observation or ""))
            previous = shown
        if not answers:
            raise ConfigError(f"task {self.task.id}: its solution printed no @name[value] answers in the sandbox")
        yield Step(thought=self.write.answer(answers), answer=self.write.answer_text(answers))

    def _look_mistake(self) -> Mistake | None:
        """A mistake in the look cell: a misspelt file, or an import when no compute cell has one to drop."""
        first = self.kinds[0] if self.kinds else None
        facts = Facts(self.files)
        if first == MISSING_IMPORT and any(MISTAKES[first](cell, facts, Random(0)) for cell, _ in self.cells):
            return None
        return MISTAKES[first](self.look, facts, self.rng) if first in (WRONG_FILE, MISSING_IMPORT) else None

    def _run(self, cell: Cell, thought: str, mistake: Mistake | None) -> Generator[Step, Turn, Turn]:
        """Run ``cell`` (first broken by ``mistake``, then fixed if it really failed); its last turn."""
        turn = yield Step(thought=thought, code=mistake.code if mistake else cell.code)
        if mistake and turn.cell_failed:
            turn = yield Step(thought=self.write.fix(turn, mistake), code=cell.code)
        if turn.result is None or not turn.result.ok:
            error = turn.result.error if turn.result else None
            what = f"{error.ename}: {error.evalue}" if error else "no result"
            raise ConfigError(f"task {self.task.id}: a cell of its solution failed in the sandbox ({what})")
        return turn


def _look_code(prelude: str, rng: Random) -> str:
    """The first cell: load, then shape, columns, and ``df.info()`` (dtypes and non-null counts) of the whole
    table. It names no column, since the agent has not yet seen their exact spelling (the question's words
    may differ), and it prints with plain pandas calls that read right on any frame."""
    shape = rng.choice(
        ("print(df.shape)", 'print("shape:", df.shape)', 'print(f"{len(df)} rows, {df.shape[1]} columns")')
    )
    names = rng.choice(("print(df.columns.tolist())", "print(list(df.columns))", 'print("columns:", list(df.columns))'))
    head = ["df.head(3)"] if rng.random() < 0.5 else []
    return "\n".join([prelude, "", shape, names, "df.info()", *head])


_LITERAL_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)
_INFO_ROW = re.compile(r"^\s*\d+\s+(.+?)\s+(\d+) non-null\s+(\S+)\s*$")


def _read_facts(stdout: str, files: tuple[str, ...]) -> Facts:
    """What the look printed: the row count, every column, and dtypes and missing counts (from ``df.info()``)."""
    rows, columns, dtypes, counts = None, (), {}, {}
    for line in stdout.splitlines():
        if match := re.match(r"(\d+) rows, \d+ columns$", line) or re.match(r"(?:Range)?Index: (\d+) entries", line):
            rows = int(match.group(1))
        elif match := _INFO_ROW.match(line):
            dtypes[match.group(1)], counts[match.group(1)] = match.group(3), int(match.group(2))
        else:
            try:
                value = ast.literal_eval(re.sub(r"^[a-z]+: ", "", line))
            except _LITERAL_ERRORS:
                continue
            if isinstance(value, tuple) and len(value) == 2:
                rows = value[0]
            elif isinstance(value, list) and not columns:
                columns = tuple(str(item) for item in value)
    missing = {name: rows - count for name, count in counts.items()} if rows is not None else {}
    return Facts(files, columns, dtypes, missing, rows)
