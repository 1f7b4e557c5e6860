"""Why the offline expert takes each step, in words: seeded phrasings chosen from several per step.

:class:`ThoughtWriter` writes the thought of every turn the expert plays (the look at the data, each
computing cell, the fix after a mistake and the answer), naming the columns and operations the cell
really uses and, for the taxonomy's categories, the category's usual workflow. Every choice comes
from the trajectory's seeded generator, so the same seed gives the same thoughts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from random import Random

from datalyst.agent import Turn
from datalyst.curate._mistakes import Facts, Mistake, column_literals, statements
from datalyst.errors import ConfigError
from datalyst.synth import category
from datalyst.tasks import Task

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


class ThoughtWriter:
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

    def look(self, files: tuple[str, ...]) -> str:
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
