"""A task's canonical solution read as code: cut at its loader, the columns it reads, the cells it is played in.

The offline expert (``_expert``) plays the part up to the statement that assigns ``df`` as its look at
the data, and the rest as one or more computing cells, split where an intermediate result is worth
printing on the way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from random import Random

from datalyst.curate._mistakes import Cell, bound_names, statements, written_names
from datalyst.errors import ConfigError
from datalyst.synth import split_loader
from datalyst.tasks import Task


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
        parts = split_loader(task.solution)
    except SyntaxError as exc:
        raise ConfigError(f"task {task.id}: its solution is not valid Python ({exc.msg}, line {exc.lineno})") from exc
    if parts is None or not parts[1].strip():
        raise ConfigError(f"task {task.id}: its solution does not load `df` and then compute, so it has no loader")
    return Solution(*parts)


def bound_names_of(code: str) -> frozenset[str]:
    """Every name the top-level statements of ``code`` bind."""
    return frozenset(name for stmt in statements(code) for name in bound_names(stmt))


def compute_cells(body_code: str, rng: Random, most: int, defined: frozenset[str]) -> list[tuple[Cell, str | None]]:
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
_KEEPS_ROWS = frozenset({"groupby", "dropna", "copy", "sort_values", "drop_duplicates", "reset_index", "head", "fillna",
                         "astype", "replace", "abs", "round", "rename", "query", "clip"})  # fmt: skip


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
