"""The offline expert: a synthesized task's canonical solution, played as a real agent trajectory.

:class:`ExpertAgent` is an :class:`~datalyst.agent.Agent` that writes its own turns instead of sampling
them: a look at the data (the solution's loader, then shape, columns, dtypes and missing values), the
computation in one or more cells, and the answer copied from what those cells really printed. Every
turn goes through the agent's own ``advance``, so it is parsed, run in the sandbox and recorded
exactly like a sampled turn, and ``datalyst.agent.rollout`` runs the expert like any other agent.
A seeded share of trajectories make one mistake (see ``_mistakes``), get its real traceback back and
fix it in the next turn. Thoughts come from varied templates that say why each step is taken.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from random import Random

from pydantic import BaseModel, ConfigDict, Field, field_validator

from datalyst.agent import Agent, AgentConfig, Step, Trajectory, Turn
from datalyst.curate._mistakes import (
    MISSING_IMPORT,
    MISTAKES,
    WRONG_FILE,
    Cell,
    Facts,
    Mistake,
    bound_names,
    column_literals,
    statements,
    written_names,
)
from datalyst.errors import ConfigError
from datalyst.judge import extract_answers
from datalyst.llm import ChatMessage, Completion, SamplingParams
from datalyst.synth import category
from datalyst.tasks import Task

EXPERT_SPEC = "expert"
"""What ``Trajectory.model`` (and the rollout manifest) reads for the expert's trajectories."""


class ExpertOptions(BaseModel):
    """How the offline expert plays its tasks."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    """Seeds every choice (phrasing, cells, mistakes), together with the task id and the trial."""
    error_share: float = Field(0.25, ge=0.0, le=1.0)
    """Share of trajectories that make one mistake and fix it (where a mistake applies to the task)."""
    mistakes: tuple[str, ...] = tuple(MISTAKES)
    """The kinds of mistake to make (``wrong_column``, ``missing_import``, ``dtype``, ``wrong_file``)."""
    max_compute_cells: int = Field(2, ge=1, le=4)
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
        executor: Executor | None = None,
    ) -> Trajectory:
        """Play ``task`` once; raises ConfigError when it has no usable solution or a planned cell fails."""
        script = _Play(task, trial, self.options).steps()  # a task without a solution fails before any sandbox
        state = await self.start(task, trial=trial, executor=executor)
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


@dataclass(frozen=True)
class Solution:
    """A solution cut in two: the loader (up to the statement that assigns ``df``) and the computation."""

    prelude: str
    body: str


def split_solution(task: Task) -> Solution:
    """``task.solution`` split at the top-level statement that assigns ``df`` (raises ConfigError)."""
    if not task.solution:
        raise ConfigError(f"task {task.id} has no solution: the offline expert plays only tasks that carry one")
    try:
        body = statements(task.solution)
    except SyntaxError as exc:
        raise ConfigError(f"task {task.id}: its solution is not valid Python ({exc.msg}, line {exc.lineno})") from exc
    loads = next((i for i, stmt in enumerate(body) if "df" in bound_names(stmt)), None)
    if loads is None or loads == len(body) - 1:
        raise ConfigError(f"task {task.id}: its solution does not load `df` and then compute, so it has no loader")
    lines = task.solution.splitlines()
    cut = body[loads].end_lineno or 0
    return Solution("\n".join(lines[:cut]).strip("\n"), "\n".join(lines[cut:]).strip("\n"))


def expert_tasks(tasks: Iterable[Task]) -> tuple[list[Task], dict[str, str]]:
    """The tasks the expert can play, and why it cannot play each of the others (task id -> reason)."""
    playable, skipped = [], {}
    for task in tasks:
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
        self.write = _Writer(self.rng, task)
        self.files = tuple(os.path.basename(path) for path in task.files)
        body = statements(solution.body)
        self.columns = _loaded_columns(body)
        self.look = Cell(_look_code(solution.prelude, self.columns, self.rng))
        self.cells = _cells(solution.body, self.rng, options.max_compute_cells, bound_names_of(self.look.code))

    def steps(self) -> Generator[Step, Turn, None]:
        mistake = self._look_mistake()
        turn = yield from self._run(self.look, self.write.look(self.files, self.columns), mistake)
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
        if mistake and turn.result is not None and not turn.result.ok:
            turn = yield Step(thought=self.write.fix(turn, mistake), code=cell.code)
        if turn.result is None or not turn.result.ok:
            error = turn.result.error if turn.result else None
            what = f"{error.ename}: {error.evalue}" if error else "no result"
            raise ConfigError(f"task {self.task.id}: a cell of its solution failed in the sandbox ({what})")
        return turn


def bound_names_of(code: str) -> frozenset[str]:
    return frozenset(name for stmt in statements(code) for name in bound_names(stmt))


_KEEPS_COLUMNS = frozenset({"groupby", "dropna", "copy", "sort_values", "drop_duplicates", "reset_index", "head"})


def _loaded_columns(body: list[ast.stmt]) -> list[str]:
    """Columns the computation reads from ``df`` as loaded (before it changes ``df``), in order."""
    found: list[ast.Constant] = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _from_df(node.value):
                found.extend(_strings(node.slice))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _KEEPS_COLUMNS
                and _from_df(node.func.value)
            ):
                for arg in [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("by", "subset"))]:
                    found.extend(_strings(arg))
        if "df" in written_names(stmt):
            break
    found.sort(key=lambda node: (node.lineno, node.col_offset))
    return list(dict.fromkeys(str(node.value) for node in found))


def _from_df(node: ast.expr) -> bool:
    """Whether ``node`` is ``df``, or a frame made from it that keeps its columns (rows picked, sorted, grouped)."""
    while not isinstance(node, ast.Name):
        if isinstance(node, ast.Subscript) and not _strings(node.slice):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEPS_COLUMNS:
            node = node.func.value
        else:
            return False
    return node.id == "df"


def _strings(node: ast.expr) -> list[ast.Constant]:
    """The string constants ``node`` spells out: one, or a list of them."""
    items = node.elts if isinstance(node, ast.List) else [node]
    return [item for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]


def _look_code(prelude: str, columns: list[str], rng: Random) -> str:
    frame = f"df[{columns!r}]" if columns else "df"
    shape = rng.choice(
        ("print(df.shape)", 'print("shape:", df.shape)', 'print(f"{len(df)} rows, {df.shape[1]} columns")')
    )
    names = rng.choice(("print(df.columns.tolist())", "print(list(df.columns))", 'print("columns:", list(df.columns))'))
    dtypes = rng.choice(
        (f"print({frame}.dtypes.astype(str).to_dict())", f'print("dtypes:", {frame}.dtypes.astype(str).to_dict())')
    )
    missing = rng.choice(
        (f"print({frame}.isna().sum().to_dict())", f'print("missing:", {frame}.isna().sum().to_dict())')
    )
    details = [dtypes, missing]
    rng.shuffle(details)
    head = [f"{frame}.head(3)"] if rng.random() < 0.5 else []
    return "\n".join([prelude, "", shape, names, *details, *head])


def _cells(body_code: str, rng: Random, most: int, defined: frozenset[str]) -> list[tuple[Cell, str | None]]:
    """The computation as cells, each with the name of the intermediate result it shows (None for the last)."""
    body, lines = statements(body_code), body_code.splitlines()
    points = {k: shown for k in range(1, len(body)) if (shown := _intermediate(body, k))}
    chosen = sorted(rng.sample(sorted(points), rng.randint(0, min(most - 1, len(points)))))
    cells, start, fresh = [], 0, True
    for end in [*chosen, len(body)]:
        code = "\n".join(lines[body[start].lineno - 1 : body[end - 1].end_lineno]).strip("\n")
        shown = points[end][0] if end < len(body) else None
        if end < len(body) and points[end][1]:
            code += "\n" + points[end][1]
        cells.append((Cell(code, defined, fresh), shown))
        defined = defined | bound_names_of(code)
        fresh = fresh and not any("df" in written_names(stmt) for stmt in body[start:end])
        start = end
    return cells


_SCALAR = frozenset({"mean", "median", "sum", "std", "var", "max", "min", "corr", "count", "nunique", "skew", "kurt"})
_KEEPS_ROWS = _KEEPS_COLUMNS | {"fillna", "astype", "replace", "abs", "round", "rename", "query", "clip"}


def _intermediate(body: list[ast.stmt], k: int) -> tuple[str, str] | None:
    """Whether the computation splits well before statement ``k``: the name it shows and the line that shows it."""
    if _is_print(body[k]):
        return None
    last, shown_already = body[k - 1], False
    if _is_print(last) and k >= 2:
        last, shown_already = body[k - 2], True
    if not (isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Name)):
        return None
    name = last.targets[0].id
    if shown_already:
        return name, ""
    show = _show(name, last.value, {n for stmt in body[: k - 1] for n in bound_names(stmt)} | {"df"})
    return (name, show) if show else None


def _show(name: str, value: ast.expr, frames: set[str]) -> str | None:
    """A line that prints a useful view of ``name`` (assigned from ``value``), for the kinds of value we can tell."""
    methods, node, column = [], value, False
    while isinstance(node, ast.Call | ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            methods.append(node.attr)
        if isinstance(node, ast.Subscript):
            column = column or (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str))
        node = node.func if isinstance(node, ast.Call) else node.value
    if not isinstance(node, ast.Name) or node.id not in frames:
        return None
    outer = methods[0] if methods else ""
    if outer in ("idxmax", "idxmin") or (outer in _SCALAR and "groupby" not in methods):
        return f"print('{name} =', {name})"
    if outer and outer not in _SCALAR | _KEEPS_ROWS:
        return None  # an indexer, an attribute, a conversion: nothing we can print safely and briefly
    if "groupby" in methods:
        return f"print({name}.head(10))"
    return f"print({name}.describe())" if column else f"print({name}.shape)"


def _is_print(stmt: ast.stmt) -> bool:
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"


_LITERAL_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)


def _read_facts(stdout: str, files: tuple[str, ...]) -> Facts:
    """What the look printed: the row count, every column, and dtypes and missing counts (as the expert reads them)."""
    rows, columns, dtypes, missing = None, (), {}, {}
    for line in stdout.splitlines():
        if match := re.match(r"(\d+) rows, \d+ columns$", line):
            rows = int(match.group(1))
            continue
        try:
            value = ast.literal_eval(re.sub(r"^[a-z]+: ", "", line))
        except _LITERAL_ERRORS:
            continue
        if isinstance(value, tuple) and len(value) == 2:
            rows = value[0]
        elif isinstance(value, list) and not columns:
            columns = tuple(str(item) for item in value)
        elif isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
            dtypes = value
        elif isinstance(value, dict) and value and all(isinstance(v, int) for v in value.values()):
            missing = value
    return Facts(files, columns, dtypes, missing, rows)


_OPERATIONS = {
    "groupby": "group the rows by {arg}",
    "to_datetime": "parse the dates",
    "drop_duplicates": "remove duplicate rows",
    "dropna": "drop the missing values",
    "fillna": "fill the missing values",
    "sort_values": "sort by {arg}",
    "corr": "compute the Pearson correlation",
    "polyfit": "fit a least-squares line",
    "lstsq": "refit with the control variable in the model",
    "ttest_ind": "run Welch's t-test on the two groups",
    "quantile": "take the quartiles",
    "skew": "measure the skewness",
    "kurt": "measure the kurtosis",
    "std": "scale by the standard deviation",
    "median": "take the median",
    "mean": "take the mean",
    "sum": "add the values up",
    "idxmax": "pick the label with the largest value",
    "idxmin": "pick the label with the smallest value",
    "isna": "count the missing values",
    "nunique": "count the distinct values",
}


def _operations(code: str) -> list[str]:
    """What a cell does, in words, in the order it does it."""
    found = []
    nodes = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call | ast.Subscript)]
    for node in sorted(nodes, key=lambda node: (node.end_lineno or 0, node.end_col_offset or 0)):
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Compare | ast.BoolOp):
                found.append("keep only the rows that meet the condition")
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "sum" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Compare):
            found.append("count the rows that pass the test")
        elif name in _OPERATIONS:
            keys = [n.value for arg in node.args[:1] for n in ast.walk(arg) if isinstance(n, ast.Constant)]
            key = next((_name(k) for k in keys if isinstance(k, str)), "the key")
            found.append(_OPERATIONS[name].format(arg=key))
    return list(dict.fromkeys(found))[:4]


def _name(column: str) -> str:
    """A column as a thought mentions it: in backticks, on one line, long names shortened."""
    flat = " ".join(column.split())
    return f"`{flat if len(flat) <= 60 else flat[:57] + '...'}`"


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class _Writer:
    """Thoughts from templates: several phrasings per step, chosen by the trajectory's seeded generator."""

    def __init__(self, rng: Random, task: Task) -> None:
        self.rng = rng
        try:
            kind = category(task.category or "")
            self.kind = kind.name.lower()
            self.workflow = [re.sub(r"^\d+\.\s*", "", line).rstrip(".") for line in kind.workflow.splitlines()]
        except ConfigError:  # not one of the taxonomy's categories: no workflow to lean on
            self.kind, self.workflow = "", []

    def _step(self, index: int) -> str:
        step = self.workflow[index]
        return step[:1].lower() + step[1:]

    def look(self, files: tuple[str, ...], columns: list[str]) -> str:
        where = files[0] if len(files) == 1 else "the files"
        parts = [
            self.rng.choice(
                (
                    f"Before computing anything I want to see what {where} holds: its size, its columns, their types "
                    "and any missing values.",
                    f"Let me load {where} first and check its shape, column names and dtypes, so the next cells use "
                    "the exact names.",
                    f"First I read {where} and look at it: how many rows, which columns, and whether the ones this "
                    "question needs have gaps.",
                    "I'll start by loading the data and inspecting it, since the computation depends on exact column "
                    "names and on how missing values are handled.",
                )
            )
        ]
        if columns:
            names = _join([_name(c) for c in columns[:4]])
            parts.append(
                self.rng.choice((f"The question is about {names}.", f"The columns that matter seem to be {names}.", ""))
            )
        if self.workflow and self.rng.random() < 0.5:
            parts.append(f"For {self.kind} questions the usual first step is to {self._step(0)}.")
        return " ".join(part for part in parts if part)

    def compute(self, code: str, facts: Facts, previous: str | None, shown: str | None, intent: str = "") -> str:
        body = statements(code)
        used = [c for c in column_literals(body) if not facts.columns or c in facts.columns]
        operations = _operations(code)
        parts = []
        if previous is not None:
            parts.append(
                self.rng.choice(
                    (
                        f"`{previous}` is computed.",
                        f"With `{previous}` in hand, I continue.",
                        f"`{previous}` is printed above.",
                    )
                )
            )
        elif used:
            names = _join([_name(c) for c in used[:4]])
            size = f" ({facts.rows} rows)" if facts.rows is not None else ""
            parts.append(
                self.rng.choice(
                    (
                        f"The data loaded fine{size}, and {names} are there.",
                        f"The columns I need, {names}, exist with these exact names.",
                        f"Good: {names} are present{size}.",
                    )
                )
            )
            parts.extend(self._gaps(used, facts, code))
        plan = _join(operations) if operations else "compute what the question asks"
        parts.append(intent)
        parts.append(self.rng.choice((f"Now I {plan}.", f"Next, I {plan}.", f"In this cell I {plan}.")))
        if previous is None and len(self.workflow) > 2 and self.rng.random() < 0.5:
            parts.append(f"That is the usual approach for {self.kind}: {self._step(self.rng.choice((1, 2)))}.")
        if shown is not None:
            parts.append(
                self.rng.choice(
                    (
                        f"I stop after `{shown}` and print it, to check it before going on.",
                        f"I print `{shown}` first, so I can check the intermediate result.",
                    )
                )
            )
        else:
            parts.append(
                self.rng.choice(
                    (
                        "Then I print the result in the answer format.",
                        "The last lines print the values as the format asks.",
                        "",
                    )
                )
            )
        return " ".join(part for part in parts if part)

    def _gaps(self, used: list[str], facts: Facts, code: str) -> list[str]:
        gaps = [f"{_name(c)} has {n} missing value{'s' * (n != 1)}" for c in used if (n := facts.missing.get(c, 0))]
        if not gaps:
            return []
        then = ", so I drop them" if "dropna" in code else ", so I fill them" if "fillna" in code else ""
        return [f"Note that {_join(gaps[:2])}{then}."]

    def fix(self, turn: Turn, mistake: Mistake) -> str:
        error = turn.result.error if turn.result else None
        head = f"{error.ename}: {error.evalue.splitlines()[0][:200] if error.evalue else ''}" if error else "an error"
        return self.rng.choice(
            (
                f"The cell failed with {head}. {mistake.cause} I run it again with that fixed.",
                f"That raised {head}. {mistake.cause}",
                f"Error: {head}. {mistake.cause} Let me correct the cell and rerun it.",
            )
        )

    def answer(self, answers: dict[str, str]) -> str:
        pairs = _join([f"{name} = {value}" for name, value in answers.items()])
        them = "it" if len(answers) == 1 else "them"
        return self.rng.choice(
            (
                f"The output gives {pairs}. That is what the question asks, in the required format.",
                f"So {pairs}; I report {them} as the format asks.",
                f"Everything the question asks for is printed: {pairs}. Time to give the answer.",
                f"The computation is done: {pairs}.",
            )
        )

    def answer_text(self, answers: dict[str, str]) -> str:
        return self.rng.choice(("\n", ", ")).join(f"@{name}[{value}]" for name, value in answers.items())
