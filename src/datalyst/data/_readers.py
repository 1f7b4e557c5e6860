"""Readers for the file-based kinds; every failure becomes a DataFileError."""

from __future__ import annotations

import itertools
import json
import os
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from datalyst.errors import DataFileError
from datalyst.jsonl import nesting_depth, split_lines

from ._budget import check_unpacked
from ._common import exc_text, file_error
from ._text import sample_text, sniff_delimiter

_CORRUPT_HINT = "export the file again from its source"


# -- delimited text ------------------------------------------------------------------------------


def delimited_format(path: str | os.PathLike[str], tab: bool) -> tuple[str, str]:
    """The (encoding, delimiter) of a CSV or TSV file."""
    sample = sample_text(path)
    return sample.encoding, "\t" if tab else sniff_delimiter(sample.text)


def read_delimited(
    path: str | os.PathLike[str],
    encoding: str,
    delimiter: str,
    *,
    nrows: int | None = None,
    usecols: list[int] | None = None,
) -> pd.DataFrame:
    """Read delimited text with pandas."""
    try:
        return pd.read_csv(path, sep=delimiter, encoding=encoding, nrows=nrows, usecols=usecols, low_memory=False)
    except UnicodeDecodeError as exc:
        raise file_error(
            path,
            f"the text is not valid {encoding} throughout ({exc_text(exc)}); "
            "the encoding was guessed from the beginning of the file",
            "re-save the file as UTF-8",
        ) from exc
    except pd.errors.EmptyDataError as exc:
        raise file_error(path, "no columns found: the file holds only blank lines", _CORRUPT_HINT) from exc
    except pd.errors.ParserError as exc:
        if "out of memory" in str(exc):  # the C tokenizer's way of saying MemoryError
            raise MemoryError from exc
        raise file_error(
            path,
            f"malformed delimited text: {exc_text(exc)}",
            f"check the delimiter ({delimiter!r}) and the quoting; every row needs the same number of fields",
        ) from exc
    except MemoryError:
        raise
    except Exception as exc:
        raise file_error(path, f"pandas could not parse the file: {exc_text(exc)}", _CORRUPT_HINT) from exc


# -- JSON and JSON lines ---------------------------------------------------------------------------


def _read_text(path: str | os.PathLike[str]) -> str:
    encoding = sample_text(path).encoding
    try:
        with open(path, encoding=encoding) as fh:
            return fh.read().removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise file_error(path, f"the text is not valid {encoding}: {exc_text(exc)}", "re-save as UTF-8") from exc
    except OSError as exc:
        raise file_error(path, f"cannot read the file: {exc_text(exc)}", "check the permissions") from exc


def frame_from_items(items: list[Any]) -> pd.DataFrame:
    """A list of records, of rows, or of scalars -> DataFrame."""
    if all(isinstance(item, dict) for item in items):
        if any(isinstance(v, dict) for item in items[:200] for v in item.values()):
            return pd.json_normalize(items)
        return pd.DataFrame.from_records(items)
    if all(isinstance(item, list) for item in items):
        return pd.DataFrame(items)
    return pd.DataFrame({"value": items})


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value[:100])


def tables_from_json(path: str | os.PathLike[str], obj: Any, stem: str) -> dict[str, pd.DataFrame]:
    """Interpret a parsed JSON document as one or more tables."""
    if isinstance(obj, list):
        return {stem: frame_from_items(obj)}
    if not isinstance(obj, dict):
        raise file_error(
            path,
            f"the JSON document is a single {type(obj).__name__}, not a table",
            "use a list of records, a dict of columns, or an object holding a list of records",
        )
    records = {key: value for key, value in obj.items() if _is_records(value)}
    if len(records) == 1:
        return {stem: frame_from_items(next(iter(records.values())))}
    if records:
        return {str(key): frame_from_items(value) for key, value in records.items()}
    try:
        if obj and all(isinstance(v, (list, dict)) for v in obj.values()):
            return {stem: pd.DataFrame(obj)}
        return {stem: pd.json_normalize(obj)}
    except (ValueError, TypeError) as exc:
        raise file_error(
            path,
            f"the JSON columns do not form a table: {exc_text(exc)}",
            "give every column the same length",
        ) from exc


MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects a JSON file may have (tables need a few levels; Python's decoder
recurses once a level and would end in a RecursionError somewhere past a thousand)."""


def _shallow(path: str | os.PathLike[str], text: str, where: str = "") -> None:
    """Refuse, in one line, JSON nested deeper than :data:`MAX_JSON_DEPTH` before it is decoded."""
    if (depth := nesting_depth(text.encode())) > MAX_JSON_DEPTH:
        raise file_error(
            path,
            f"the JSON{where} nests {depth} levels deep, past the {MAX_JSON_DEPTH} a table can need",
            "flatten it into records or columns",
        )


def _parse_line(path: str | os.PathLike[str], line: str, number: int) -> dict[str, Any]:
    _shallow(path, line, f" on line {number}")
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise file_error(
            path,
            f"malformed JSON on line {number}: {exc.msg} at column {exc.colno}",
            "fix or remove that line",
        ) from exc
    if not isinstance(value, dict):
        raise file_error(
            path,
            f"line {number} holds a {type(value).__name__}, not a JSON object",
            "write one JSON object per line",
        )
    return value


def read_jsonl(path: str | os.PathLike[str], max_rows: int | None = None) -> tuple[pd.DataFrame, int]:
    """Parse JSON lines (at most `max_rows` objects); returns the frame and the number of objects."""
    text = _read_text(path)
    records: list[dict[str, Any]] = []
    total = 0
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        total += 1
        if max_rows is None or len(records) < max_rows:
            records.append(_parse_line(path, line, number))
    return frame_from_items(records), total


def read_json(path: str | os.PathLike[str], stem: str) -> dict[str, pd.DataFrame]:
    """Parse a JSON document into tables (JSON lines are accepted too)."""
    text = _read_text(path)
    _shallow(path, text)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            try:
                return {stem: read_jsonl(path)[0]}
            except Exception:  # not JSON lines either: report the original problem
                pass
        raise file_error(
            path,
            f"malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            "validate the file with a JSON checker; use .jsonl for one object per line",
        ) from exc
    return tables_from_json(path, obj, stem)


# -- Parquet ---------------------------------------------------------------------------------------


def _parquet_error(path: str | os.PathLike[str], exc: Exception) -> Exception:
    return file_error(path, f"the Parquet file is corrupt or unreadable: {exc_text(exc)}", _CORRUPT_HINT)


def _value_width(kind: pa.DataType) -> int:
    """Bytes one value of ``kind`` takes once decoded (8, an offset and a little text, when not fixed)."""
    try:
        return max(kind.bit_width // 8, 1)
    except ValueError:
        return 8


def _check_decoded(path: str | os.PathLike[str], pf: pq.ParquetFile, groups: int, columns: list[str]) -> None:
    """Refuse a Parquet file whose first ``groups`` row groups would decode past the decompressed-size limit: the
    larger of the sizes its metadata declares and of the rows times the columns' widths (a run-length encoded
    column of a billion zeros takes a few bytes on disk)."""
    width = sum(_value_width(pf.schema_arrow.field(name).type) for name in columns)
    meta = pf.metadata
    groups_meta = [meta.row_group(i) for i in range(min(groups, meta.num_row_groups))]
    check_unpacked(path, sum(max(g.total_byte_size, g.num_rows * width) for g in groups_meta))


def read_parquet(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a whole Parquet file."""
    try:
        with pq.ParquetFile(path) as pf:
            _check_decoded(path, pf, pf.metadata.num_row_groups, list(pf.schema_arrow.names))
            return pf.read().to_pandas()
    except (MemoryError, DataFileError):
        raise
    except Exception as exc:
        raise _parquet_error(path, exc) from exc


def read_parquet_head(
    path: str | os.PathLike[str], max_rows: int, max_columns: int
) -> tuple[pd.DataFrame, int, list[str]]:
    """The first rows and columns of a Parquet file, its row count and all column names."""
    try:
        with pq.ParquetFile(path) as pf:
            names = list(pf.schema_arrow.names)
            wanted = names[:max_columns]
            groups = pf.metadata.num_row_groups
            rows = itertools.accumulate(pf.metadata.row_group(i).num_rows for i in range(groups))
            _check_decoded(path, pf, next((i + 1 for i, n in enumerate(rows) if n >= max_rows), groups), wanted)
            batches = []
            got = 0
            for batch in pf.iter_batches(batch_size=min(max_rows, 65_536), columns=wanted):
                batches.append(batch)
                got += batch.num_rows
                if got >= max_rows:
                    break
            schema = pf.schema_arrow
            if batches:
                table = pa.Table.from_batches(batches).slice(0, max_rows)
            else:
                table = pa.schema([schema.field(n) for n in wanted]).empty_table()
            return table.to_pandas(), pf.metadata.num_rows, names
    except (MemoryError, DataFileError):
        raise
    except Exception as exc:
        raise _parquet_error(path, exc) from exc


# -- XLSX ------------------------------------------------------------------------------------------


@dataclass
class Sheet:
    """A sheet read from a workbook, with the size openpyxl reports for it."""

    name: str
    frame: pd.DataFrame
    max_row: int | None
    max_column: int | None
    header: list[str] | None = None  # every header name, when only some columns were read


def _xlsx_error(path: str | os.PathLike[str], exc: Exception) -> Exception:
    if isinstance(exc, zipfile.BadZipFile):
        reason = "the XLSX file is truncated or corrupt (its zip archive cannot be read)"
    elif isinstance(exc, KeyError):
        reason = f"the zip archive is not an Excel workbook (missing part {exc_text(exc)})"
    else:
        reason = f"the XLSX workbook is corrupt or unreadable: {exc_text(exc)}"
    return file_error(path, reason, "open it in a spreadsheet program and save it again as .xlsx")


def _check_unzipped(path: str | os.PathLike[str]) -> None:
    """Refuse a workbook whose parts unpack past the decompressed-size limit (Python's zip reader stops at the
    sizes the archive declares, so the declared sizes bound what is unpacked)."""
    try:
        with zipfile.ZipFile(path) as archive:
            check_unpacked(path, sum(member.file_size for member in archive.infolist()))
    except zipfile.BadZipFile as exc:
        raise _xlsx_error(path, exc) from exc


def read_xlsx(
    path: str | os.PathLike[str],
    pick: Callable[[list[str]], list[str]],
    *,
    nrows: int | None = None,
    max_columns: int | None = None,
) -> list[Sheet]:
    """Read sheets of a workbook; `pick(sheet_names)` returns the names to read."""
    _check_unzipped(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # openpyxl warns about styles and extensions it drops
        try:
            book = pd.ExcelFile(path, engine="openpyxl")
        except MemoryError:
            raise
        except Exception as exc:
            raise _xlsx_error(path, exc) from exc
        with book:
            names = pick([str(n) for n in book.sheet_names])
            sheets = []
            try:
                for name in names:
                    ws = book.book[name]
                    usecols, header = None, None
                    if max_columns and (ws.max_column or 0) > max_columns:
                        usecols = list(range(max_columns))
                        first = next(ws.iter_rows(min_row=1, max_row=1, values_only=True), ())
                        header = [f"Unnamed: {i}" if v is None else str(v) for i, v in enumerate(first)]
                    frame = book.parse(name, nrows=nrows, usecols=usecols)
                    sheets.append(Sheet(name, frame, ws.max_row, ws.max_column, header))
            except MemoryError:
                raise
            except Exception as exc:
                raise _xlsx_error(path, exc) from exc
    return sheets
