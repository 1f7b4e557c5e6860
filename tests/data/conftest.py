"""Fixtures for the datalyst.data tests: benchmark tables and small files built on the fly."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from datalyst.paths import benchmarks_dir


def dabench_table_dir() -> Path:
    return benchmarks_dir() / "dabench" / "tables"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `dabench_csv` over every DABench CSV table (one skipped case when absent)."""
    if "dabench_csv" not in metafunc.fixturenames:
        return
    folder = dabench_table_dir()
    files = sorted(folder.glob("*.csv")) if folder.is_dir() else []
    if files:
        metafunc.parametrize("dabench_csv", files, ids=[f.name for f in files])
    else:
        reason = f"DABench tables not found at {folder} (set DATALYST_BENCHMARKS)"
        metafunc.parametrize("dabench_csv", [pytest.param(None, marks=pytest.mark.skip(reason=reason))])


@pytest.fixture
def make_sqlite(tmp_path: Path) -> Callable[..., Path]:
    """Build a small SQLite database: customers, orders (FK to customers) and a view."""

    def build(name: str = "shop.sqlite") -> Path:
        path = tmp_path / name
        con = sqlite3.connect(path)
        try:
            con.executescript(
                """
                CREATE TABLE customers (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL,
                    city TEXT
                );
                CREATE TABLE orders (
                    order_id INTEGER PRIMARY KEY,
                    customer_id INTEGER NOT NULL REFERENCES customers(id),
                    ordered_on TEXT,
                    amount REAL
                );
                CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 50;
                """
            )
            con.executemany(
                "INSERT INTO customers VALUES (?, ?, ?)",
                [(1, "Ada", "Lyon"), (2, "Bo", "Oslo"), (3, "Cy", None)],
            )
            con.executemany(
                "INSERT INTO orders VALUES (?, ?, ?, ?)",
                [
                    (10, 1, "2024-01-05", 20.0),
                    (11, 1, "2024-02-11", 75.5),
                    (12, 2, "2024-03-02", 60.0),
                    (13, 3, "2024-03-09", None),
                ],
            )
            con.commit()
        finally:
            con.close()
        return path

    return build


@pytest.fixture
def make_xlsx(tmp_path: Path) -> Callable[..., Path]:
    """Build a workbook with two sheets, 'people' and 'pets'."""

    def build(name: str = "book.xlsx") -> Path:
        path = tmp_path / name
        people = pd.DataFrame({"name": ["Ann", "Ben", "Cat"], "age": [31, 45, 27]})
        pets = pd.DataFrame(
            {"pet": ["dog", "cat"], "legs": [4, 4], "born": pd.to_datetime(["2020-05-01", "2021-07-15"])}
        )
        with pd.ExcelWriter(path, engine="openpyxl") as writer:
            people.to_excel(writer, sheet_name="people", index=False)
            pets.to_excel(writer, sheet_name="pets", index=False)
        return path

    return build
