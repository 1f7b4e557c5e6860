"""What does reading a data file in a reader process, within its limits, cost against reading it in place?

Three real files of the corpus (FiveThirtyEight: a table of mixed text and numbers, one of numbers, and a wide
survey), their rows repeated ``--scale`` times to make large honest files, written as CSV, and the first also as
XLSX, Parquet, SQLite and JSON lines. For each file, alternating, median over ``--repeats``:

    (a) in place  the readers called in this process, as every read was before files were read within limits
    (b) reader    ``datalyst.data.describe`` / ``load``: a reader forked from the reader server, within the
                  default ReadLimits, its result sent back (the server started once, before the first timing)

for ``describe`` (what the prompt and the web app read) and ``load`` (every table, as synthesis reads a file).
The ratio is (b)/(a); the issue's target is that a large honest file reads as fast as before.

    . .venv/bin/activate
    python benchmarks/read_bench.py                       # scale 20, 5 repeats: about 4 minutes on 2 cores
    python benchmarks/read_bench.py --scale 5 --repeats 3 --json read.json

The corpus is read from ``<repo>/../shared/corpus``; ``--corpus`` points elsewhere.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from datalyst.data import FileKind, describe, load, write_table
from datalyst.data._reader import _call
from datalyst.data._writers import SUFFIXES

REPO = Path(__file__).resolve().parent.parent
SOURCES = (
    "pollster-ratings/2020/raw-polls.csv",
    "nba-raptor/modern_RAPTOR_by_team.csv",
    "non-voters/nonvoters_data.csv",
)
OTHER_KINDS = (FileKind.XLSX, FileKind.PARQUET, FileKind.SQLITE, FileKind.JSONL)
XLSX_ROWS = 50_000  # openpyxl writes and reads about 10k rows a second: a workbook of this size is large enough


def build(corpus: Path, folder: Path, scale: int) -> list[Path]:
    """The large honest files: each source's rows repeated ``scale`` times, as CSV; the first also in other kinds."""
    files = []
    for index, source in enumerate(SOURCES):
        frame = pd.read_csv(corpus / "fivethirtyeight" / source, low_memory=False)
        big = pd.concat([frame] * scale, ignore_index=True)
        name = Path(source).stem
        files.append(write_table(big, folder / f"{name}.csv", FileKind.CSV))
        if index == 0:
            for kind in OTHER_KINDS:
                rows = big.head(XLSX_ROWS) if kind is FileKind.XLSX else big
                files.append(write_table(rows, folder / f"{name}{SUFFIXES[kind]}", kind))
    return files


def timed(read, *args) -> float:
    began = time.perf_counter()
    read(*args)
    return time.perf_counter() - began


def measure(path: Path, function: str, repeats: int) -> dict[str, float]:
    """Median seconds of (a) and (b), alternating so that both see the same page cache and machine load."""
    public = {"describe": describe, "load": load}[function]
    here, reader = [], []
    for _ in range(repeats):
        here.append(timed(_call, function, path, (), {}))
        reader.append(timed(public, path))
    a, b = statistics.median(here), statistics.median(reader)
    return {"in_place_s": a, "reader_s": b, "ratio": b / a}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--scale", type=int, default=20, help="times each source's rows are repeated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="read-bench-") as tmp:
        files = build(args.corpus, Path(tmp), args.scale)
        describe(files[0])  # start the reader server: once per process, not part of a read
        rows = []
        print(f"{'file':<34} {'MB':>6} {'read':<9} {'(a) in place':>12} {'(b) reader':>11} {'ratio':>6}")
        for path in files:
            for function in ("describe", "load"):
                row = {"file": path.name, "mb": path.stat().st_size / 2**20, "function": function}
                row |= measure(path, function, args.repeats)
                rows.append(row)
                print(
                    f"{row['file']:<34} {row['mb']:>6.1f} {function:<9} {row['in_place_s']:>11.3f}s "
                    f"{row['reader_s']:>10.3f}s {row['ratio']:>5.2f}x"
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
