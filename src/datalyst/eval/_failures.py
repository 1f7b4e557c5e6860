"""Why answers were wrong, by kind: rules over each trajectory and its outcome, counted for a whole run.

Each trajectory that is not fully right gets one kind, the first that applies:

- ``failed``: our side failed (model server, sandbox);
- an unanswered trajectory, or one that answered only when called on a last time (``last_call``: its answer is
  a guess from where it stood), ends on the error of its last failing cell: ``file loading`` (reading a data
  file), ``wrong column`` (a name the table does not have), ``dtype`` (values of the wrong type), ``undefined
  name``, ``syntax``, ``other error``; or, with no failing last cell, ``gave up`` (turns ran out, void turns,
  the context overflowed);
- an answered one is ``format`` when its answer holds none of the ``@name[value]`` parts the task asks for, or
  when the reformatted answer is right; ``wrong method`` when the task names a statistical method (Pearson's
  correlation, the IQR rule, a t-test, min-max scaling, ...) and the code used another of the same family and not
  it; then, by the parts it got wrong: ``no value`` when each is missing or a stand-in (NaN, None, empty), as when
  the agent wrote the answer without the result; ``near miss`` when each is a number within 5% of the expected one
  (rounding, a degree of freedom, a row filtered differently); ``wrong label`` when each expects one label, not a
  number (significant or not, linear or not, a category); ``partly right`` when some parts are right; else
  ``wrong value``.

The rules read error names and messages, and of the task only the names of statistical methods and the expected
answer's parts, so they carry over to any task set.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from datalyst.agent import ActionKind, Termination, Trajectory
from datalyst.eval._outcomes import EvalOutcome
from datalyst.tasks import extract_answers

KINDS = (
    "failed",
    "file loading",
    "wrong column",
    "dtype",
    "undefined name",
    "syntax",
    "other error",
    "gave up",
    "format",
    "wrong method",
    "no value",
    "near miss",
    "wrong label",
    "partly right",
    "wrong value",
)
_STAND_INS = {"", "nan", "none", "null", "n/a", "na", "[]", "{}", "unknown"}  # answer parts that hold no value
_LOADING = re.compile(
    r"read_(csv|json|excel|parquet|table|sql)|json\.load|No such file|codec can't decode|Error tokenizing|"
    r"Expecting value|Trailing data|Mixing dicts|If using all scalar values|arrays must all be same length",
)
_COLUMN = re.compile(
    r"not in index|None of \[|'(DataFrame|Series)' object has no attribute|Column not found|no such column"
)
_DTYPE = re.compile(
    r"could not convert|unsupported operand|invalid literal|not supported between|Cannot convert|"
    r"must be real number|ufunc|dtype|could not be converted|agg function failed|can only concatenate"
)

# Families of methods that answer the same question differently: how a task names each one, and how code uses it
_METHODS = {
    "correlation": {
        "pearson": (r"pearson", r"pearson|corrcoef|\.corr\((?![^)]*method)"),
        "spearman": (r"spearman", r"spearman"),
        "kendall": (r"kendall", r"kendall"),
    },
    "outliers": {
        "z-score": (r"z-?score", r"zscore|z_score|\.std\("),
        "iqr": (r"\biqr\b|interquartile", r"iqr|quantile\(|percentile\("),
    },
    "test": {
        "t-test": (r"\bt-?test|student'?s t", r"ttest"),
        "chi-square": (r"chi-?squared?", r"chi2"),
        "anova": (r"\banova\b", r"f_oneway|anova"),
        "mann-whitney": (r"mann.?whitney", r"mannwhitney"),
        "shapiro": (r"shapiro", r"shapiro"),
        "kolmogorov-smirnov": (r"kolmogorov|\bks\b test", r"kstest|ks_2samp"),
    },
    "scaling": {
        "min-max": (r"min-?max", r"minmaxscaler|\.min\(\)\s*\)\s*/"),
        "standard": (r"standardi[sz]|z-?score normali[sz]", r"standardscaler|\.std\("),
    },
}


def _used_other_method(task_text: str, code: str) -> bool:
    """Whether ``code`` used a method of a family ``task_text`` names a method of, and none of the named ones."""
    task_text, code = task_text.lower(), code.lower()
    for family in _METHODS.values():
        named = {name for name, (asked, _) in family.items() if re.search(asked, task_text)}
        used = {name for name, (_, written) in family.items() if re.search(written, code)}
        if named and used and not named & used:
            return True
    return False


def failure_kind(trajectory: Trajectory, outcome: EvalOutcome) -> str | None:
    """The kind of failure of ``trajectory`` (None when its answer is fully right)."""
    if outcome.correct:
        return None
    if trajectory.termination == Termination.FAILED:
        return "failed"
    if trajectory.answer is None or any(turn.last_call for turn in trajectory.turns):
        code_turns = [turn for turn in trajectory.turns if turn.kind == ActionKind.CODE and turn.result is not None]
        last = code_turns[-1].result if code_turns else None
        if last is None or last.error is None:
            return "gave up"
        return _error_kind(last.error.ename, f"{last.error.evalue}\n{last.error.traceback}")
    expected = trajectory.task.answer if isinstance(trajectory.task.answer, dict) else {}
    given = extract_answers(trajectory.answer)
    if (expected and not set(given) & set(expected)) or outcome.reformatted_score == 1.0:
        return "format"
    task = trajectory.task
    code = "\n".join(turn.code for turn in trajectory.turns if turn.code)
    if _used_other_method(f"{task.question}\n{task.constraints}", code):
        return "wrong method"
    wrong = outcome.detail.removeprefix("wrong: ").split(", ") if outcome.detail else []
    pairs = [(given.get(name), str(expected[name])) for name in wrong if name in expected]
    if pairs and all(_no_value(value) and not _no_value(want) for value, want in pairs):
        return "no value"
    if pairs and all(_near(value, want) for value, want in pairs):
        return "near miss"
    if pairs and all(_label(want) for _, want in pairs):
        return "wrong label"
    return "partly right" if expected and 0 < len(wrong) < len(expected) else "wrong value"


def _no_value(value: str | None) -> bool:
    return value is None or value.strip().strip("'\"").lower() in _STAND_INS


def _label(text: str) -> bool:
    return not _no_value(text) and "," not in text and _number(text) is None


def _number(text: str) -> float | None:
    try:
        number = float(text.strip().rstrip("%").replace(",", ""))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _near(value: str | None, want: str, tolerance: float = 0.05) -> bool:
    """Whether ``value`` and ``want`` are both numbers and ``value`` is within ``tolerance`` of ``want`` (relative,
    or absolute for a ``want`` under 1 in size)."""
    got, expected = _number(value or ""), _number(want)
    if got is None or expected is None or got == expected:
        return False
    return abs(got - expected) <= tolerance * max(abs(expected), 1.0)


def _error_kind(name: str, text: str) -> str:
    if name in ("FileNotFoundError", "UnicodeDecodeError", "ParserError", "JSONDecodeError", "EmptyDataError"):
        return "file loading"
    if _LOADING.search(text):
        return "file loading"
    if name == "KeyError" or _COLUMN.search(text):
        return "wrong column"
    if _DTYPE.search(text):
        return "dtype"
    if name in ("NameError", "UnboundLocalError"):
        return "undefined name"
    if name in ("SyntaxError", "IndentationError"):
        return "syntax"
    return "other error"


def failure_counts(trajectories: Sequence[Trajectory], outcomes: Sequence[EvalOutcome]) -> dict[str, int]:
    """How many of the run's trajectories failed in each kind (``KINDS`` order; kinds with none left out)."""
    by_key = {(t.dialect, t.id): t for t in trajectories}
    counts = Counter(failure_kind(by_key[v.dialect, v.trajectory_id], v) for v in outcomes)
    return {kind: counts[kind] for kind in KINDS if counts[kind]}
