"""Per-column statistics and preview rows for the meta-information."""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from ._common import CELL_CHARS, LOW_CARDINALITY, SAMPLE_ROWS, VALUE_CHARS, clip, one_line
from ._models import ColumnInfo

__all__ = ["column_info", "sample_rows"]

# Tried in order on text columns; the first that parses every value wins.
_DATE_FORMATS = (
    "ISO8601",
    "%m/%d/%Y",
    "%d/%m/%Y",
    "%m/%d/%y",
    "%d/%m/%y",
    "%Y/%m/%d",
    "%d.%m.%Y",
    "%d-%m-%Y",
    "%m-%d-%Y",
    "%d-%b-%Y",
    "%d-%b-%y",
    "%d %b %Y",
    "%d %B %Y",
    "%b %d, %Y",
    "%B %d, %Y",
    "%b %d %Y",
    "%b-%y",
    "%b %Y",
    "%B %Y",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d %H:%M",
    "%m/%d/%Y %H:%M",
    "%m/%d/%Y %H:%M:%S",
    "%m/%d/%Y %I:%M %p",
    "%m/%d/%Y %I:%M:%S %p",
    "%d/%m/%Y %H:%M",
    "%d/%m/%Y %H:%M:%S",
    "%d.%m.%Y %H:%M",
    "%d.%m.%Y %H:%M:%S",
    "%d-%m-%Y %H:%M",
    "%d-%m-%Y %H:%M:%S",
)
_DATE_SAMPLE = 200
_HAS_DIGIT = re.compile(r"\d")
_HAS_SEPARATOR = re.compile(r"[-/.:\s]")
_PARSE_ERRORS = (ValueError, TypeError, OverflowError)


def _py(value: Any) -> Any:
    """numpy scalar -> plain Python value."""
    return value.item() if isinstance(value, np.generic) else value


def cell_text(value: Any) -> str:
    """A cell as short, single-line text ('NA' for missing values)."""
    try:
        if value is None or (not isinstance(value, (list, dict, tuple)) and pd.isna(value)):
            return "NA"
    except (TypeError, ValueError):
        pass
    return one_line(_py(value))


def _time_text(ts: pd.Timestamp) -> str:
    if ts.tzinfo is None and ts == ts.normalize():
        return ts.strftime("%Y-%m-%d")
    return ts.isoformat()


def _to_datetime(values: pd.Series, fmt: str) -> pd.Series | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return pd.to_datetime(values, format=fmt, errors="coerce")
        except _PARSE_ERRORS:
            return None


def _dates_in_text(values: pd.Series) -> tuple[str, pd.Series] | None:
    """If every value of a text column parses with one date format, return it and the parsed values."""
    try:
        distinct = pd.unique(values)
    except TypeError:  # lists or objects in the column (JSON): not dates
        return None
    sample = list(distinct[:_DATE_SAMPLE])
    if not sample or not all(isinstance(v, str) and 6 <= len(v) <= 40 for v in sample):
        return None
    if not all(_HAS_DIGIT.search(v) and _HAS_SEPARATOR.search(v) for v in sample):
        return None
    probe = pd.Series(sample, dtype=object)
    for fmt in _DATE_FORMATS:
        parsed = _to_datetime(probe, fmt)
        if parsed is None or parsed.isna().any():
            continue
        full = parsed if len(distinct) == len(sample) else _to_datetime(values.astype(object), fmt)
        if full is not None and not full.isna().any():
            return fmt, full
    return None


def _distinct_values(values: pd.Series) -> tuple[list[str], list[int]]:
    try:
        counts = values.value_counts(dropna=True)
    except TypeError:
        counts = values.map(cell_text).value_counts(dropna=True)
    return [clip(cell_text(v), VALUE_CHARS) for v in counts.index], [int(c) for c in counts.to_numpy()]


def _count_unique(values: pd.Series) -> int:
    try:
        return int(values.nunique(dropna=True))
    except TypeError:  # unhashable cells such as lists from JSON
        return int(values.map(cell_text).nunique(dropna=True))


def _finite(value: Any) -> Any:
    value = _py(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def column_info(series: pd.Series, name: str, **extra: Any) -> ColumnInfo:
    """Statistics of one column (computed on the rows given)."""
    present = series.dropna()
    info: dict[str, Any] = {
        "name": name,
        "dtype": str(series.dtype),
        "kind": "other",
        "missing": int(len(series) - len(present)),
        "unique": _count_unique(present),
        **extra,
    }
    dtype = series.dtype
    if ptypes.is_bool_dtype(dtype):
        info["kind"] = "boolean"
    elif ptypes.is_numeric_dtype(dtype) and not ptypes.is_complex_dtype(dtype):
        info["kind"] = "numeric"
        if len(present):
            info["min"] = _finite(present.min())
            info["max"] = _finite(present.max())
            with np.errstate(all="ignore"):
                mean = float(present.astype("float64").mean())
            info["mean"] = mean if math.isfinite(mean) else None
    elif ptypes.is_datetime64_any_dtype(dtype):
        info["kind"] = "datetime"
        if len(present):
            info["min"], info["max"] = _time_text(present.min()), _time_text(present.max())
    elif ptypes.is_timedelta64_dtype(dtype):
        if len(present):
            info["min"], info["max"] = str(present.min()), str(present.max())
    elif ptypes.is_string_dtype(dtype) or ptypes.is_object_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype):
        info["kind"] = "text"
        found = _dates_in_text(present) if len(present) else None
        if found is not None:
            fmt, parsed = found
            info.update(kind="date-text", date_format=fmt)
            info["min"], info["max"] = _time_text(parsed.min()), _time_text(parsed.max())
    if 0 < info["unique"] <= LOW_CARDINALITY:
        info["values"], info["value_counts"] = _distinct_values(present)
    return ColumnInfo(**info)


def sample_rows(frame: pd.DataFrame, limit: int = SAMPLE_ROWS) -> list[list[str]]:
    """The first rows of a frame as lists of clipped cell texts."""
    head = frame.head(limit)
    return [[clip(cell_text(v), CELL_CHARS) for v in row] for row in head.itertuples(index=False, name=None)]
