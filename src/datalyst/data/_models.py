"""Meta-information records (pydantic models, so they can be written as JSON)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ._kinds import FileKind

__all__ = ["SCHEMA_VERSION", "ColumnInfo", "FileInfo", "ForeignKeyInfo", "TableInfo"]

SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ColumnInfo(_Record):
    """One column: its type and statistics over the rows that were read."""

    name: str
    dtype: str = Field(description="pandas dtype after loading")
    kind: str = Field(description="numeric, boolean, datetime, date-text, text or other")
    declared_type: str | None = Field(default=None, description="SQLite declared type")
    not_null: bool = Field(default=False, description="SQLite NOT NULL constraint")
    missing: int | None = None
    unique: int | None = None
    min: int | float | str | None = None
    max: int | float | str | None = None
    mean: float | None = None
    date_format: str | None = Field(default=None, description="strftime format that parses a date-text column")
    values: list[str] | None = Field(default=None, description="distinct values, most frequent first")
    value_counts: list[int] | None = None


class ForeignKeyInfo(_Record):
    """A SQLite foreign key: columns of this table referring to another table."""

    columns: list[str]
    ref_table: str
    ref_columns: list[str | None]


class TableInfo(_Record):
    """One table of a file: a CSV file, a sheet, or a SQLite table or view."""

    name: str
    kind: str = Field(default="table", description="table, view or sheet")
    row_count: int | None = None
    row_count_exact: bool = True
    column_count: int = 0
    column_names: list[str] = Field(default_factory=list, description="at most 1000 names")
    columns: list[ColumnInfo] = Field(default_factory=list, description="the described columns")
    omitted_columns: int = 0
    stats_rows: int = Field(default=0, description="rows the statistics were computed from")
    sample_rows: list[list[str]] = Field(default_factory=list)
    primary_key: list[str] = Field(default_factory=list)
    foreign_keys: list[ForeignKeyInfo] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class FileInfo(_Record):
    """Meta-information about a data file, for prompts and for JSON output."""

    schema_version: int = SCHEMA_VERSION
    path: str
    name: str
    kind: FileKind
    size_bytes: int
    encoding: str | None = None
    delimiter: str | None = None
    tables: list[TableInfo] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    max_chars: int = 6000

    def render(self, max_chars: int | None = None) -> str:
        """Compact text for an LLM prompt, never longer than `max_chars` (default: self.max_chars)."""
        from ._render import render_file

        return render_file(self, self.max_chars if max_chars is None else max_chars)
