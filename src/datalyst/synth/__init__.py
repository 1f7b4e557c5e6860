"""Task synthesis: questions about real data files, with answers computed by running code where possible."""

from datalyst.synth._files import (
    REASONS,
    FileOptions,
    Funnel,
    Rejection,
    SourceFile,
    benchmark_fingerprints,
    collect_files,
    find_data_files,
    read_source_files,
)
from datalyst.synth.taxonomy import CATEGORIES, Category, category

__all__ = [
    "CATEGORIES",
    "REASONS",
    "Category",
    "FileOptions",
    "Funnel",
    "Rejection",
    "SourceFile",
    "benchmark_fingerprints",
    "category",
    "collect_files",
    "find_data_files",
    "read_source_files",
]
