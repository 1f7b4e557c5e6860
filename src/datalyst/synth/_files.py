"""Collecting the data files that tasks are made from: scan, filter, de-duplicate, decontaminate, convert.

``collect_files`` walks folders for every file kind ``datalyst.data`` reads, in path order, and gives each
file one line: a :class:`SourceFile` in the output when one of its tables passes the filters, else a
:class:`Rejection` with a stable reason in ``<out>.rejected.jsonl``. A rerun skips the files that already
have a line, so an interrupted run resumes. A share of the CSV/TSV tables kept (chosen by seed and content)
is converted to XLSX or SQLite, half each, so tasks cover the three formats; the converted file replaces
the original as the table's source (one table, one file), and ``found_at`` names the original.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import track

from datalyst.data import (
    DATA_SUFFIXES,
    SUFFIXES,
    DataFileError,
    FileInfo,
    FileKind,
    describe,
    detect_kind,
    fits,
    load,
    write_table,
)
from datalyst.errors import ConfigError
from datalyst.jsonl import drop_torn_tail, read_appended
from datalyst.provenance import read_manifest, write_manifest
from datalyst.synth._fingerprint import Fingerprint, fingerprint
from datalyst.tasks import Task

SCHEMA_VERSION = 1
LICENCE_FILES = ("SOURCE.md", "LICENSE", "LICENSE.md", "LICENSE.txt", "COPYING")
UNNAMED = re.compile(r"^(unnamed: \d+|\s*)$", re.IGNORECASE)
_FIX = "restore the file or move the line out"


class FileOptions(BaseModel):
    """What makes a table usable, and how many to convert to other formats."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    min_rows: int = Field(20, ge=1)
    """Fewest rows a table may have."""
    max_rows: int = Field(1000, ge=1)
    """Most rows a table may have."""
    min_columns: int = Field(2, ge=1)
    """Fewest columns."""
    max_columns: int = Field(50, ge=1)
    """Most columns."""
    max_missing_share: float = Field(0.5, ge=0, le=1)
    """Largest share of empty cells."""
    max_unnamed_share: float = Field(0.2, ge=0, le=1)
    """Most columns that may have no name or a number for a name (as when a file has no header row)."""
    convert_share: float = Field(0.3, ge=0, le=1)
    """Share of CSV/TSV tables converted, half to XLSX and half to SQLite."""
    max_per_schema: int = Field(3, ge=1)
    """Most tables kept with the same column names (snapshots of one dataset). A corpus may hold a hundred
    snapshots of one dataset, and tasks on each would be the same questions on new numbers."""
    seed: int = 0
    """Seed of which tables are converted."""


class SourceFile(BaseModel):
    """A table that tasks can be made from, and the file that holds it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    """The first 16 hex digits of ``content_hash``."""
    path: str
    """The file tasks read: the one found, or the XLSX/SQLite file converted from it."""
    table: str
    """The table in that file (a sheet, a SQLite table, or the file's stem)."""
    kind: FileKind
    rows: int
    columns: int
    content_hash: str
    """Of the table's normalised cells: the same in every format (see ``synth._fingerprint``)."""
    file_hash: str
    """SHA-256 of the bytes of ``path``."""
    found_at: str
    """The file the scan found."""
    licence: str | None
    """The nearest folder above ``found_at`` with a SOURCE.md or LICENSE file: whose terms apply."""
    info: FileInfo
    """Meta-information of ``path`` (``datalyst.data.describe``), for prompts and generators."""


class Rejection(BaseModel):
    """A file no task is made from, and why: ``reason`` is one of ``REASONS``."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """The file's path."""
    reason: str
    detail: str = ""


class Funnel(BaseModel):
    """What became of the files a collection examined (this run and the runs it resumes)."""

    files: int
    kept: int
    kept_by_kind: dict[str, int]
    converted: int
    """Kept tables whose file was converted to XLSX or SQLite."""
    dropped_by_reason: dict[str, int]


REASONS = (
    "unreadable",
    "too_few_rows",
    "too_many_rows",
    "too_few_columns",
    "too_many_columns",
    "unnamed_columns",
    "no_numeric_column",
    "mostly_missing",
    "benchmark_table",
    "benchmark_lookalike",
    "duplicate",
    "same_schema",
)


def find_data_files(roots: Sequence[str | Path]) -> list[Path]:
    """Every file under ``roots`` (or a root that is a file) with a suffix ``datalyst.data`` reads, sorted,
    hidden files and folders left out."""
    found: set[Path] = set()
    for root in map(Path, roots):
        if not root.exists():
            raise ConfigError(f"{root} does not exist; give folders or files to scan")
        for path in [root] if root.is_file() else root.rglob("*"):
            relative = path.relative_to(root).parts if path != root else ()
            if path.is_file() and path.suffix.lower() in DATA_SUFFIXES and not any(p.startswith(".") for p in relative):
                found.add(path.resolve())
    return sorted(found)


def benchmark_fingerprints(tasks: Iterable[Task]) -> list[tuple[str, Fingerprint]]:
    """(file, fingerprint) of every table the tasks read: what collected files must not be."""
    prints = []
    for file in sorted({file for task in tasks for file in task.files}):
        for name, frame in load(file).items():
            prints.append((f"{file}:{name}", fingerprint(frame)))
    return prints


def collect_files(
    roots: Sequence[str | Path],
    out: str | Path,
    *,
    options: FileOptions | None = None,
    benchmarks: Sequence[tuple[str, Fingerprint]] = (),
    converted_dir: str | Path | None = None,
    progress: bool = True,
) -> Funnel:
    """Examine every data file under ``roots`` once, appending kept tables to ``out`` and the others to
    ``<out>.rejected.jsonl``; returns the funnel (files seen, kept by kind, dropped by reason), which the
    manifest beside ``out`` records too. Converted files go to ``converted_dir`` (``<out>.converted/``)."""
    options = options or FileOptions()
    out = Path(out)
    rejected_path = out.with_name(out.name + ".rejected.jsonl")
    converted = (Path(converted_dir) if converted_dir is not None else out.with_name(out.name + ".converted")).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    for path in (out, rejected_path):
        drop_torn_tail(path)
    kept = read_appended(out, SourceFile, what="a source file record", fix=_FIX)
    rejections = read_appended(rejected_path, Rejection, what="a rejection record", fix=_FIX)
    if kept or rejections:
        _check_same_options(out, options)
    done = {record.found_at for record in kept} | {rejection.id for rejection in rejections}
    seen = {record.content_hash for record in kept}
    schemas = Counter(_schema(record) for record in kept)
    paths = find_data_files(roots)
    settings = {"roots": [str(Path(root).resolve()) for root in roots], "options": options.model_dump()}
    write_manifest(out, **settings, benchmark_tables=len(benchmarks))
    todo = [path for path in paths if str(path) not in done]
    console = Console(stderr=True)
    with out.open("a", encoding="utf-8") as sink, rejected_path.open("a", encoding="utf-8") as rejects:
        for path in track(todo, description="files", console=console, disable=not progress):
            result = _examine(path, options, benchmarks, seen, schemas, converted)
            if isinstance(result, SourceFile):
                seen.add(result.content_hash)
                schemas[_schema(result)] += 1
                kept.append(result)
                sink.write(result.model_dump_json() + "\n")
                sink.flush()
            else:
                rejections.append(result)
                rejects.write(result.model_dump_json() + "\n")
                rejects.flush()
    funnel = Funnel(
        files=len(kept) + len(rejections),
        kept=len(kept),
        kept_by_kind=dict(sorted(Counter(record.kind.value for record in kept).items())),
        converted=sum(record.path != record.found_at for record in kept),
        dropped_by_reason={reason: n for reason in REASONS if (n := sum(r.reason == reason for r in rejections))},
    )
    write_manifest(out, **settings, benchmark_tables=len(benchmarks), funnel=funnel.model_dump())
    return funnel


def _check_same_options(out: Path, options: FileOptions) -> None:
    """A resumed collection must filter as it did: otherwise its records would follow two sets of rules."""
    try:
        previous = read_manifest(out).get("options", {})
    except (OSError, ValueError):
        return  # no readable manifest: nothing to compare with
    changed = [
        f"{key} {value} (now {getattr(options, key)})"
        for key, value in previous.items()
        if getattr(options, key, value) != value
    ]
    if changed:
        raise ConfigError(
            f"{out} was collected with other options: {', '.join(changed)}; give the same options to resume it, "
            "or another --out"
        )


def _examine(
    path: Path,
    options: FileOptions,
    benchmarks: Sequence[tuple[str, Fingerprint]],
    seen: set[str],
    schemas: Counter[tuple[str, ...]],
    converted: Path,
) -> SourceFile | Rejection:
    try:
        tables = load(path)
    except DataFileError as exc:
        return Rejection(id=str(path), reason="unreadable", detail=str(exc))
    problems = [(name, _problem(frame, options)) for name, frame in tables.items()]
    usable = [name for name, problem in problems if problem is None]
    if not usable:
        reason, detail = problems[0][1] if problems else ("unreadable", "the file holds no table")
        return Rejection(id=str(path), reason=reason, detail=detail)
    table = usable[0]
    frame = tables[table]
    found = fingerprint(frame)
    for where, benchmark in benchmarks:
        if found.content_hash == benchmark.content_hash:
            return Rejection(id=str(path), reason="benchmark_table", detail=f"the same table as {where}")
        if found.looks_like(benchmark):
            return Rejection(id=str(path), reason="benchmark_lookalike", detail=f"mostly the rows of {where}")
    if found.content_hash in seen:
        return Rejection(id=str(path), reason="duplicate", detail=f"table {found.content_hash[:16]} is kept")
    if (kept := schemas[tuple(map(str, frame.columns))]) >= options.max_per_schema:
        return Rejection(id=str(path), reason="same_schema", detail=f"{kept} tables with its columns are kept")
    source, kind = path, detect_kind(path)
    target = _conversion(found.content_hash, options) if kind in (FileKind.CSV, FileKind.TSV) else None
    if target is not None and fits(frame, target):
        (source, table), kind = _convert(frame, path, found.content_hash, target, converted), target
    return SourceFile(
        id=found.content_hash[:16],
        path=str(source),
        table=table,
        kind=kind,
        rows=len(frame),
        columns=frame.shape[1],
        content_hash=found.content_hash,
        file_hash=hashlib.sha256(source.read_bytes()).hexdigest(),
        found_at=str(path),
        licence=_licence(path),
        info=describe(source),
    )


def _schema(record: SourceFile) -> tuple[str, ...]:
    """The column names of the record's table, in order."""
    return next((tuple(t.column_names) for t in record.info.tables if t.name == record.table), ())


def _problem(frame: pd.DataFrame, options: FileOptions) -> tuple[str, str] | None:
    """Why a table is not usable (reason, detail), or None."""
    rows, columns = frame.shape
    if rows < options.min_rows:
        return "too_few_rows", f"{rows} rows, fewer than {options.min_rows}"
    if rows > options.max_rows:
        return "too_many_rows", f"{rows} rows, more than {options.max_rows}"
    if columns < options.min_columns:
        return "too_few_columns", f"{columns} columns, fewer than {options.min_columns}"
    if columns > options.max_columns:
        return "too_many_columns", f"{columns} columns, more than {options.max_columns}"
    unnamed = sum(_unnamed(str(name)) for name in frame.columns)
    if unnamed / columns > options.max_unnamed_share:
        return "unnamed_columns", f"{unnamed} of {columns} columns have no name, or a number for one (no header row?)"
    if not any(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in frame.dtypes):
        return "no_numeric_column", "no column holds numbers"
    missing = float(frame.isna().to_numpy().mean())
    if missing > options.max_missing_share:
        return "mostly_missing", f"{missing:.0%} of the cells are empty"
    return None


def _unnamed(name: str) -> bool:
    """Blank, pandas' ``Unnamed: N``, or a number other than a year (the first row of a file without a
    header; wide tables often name columns by year)."""
    if UNNAMED.match(name):
        return True
    try:
        number = float(name.replace(",", ""))
    except ValueError:
        return False
    return not (number.is_integer() and 1000 <= number <= 2999)


def _conversion(content_hash: str, options: FileOptions) -> FileKind | None:
    """XLSX, SQLite or None (stay as found) for a CSV/TSV table: a draw from the seed and the content."""
    draw = int(hashlib.sha256(f"{options.seed}:{content_hash}".encode()).hexdigest()[:12], 16) / 16**12
    if draw >= options.convert_share:
        return None
    return FileKind.XLSX if draw < options.convert_share / 2 else FileKind.SQLITE


def _convert(frame: pd.DataFrame, path: Path, content_hash: str, kind: FileKind, folder: Path) -> tuple[Path, str]:
    """Write the table as ``kind`` into ``folder``; returns (file, table name)."""
    name = re.sub(r"\W+", "_", path.stem).strip("_").lower()[:31] or "data"  # 31: the longest sheet name
    return write_table(frame, folder / f"{name}-{content_hash[:8]}{SUFFIXES[kind]}", kind, table=name), name


def _licence(path: Path) -> str | None:
    for folder in path.parents:
        if any((folder / name).is_file() for name in LICENCE_FILES):
            return str(folder)
    return None


def read_source_files(path: str | Path) -> list[SourceFile]:
    """The records of a ``synth files`` output, in order."""
    return read_appended(Path(path), SourceFile, what="a source file record", fix=_FIX)
