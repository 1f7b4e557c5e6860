"""Task synthesis: questions about real data files, with answers computed by running code where possible, and
programming problems about integer sequences with exact test cases."""

from datalyst.synth import _chains  # noqa: F401  (registers the composed template)
from datalyst.synth._challenges import DOMAINS, FAMILIES
from datalyst.synth._convert import FORMATS, LAYOUTS, convert_tasks, sheets_of
from datalyst.synth._datasets import DatasetOptions, make_dataset_tasks
from datalyst.synth._files import (
    FileOptions,
    SourceFile,
    benchmark_fingerprints,
    collect_files,
    read_source_files,
)
from datalyst.synth._followups import make_follow_ups
from datalyst.synth._mining import MiningOptions, make_notebook_tasks, value_in_outputs
from datalyst.synth._notebooks import AddressMap
from datalyst.synth._programmatic import TemplateOptions, make_template_tasks
from datalyst.synth._queries import QueryOptions, clean_format, make_query_tasks
from datalyst.synth._roles import split_loader
from datalyst.synth._sequence_problems import SequenceOptions, make_sequence_tasks
from datalyst.synth._sequences import draw_sequences
from datalyst.synth._show import sample_by_category, tasks_html
from datalyst.synth._sql import SqlOptions, make_sql_tasks
from datalyst.synth._stage import TaskSummary
from datalyst.synth.taxonomy import CATEGORIES, Category, category

__all__ = [
    "CATEGORIES",
    "DOMAINS",
    "FAMILIES",
    "FORMATS",
    "LAYOUTS",
    "AddressMap",
    "Category",
    "DatasetOptions",
    "FileOptions",
    "MiningOptions",
    "QueryOptions",
    "SequenceOptions",
    "SourceFile",
    "SqlOptions",
    "TaskSummary",
    "TemplateOptions",
    "benchmark_fingerprints",
    "category",
    "clean_format",
    "collect_files",
    "convert_tasks",
    "draw_sequences",
    "make_dataset_tasks",
    "make_follow_ups",
    "make_notebook_tasks",
    "make_query_tasks",
    "make_sequence_tasks",
    "make_sql_tasks",
    "make_template_tasks",
    "read_source_files",
    "sample_by_category",
    "sheets_of",
    "split_loader",
    "tasks_html",
    "value_in_outputs",
]
