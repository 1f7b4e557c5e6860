"""Render a FileInfo as compact, bounded text for an LLM prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._common import clip, human_size

if TYPE_CHECKING:
    from ._models import ColumnInfo, FileInfo, TableInfo

_OMITTED_NAMES_CHARS = 400


def _number(value: int | float | str | None) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _rows(table: TableInfo) -> str:
    if table.row_count is None:
        return "unknown number of rows"
    prefix = "" if table.row_count_exact else "~"
    return f"{prefix}{table.row_count} rows"


def column_line(col: ColumnInfo) -> str:
    """One line describing a column."""
    head = f"- {col.name}: {col.dtype}" if col.dtype else f"- {col.name}"
    if col.declared_type:
        head += f" [{col.declared_type}{' NOT NULL' if col.not_null else ''}]"
    parts: list[str] = []
    if col.missing is not None:
        parts.append(f"{col.missing} missing")
    if col.unique is not None:
        parts.append(f"{col.unique} unique")
    if col.kind in ("datetime", "date-text") and col.min is not None:
        dates = f"dates {col.min} .. {col.max}"
        if col.date_format:
            dates += f" (format {col.date_format})"
        parts.append(dates)
    elif col.kind == "numeric" and col.min is not None:
        parts.append(f"min {_number(col.min)}, max {_number(col.max)}, mean {_number(col.mean)}")
    if col.values:
        counts = col.value_counts or []
        shown = [f"{v} ({c})" for v, c in zip(col.values, counts, strict=False)] or list(col.values)
        parts.append("values: " + ", ".join(shown))
    return head + ("; " + "; ".join(parts) if parts else "")


def table_lines(table: TableInfo) -> list[str]:
    """The lines describing one table."""
    kind = "" if table.kind == "table" else f" ({table.kind})"
    lines = [f'Table "{table.name}"{kind}: {_rows(table)} x {table.column_count} columns']
    if table.row_count is not None and (table.stats_rows < table.row_count or not table.row_count_exact):
        lines.append(f"Statistics from the first {table.stats_rows} rows.")
    if table.primary_key:
        lines.append("Primary key: " + ", ".join(table.primary_key))
    for fk in table.foreign_keys:
        refs = ", ".join(c or "(primary key)" for c in fk.ref_columns)
        lines.append(f"Foreign key: ({', '.join(fk.columns)}) -> {fk.ref_table}({refs})")
    if table.omitted_columns:
        rest = table.column_names[len(table.columns) :]
        names = clip(", ".join(rest), _OMITTED_NAMES_CHARS) if rest else ""
        lines.append(
            f"Only the first {len(table.columns)} columns are described; {table.omitted_columns} more"
            + (f": {names}" if names else "")
        )
    if table.columns:
        lines.append("Columns:")
        lines.extend(column_line(col) for col in table.columns)
    if table.sample_rows:
        header = [col.name for col in table.columns] or table.column_names
        width = len(table.sample_rows[0])
        lines.append(f"First {len(table.sample_rows)} rows:")
        lines.append(" | ".join(clip(name, 30) for name in header[:width]))
        lines.extend(" | ".join(row) for row in table.sample_rows)
    lines.extend(f"Note: {note}" for note in table.notes)
    return lines


def fit(text: str, max_chars: int) -> str:
    """Cut `text` to at most `max_chars` characters, at a line end when possible."""
    if len(text) <= max_chars:
        return text
    marker = f"\n... (truncated; the full description has {len(text)} characters)"
    budget = max_chars - len(marker)
    if budget <= 0:
        return text[:max_chars]
    cut = text.rfind("\n", 0, budget + 1)
    if cut < budget // 2:
        cut = budget
    return text[:cut] + marker


def render_file(info: FileInfo, max_chars: int) -> str:
    """The full rendering of a FileInfo, bounded by `max_chars`."""
    head = f"File: {info.name} ({info.kind.value}, {human_size(info.size_bytes)}"
    if info.encoding:
        head += f", encoding {info.encoding}"
    if info.delimiter:
        head += f", delimiter {info.delimiter!r}"
    lines = [head + ")"]
    lines.extend(f"Note: {note}" for note in info.notes)
    if not info.tables:
        lines.append("The file contains no tables.")
    elif len(info.tables) > 1:
        overview = ", ".join(f"{t.name} ({_rows(t)} x {t.column_count} cols)" for t in info.tables)
        lines.append(f"{len(info.tables)} tables: {overview}")
    for table in info.tables:
        lines.append("")
        lines.extend(table_lines(table))
    return fit("\n".join(lines), max(max_chars, 0))
