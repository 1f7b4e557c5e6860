"""Mistakes the offline expert makes on purpose, and the reading of Python cells they rely on.

A mistake is a function ``(cell, facts, rng) -> Mistake | None``: the cell with one error that models
really make (a near-miss column name, a dropped import, a dtype slip, a misspelt file name), or None
where it does not apply. The broken cell must fail before it changes a variable an earlier cell made,
so that running the corrected cell next gives exactly what the clean cell would have given.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from random import Random

WRONG_COLUMN = "wrong_column"
MISSING_IMPORT = "missing_import"
DTYPE = "dtype"
WRONG_FILE = "wrong_file"

_COLUMN_METHODS = frozenset({"groupby", "sort_values", "set_index", "drop_duplicates", "pivot_table", "value_counts"})
_COLUMN_KEYWORDS = frozenset({"subset", "by", "columns", "index", "values"})


@dataclass(frozen=True)
class Facts:
    """What the expert knows about the data: the files, and what its look at the data printed."""

    files: tuple[str, ...]
    """Base names of the task's files."""
    columns: tuple[str, ...] = ()
    """Every column of the loaded frame (empty until the look printed them)."""
    dtypes: Mapping[str, str] = field(default_factory=dict)
    missing: Mapping[str, int] = field(default_factory=dict)
    rows: int | None = None


@dataclass(frozen=True)
class Cell:
    """A cell the expert is about to run, and what the session holds when it runs."""

    code: str
    defined: frozenset[str] = frozenset()
    """Names bound by earlier cells."""
    fresh_df: bool = False
    """``df`` is still the frame as loaded (no earlier cell changed it)."""


@dataclass(frozen=True)
class Mistake:
    kind: str
    code: str
    """The broken cell."""
    cause: str
    """What went wrong and how the corrected cell differs, said the way the fix's thought says it."""
    intent: str = ""
    """Why the broken cell does what the clean one does not, when it adds a step (said before running it)."""


MistakeFn = Callable[[Cell, Facts, Random], "Mistake | None"]


def statements(code: str) -> list[ast.stmt]:
    return ast.parse(code).body


def statement_source(code: str, stmt: ast.stmt) -> str:
    return "\n".join(code.splitlines()[stmt.lineno - 1 : stmt.end_lineno])


def bound_names(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (assignments, imports, loop and ``with`` targets, definitions)."""
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in stmt.names}
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {stmt.name}
    return {node.id for node in ast.walk(stmt) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def written_names(stmt: ast.stmt) -> set[str]:
    """Names whose objects a statement rebinds or changes (``x = ...``, ``x['c'] = ...``, ``inplace=True``)."""
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return set()  # importing a module again changes nothing
    written = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name | ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            written.add(_root(node))
        elif isinstance(node, ast.Call) and any(k.arg == "inplace" for k in node.keywords):
            written.add(_root(node.func))
    return written - {""}


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Subscript | ast.Attribute | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def fails_safely(body: list[ast.stmt], index: int, defined: frozenset[str]) -> bool:
    """Whether a cell failing at statement ``index`` leaves the names of earlier cells as they were."""
    for stmt in body[:index]:
        if written_names(stmt) & defined:
            return False
    # the failing statement raises before it stores, unless it is compound (a block may store first)
    return index >= len(body) or not isinstance(body[index], ast.With | ast.For | ast.If | ast.Try | ast.While)


def column_literals(body: list[ast.stmt]) -> dict[str, int]:
    """Strings used only as column names (subscripts, ``groupby``/``sort_values`` arguments, ``subset=``),
    each with the index of the first statement that uses it."""
    uses: dict[str, int] = {}
    other: set[str] = set()
    for index, stmt in enumerate(body):
        columnish = _columnish_constants(stmt)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) in columnish:
                    uses.setdefault(node.value, index)
                else:
                    other.add(node.value)
    return {name: index for name, index in uses.items() if name not in other}


def _columnish_constants(stmt: ast.stmt) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(stmt):
        holders: list[ast.expr] = []
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            holders.append(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _COLUMN_METHODS:
                holders.extend(node.args[:1])
            holders.extend(k.value for k in node.keywords if k.arg in _COLUMN_KEYWORDS)
        for holder in holders:
            items = holder.elts if isinstance(holder, ast.List | ast.Tuple) else [holder]
            found.update(id(item) for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str))
    return found


def replace_literal(code: str, old: str, new: str) -> str | None:
    """``code`` with every string literal ``old`` written as ``new`` (None when that cannot be done exactly)."""
    if any(char in old + new for char in "'\"\\\n"):
        return None
    wanted = sum(isinstance(n, ast.Constant) and n.value == old for n in ast.walk(ast.parse(code)))
    pattern = re.compile(rf"(['\"]){re.escape(old)}\1")
    if wanted == 0 or len(pattern.findall(code)) != wanted:
        return None  # the text also appears elsewhere (in a longer string, a comment)
    return pattern.sub(lambda match: f"{match.group(1)}{new}{match.group(1)}", code)


def wrong_column(cell: Cell, facts: Facts, rng: Random) -> Mistake | None:
    """A column written the way the question words it, in another case, or without an underscore."""
    if not facts.columns:
        return None
    body = statements(cell.code)
    options = []
    for name, index in column_literals(body).items():
        if name in facts.columns and fails_safely(body, index, cell.defined):
            misses = [miss for miss in _near_names(name) if miss not in facts.columns]
            if misses:
                options.append((name, misses))
    if (chosen := _misname(cell.code, options, rng)) is None:
        return None
    name, wrong, code = chosen
    cause = rng.choice(
        (
            f"There is no column `{wrong}`: the data calls it `{name}`.",
            f"I misspelt the column name; in the file it is `{name}`, not `{wrong}`.",
            f"Column names must match the file exactly, and the file has `{name}` rather than `{wrong}`.",
        )
    )
    return Mistake(WRONG_COLUMN, code, cause)


def _misname(code: str, options: list[tuple[str, list[str]]], rng: Random) -> tuple[str, str, str] | None:
    """One of ``options`` (a name in ``code`` and its near misses) written wrong: (name, wrong name, new code)."""
    if not options:
        return None
    name, misses = rng.choice(options)
    wrong = rng.choice(misses)
    changed = replace_literal(code, name, wrong)
    return None if changed is None else (name, wrong, changed)


def _near_names(name: str) -> list[str]:
    candidates = [name.lower(), name.upper(), name[:1].upper() + name[1:]]
    if re.fullmatch(r"\w+", name) and "_" in name:  # the question's wording, and a dropped underscore
        candidates += [name.replace("_", " "), name.replace("_", " ").lower(), name.replace("_", "", 1)]
    if re.fullmatch(r"[\w ]+", name) and " " in name:
        candidates.append(name.replace(" ", "_"))
    return list(dict.fromkeys(c for c in candidates if c != name and c.strip()))


def missing_import(cell: Cell, facts: Facts, rng: Random) -> Mistake | None:
    """An import left out, so the first use of its name is a NameError."""
    body = statements(cell.code)
    options = []
    for index, stmt in enumerate(body):
        if not isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        names = bound_names(stmt)
        if names & cell.defined:
            continue  # an earlier cell imported it already: leaving it out would not fail
        use = next((later for later in range(index + 1, len(body)) if names & _loaded(body[later])), None)
        if use is not None and fails_safely(body, use, cell.defined):
            options.append((index, stmt, sorted(names & _loaded(body[use]))[0]))
    if not options:
        return None
    index, stmt, name = rng.choice(options)
    lines = cell.code.splitlines()
    code = "\n".join(lines[: stmt.lineno - 1] + lines[stmt.end_lineno :]).strip("\n")
    line = statement_source(cell.code, stmt).strip()
    cause = rng.choice(
        (
            f"I used `{name}` without importing it; the cell needs `{line}` first.",
            f"The line `{line}` is missing, so `{name}` is not defined.",
            f"`{name}` was never imported in this session. I add `{line}` at the top.",
        )
    )
    return Mistake(MISSING_IMPORT, code, cause)


def _loaded(stmt: ast.stmt) -> set[str]:
    return {node.id for node in ast.walk(stmt) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def dtype_slip(cell: Cell, facts: Facts, rng: Random) -> Mistake | None:
    """A conversion the column does not allow: ``.str`` on a numeric column, or an int cast over missing values."""
    if not cell.fresh_df or "df" not in cell.defined:
        return None
    body = statements(cell.code)
    options = []
    for name in column_literals(body):
        dtype, missing = facts.dtypes.get(name, ""), facts.missing.get(name, 0)
        if "'" in name or "\\" in name:
            continue
        if dtype.startswith(("int", "float", "uint")):
            options.append(
                (
                    f"df[{name!r}] = df[{name!r}].str.replace(',', '').astype(float)",
                    f"`{name}` is already numeric ({dtype}), so there is nothing to clean with `.str`; "
                    "I drop that line.",
                    f"To be safe I first strip any thousands separators from `{name}` and make it a float.",
                )
            )
        if dtype.startswith("float") and missing > 0:
            options.append(
                (
                    f"df[{name!r}] = df[{name!r}].astype(int)",
                    f"`{name}` has {missing} missing value{'s' * (missing != 1)}, and NaN cannot become an integer. "
                    "The computation does not need the cast, so I remove it.",
                    f"`{name}` holds whole numbers stored as floats, so I cast it to int first.",
                )
            )
    if not options:
        return None
    line, cause, intent = rng.choice(options)
    leading = next((i for i, stmt in enumerate(body) if not isinstance(stmt, ast.Import | ast.ImportFrom)), len(body))
    lines = cell.code.splitlines()
    at = body[leading].lineno - 1 if leading < len(body) else len(lines)
    return Mistake(DTYPE, "\n".join([*lines[:at], line, *lines[at:]]), cause, intent)


def wrong_file(cell: Cell, facts: Facts, rng: Random) -> Mistake | None:
    """A data file opened under a name close to its own (case, separator, extension, a dropped suffix)."""
    body = statements(cell.code)
    literals = {n.value for n in ast.walk(ast.Module(body, [])) if isinstance(n, ast.Constant)}
    options = [
        (name, misses)
        for name in facts.files
        if name in literals and (misses := [m for m in _near_files(name) if m not in facts.files])
    ]
    if (chosen := _misname(cell.code, options, rng)) is None:
        return None
    name, wrong, code = chosen
    if name.endswith((".sqlite", ".db", ".sqlite3")):
        cause = (
            f"The table is missing because `{wrong}` does not exist: sqlite3.connect created an empty database "
            f"under that name. The file is `{name}`."
        )
    else:
        cause = rng.choice((f"The file is `{name}`, not `{wrong}`.", f"I got the file name wrong; it is `{name}`."))
    return Mistake(WRONG_FILE, code, cause)


_EXTENSIONS = {".tsv": ".csv", ".csv": ".txt", ".xlsx": ".xls", ".sqlite": ".db", ".json": ".jsonl"}


def _near_files(name: str) -> list[str]:
    stem, dot, extension = name.rpartition(".")
    extension = dot + extension
    candidates = [name.replace("-", "_"), name.replace("_", "-"), name[:1].upper() + name[1:], name.lower()]
    if extension in _EXTENSIONS:
        candidates.append(stem + _EXTENSIONS[extension])
    if shortened := re.sub(r"[-_][0-9a-f]{6,}$", "", stem):
        candidates.append(shortened + extension)
    return list(dict.fromkeys(c for c in candidates if c != name))


MISTAKES: dict[str, MistakeFn] = {
    WRONG_COLUMN: wrong_column,
    MISSING_IMPORT: missing_import,
    DTYPE: dtype_slip,
    WRONG_FILE: wrong_file,
}
"""Every kind of mistake, by its stable name."""
