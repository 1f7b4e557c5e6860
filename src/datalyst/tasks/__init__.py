"""Tasks: the shared record of a question about data files (or a program to write), loaders, subsets, splits."""

from datalyst.tasks._answers import extract_answers, format_problems
from datalyst.tasks._bird import SQL_ANSWER_FORMAT, load_bird
from datalyst.tasks._dabench import load_dabench
from datalyst.tasks._humaneval import load_humaneval
from datalyst.tasks._io import read_tasks, write_tasks
from datalyst.tasks._subset import DEV_SUBSETS, Split, StratifyBy, split_tasks, stratified_subset
from datalyst.tasks._tablebench import TABLEBENCH_FORMAT, load_tablebench, tablebench_csv
from datalyst.tasks._task import Asked, Case, Lineage, Task

__all__ = [
    "DEV_SUBSETS",
    "SQL_ANSWER_FORMAT",
    "TABLEBENCH_FORMAT",
    "Asked",
    "Case",
    "Lineage",
    "Split",
    "StratifyBy",
    "Task",
    "extract_answers",
    "format_problems",
    "load_bird",
    "load_dabench",
    "load_humaneval",
    "load_tablebench",
    "read_tasks",
    "split_tasks",
    "stratified_subset",
    "tablebench_csv",
    "write_tasks",
]
