"""TableBench program-of-thought (PoT) answers: run each answer's code in the sandbox, then parse what it printed.

The official parser (``shared/benchmarks/tablebench-example/SOURCE.md``) saves the row's table as
``table.csv``, runs the last ```` ```python ```` block of the prediction for at most 15 s and takes
the first ``Final Answer: ...`` line of its output; when there is no block, or the code raises or
runs out of time, the answer is empty (output printed before the failure is discarded too).
Model-written code is hostile, so here each row runs as a program in a fresh sandbox
(:func:`datalyst.judge.run_program`) whose work folder holds only that row's ``table.csv``.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from datalyst.judge import parse_final_answer, parse_tablebench_row, run_program
from datalyst.progress import progress_bar
from datalyst.tasks import tablebench_csv

POT_WORKERS = 4
"""Rows whose code runs at once (each in its own sandbox)."""
PROGRESS_FROM = 10
"""Show a progress bar when at least this many rows have code to run."""

_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)  # the official pattern: a newline right after the tag
_ROWS_LABEL = Path("the PoT rows")  # stands in for a file name in table error messages


def last_python_block(prediction: object) -> str:
    """The body of the last ```` ```python ```` block of ``prediction``; ``""`` when there is none."""
    if not isinstance(prediction, str):
        return ""
    blocks = _PYTHON_BLOCK.findall(prediction)
    return blocks[-1] if blocks else ""


def parse_pot_rows(
    rows: Sequence[Mapping],
    *,
    timeout_s: float = 15.0,
    max_workers: int = POT_WORKERS,
    require_isolation: bool = True,
) -> list[dict]:
    """Copies of ``rows`` with the official ``parsed_result``, running the code of PoT rows in the sandbox.

    A PoT text row (``instruction_type == "PoT"``) gets ``{"parsed_prediction", "Parse@1", "ecr_1"}``:
    the ``Final Answer:`` its last python block printed (``""`` unless the code ran to the end
    without error within ``timeout_s`` seconds), whether that answer is non-empty, and whether the
    code ran without error. Other rows go through :func:`datalyst.judge.parse_tablebench_row`; a PoT
    chart row must already carry its ``parsed_result``, as there. Rows keep their order; at most
    ``max_workers`` run at once; ``require_isolation=False`` lets the code run where the sandbox cannot
    isolate it. A row without a usable table ``{columns, data}`` raises
    ``DataFileError`` before any code runs.
    """
    rows = list(rows)
    parsed: list[dict | None] = []
    pending: dict[int, str] = {}  # row index -> its table as CSV text
    for index, row in enumerate(rows):
        if row.get("instruction_type") == "PoT" and row.get("qtype") != "Visualization":
            pending[index] = _table_text(row)
            parsed.append(None)
        else:
            parsed.append(_parse_without_code(row))
    bar = progress_bar(enabled=len(pending) >= PROGRESS_FROM)
    with tempfile.TemporaryDirectory(prefix="tablebench-pot-") as scratch, bar:
        task = bar.add_task("TableBench PoT", total=len(pending))
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(pending)))) as pool:
            futures = {
                pool.submit(_run_row, rows[i], text, Path(scratch) / str(i), timeout_s, require_isolation): i
                for i, text in pending.items()
            }
            for future in as_completed(futures):
                parsed[futures[future]] = future.result()
                bar.advance(task)
    return [row for row in parsed if row is not None]


def _parse_without_code(row: Mapping) -> dict:
    if row.get("instruction_type") != "PoT":
        return parse_tablebench_row(row)
    if not isinstance(row.get("parsed_result"), Mapping):  # a PoT chart row
        raise ValueError(
            f"TableBench PoT chart row {row.get('id', '?')} has no 'parsed_result'; "
            "check its chart with the official script first, or leave Visualization rows out"
        )
    return dict(row)


def _table_text(row: Mapping) -> str:
    """The row's table as the CSV text that ``load_tablebench`` writes; the official files may hold it as JSON text."""
    table = row.get("table")
    if isinstance(table, str):
        try:
            table = json.loads(table)
        except ValueError:
            table = None
    return tablebench_csv({"id": row.get("id", "?"), "table": table}, _ROWS_LABEL)


def _run_row(row: Mapping, table_text: str, folder: Path, timeout_s: float, require_isolation: bool) -> dict:
    code = last_python_block(row.get("prediction"))
    ran = False
    answer = ""
    if code:
        folder.mkdir()
        table = folder / "table.csv"
        table.write_text(table_text, encoding="utf-8")
        # The trailing `pass` keeps the sandbox from echoing a final bare expression, as a notebook would: the
        # official run executes the block as a script, which prints only what it prints.
        run = run_program(f"{code}\npass\n", files=[table], time_limit_s=timeout_s, screen=True,
                          require_isolation=require_isolation)  # fmt: skip
        ran = run.passed
        answer = parse_final_answer(run.stdout) if ran else ""
    return {**row, "parsed_result": {"parsed_prediction": answer, "Parse@1": answer != "", "ecr_1": ran}}
