"""The task record every stage shares: synthesis writes it, agents solve it, evaluation scores it."""

from __future__ import annotations

from pathlib import PurePath
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

SCHEMA_VERSION = 6
"""3 added ``solution`` and ``lineage`` (synthesized tasks); 4 added ``tests``, ``check`` and ``entry_point``
(tasks whose answer is a program); 5 added ``figure`` (questions that ask for a chart); 6 added ``earlier``
(follow-up questions)."""

JudgeName = Literal["dabench", "tablebench", "sql", "csv", "rule", "llm", "cases", "humaneval"]
"""How an answer is checked: ``dabench`` (official ``@name[value]`` rules), ``tablebench``
(official EM / ROUGE-L by question type), ``sql`` (execution accuracy of a predicted query),
``csv`` (a result table compared column by column), ``rule`` (the deterministic 3% rule),
``llm`` (a judge model), ``cases`` (a program run on unit-test cases), ``humaneval`` (a completed function
run against the task's ``check``, HumanEval's rules)."""


class Case(BaseModel):
    """One unit test of a program: what it reads on standard input and what it must print."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: str
    output: str


class Asked(BaseModel):
    """A question put earlier in the same conversation as a follow-up task's own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str
    constraints: str = ""
    format: str = ""


class Lineage(BaseModel):
    """Where a synthesized task comes from, so any task can be traced and made again."""

    model_config = ConfigDict(extra="forbid")

    generator: str
    """The template or pipeline step that wrote it, e.g. ``ranking.top_group``."""
    version: int
    """The generator's version: a change to what it writes raises it."""
    seed: int
    parents: list[str] = []
    """Ids of the easier tasks it was composed from."""
    source_hash: str | None = None
    """Content hash of the table it asks about (``synth files``)."""
    origin: str | None = None
    """The file it was mined from (a notebook, ``synth notebooks``)."""
    verified: bool | None = None
    """Whether running its solution reproduced its answer (None: not run, e.g. its data is not all here)."""


class Task(BaseModel):
    """A question about one or more data files, with its gold answer when it has one."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    question: str
    constraints: str = ""
    """How to compute the answer (methods, rounding, filters), when the question leaves it open."""
    format: str = ""
    """How to write the answer, e.g. ``@mean_fare[value] where value is rounded to 2 decimals``."""
    files: list[str] = []
    """Paths of the data files; the agent sees them under their base names."""
    answer: JsonValue = None
    """The gold answer: a text, a number, a list, or a name -> value mapping for multi-part answers."""
    answer_sql: str | None = None
    """For SQL tasks: the gold query whose result on the task's database is the answer."""
    judge: JudgeName = "rule"
    category: str | None = None
    subcategory: str | None = None
    level: str | None = None
    concepts: list[str] = []
    source: str | None = None
    """Where the task comes from (a benchmark name, a synthesis run)."""
    solution: str | None = None
    """A canonical Python solution: for a synthesized task, code that prints the answer (run to obtain
    ``answer``); for a HumanEval problem, the canonical completion of the prompt."""
    lineage: Lineage | None = None
    tests: list[Case] = []
    """Hidden unit tests of the program the task asks for (``judge="cases"``)."""
    check: str | None = None
    """HumanEval: code that defines ``check(candidate)``, run after the prompt and the completion."""
    entry_point: str | None = None
    """HumanEval: the name of the function ``check`` is called with."""
    figure: bool = False
    """The question asks for a chart as well as its answer: a run that saved no figure did not do what was asked
    (curation drops it)."""
    earlier: list[Asked] = []
    """A follow-up task: the questions about the same files the agent answers first, in order, in the same
    conversation and sandbox; only the answer to ``question`` is judged."""

    @property
    def file_format(self) -> str:
        """The format of the first data file by its suffix (``csv``, ``xlsx``, ...); ``none`` without files."""
        suffix = PurePath(self.files[0]).suffix if self.files else ""
        return suffix.lstrip(".").lower() or "none"

    def checkable(self, *, by_model: bool = False) -> bool:
        """An answer to it can be judged: it has a gold answer or query, and its judge is no model unless
        ``by_model`` (a judge model is at hand). Rewards, returns and the ground-truth filter need this."""
        return (self.answer is not None or bool(self.answer_sql)) and (by_model or self.judge != "llm")

    def earlier_tasks(self) -> list[Task]:
        """The earlier questions as tasks of their own: the same files, no gold answer."""
        return [
            Task(id=f"{self.id}~{index}", files=self.files, source=self.source, **asked.model_dump())
            for index, asked in enumerate(self.earlier, 1)
        ]
