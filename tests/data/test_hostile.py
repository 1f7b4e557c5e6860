"""Hostile data files, built here: each ends in one line naming the file (or in a bounded description), within
its read's limits, never in a traceback or a hang."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import zipfile
from pathlib import Path

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalyst.data import DataFileError, ReadLimits, _reader, adescribe, describe, load, load_table
from datalyst.errors import ConfigError

TIGHT = ReadLimits(wall_s=5, memory_mb=256, decompressed_mb=4)


def refused(path: Path, phrase: str, read=describe, limits: ReadLimits = TIGHT) -> str:
    """Read ``path`` and return the one line it was refused with, after checking its shape."""
    started = time.monotonic()
    with pytest.raises(DataFileError) as caught:
        read(path, limits=limits)
    line = str(caught.value)
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"cannot read '{path}': ")
    assert phrase in line, line
    assert time.monotonic() - started < limits.wall_s + 5
    return line


def rewrite_part(source: Path, target: Path, part: str, change) -> Path:
    """A copy of a zip archive with one part's bytes changed."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            zout.writestr(item, change(data) if item.filename == part else data)
    return target


@pytest.fixture
def workbook(tmp_path: Path) -> Path:
    book = openpyxl.Workbook()
    book.active.append(["a", "b"])
    book.active.append([1, "x"])
    book.save(tmp_path / "base.xlsx")
    return tmp_path / "base.xlsx"


def with_rows(data: bytes, rows: int) -> bytes:
    """A sheet's XML with ``rows`` rows of four numbers in place of its own."""
    text = data.decode()
    body = "".join(
        f'<row r="{r}"><c><v>{r}</v></c><c><v>1</v></c><c><v>2</v></c><c><v>3</v></c></row>' for r in range(1, rows)
    )
    start, end = text.index("<sheetData>") + len("<sheetData>"), text.index("</sheetData>")
    return (text[:start] + body + text[end:]).encode()


# -- one line, never a traceback


def test_deep_json(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    refused(path, "nests 200000 levels deep")


def test_deep_json_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text('{"a": 1}\n' + '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}\n")
    refused(path, "on line 2 nests")


def test_json_number_of_a_million_digits(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_text('[{"a": ' + "7" * 1_000_000 + "}]")
    refused(path, "reading it failed")


def test_xlsx_that_unpacks_past_the_limit(tmp_path: Path, workbook: Path) -> None:
    bomb = rewrite_part(workbook, tmp_path / "bomb.xlsx", "xl/worksheets/sheet1.xml", lambda d: with_rows(d, 100_000))
    assert bomb.stat().st_size < 4 * 2**20
    line = refused(bomb, "past the 4 MiB limit on decompressed data")
    assert "set DATALYST_READ_DECOMPRESSED_MB=8 (now 4)" in line
    refused(bomb, "past the 4 MiB limit", read=load_table)


def test_xlsx_of_many_rows_stops_at_the_wall_time(tmp_path: Path, workbook: Path) -> None:
    rows = rewrite_part(workbook, tmp_path / "rows.xlsx", "xl/worksheets/sheet1.xml", lambda d: with_rows(d, 300_000))
    limits = ReadLimits(wall_s=1)
    line = refused(rows, "reading it took longer than the 1 s limit", read=load, limits=limits)
    assert "set DATALYST_READ_WALL_S=2 (now 1)" in line


def test_xlsx_with_entity_expansion(tmp_path: Path, workbook: Path) -> None:
    entities = "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10 if i else "lol"}">' for i in range(10))
    doctype = f'<?xml version="1.0"?><!DOCTYPE d [{entities}]>'.encode()

    def laughs(data: bytes) -> bytes:
        return doctype + data.split(b"?>", 1)[-1].replace(b"<v>1</v>", b"<v>&e9;</v>")

    refused(rewrite_part(workbook, tmp_path / "laughs.xlsx", "xl/worksheets/sheet1.xml", laughs), "XLSX")


def test_csv_with_a_field_past_the_memory_limit(tmp_path: Path) -> None:
    path = tmp_path / "field.csv"
    path.write_text("a,b\n1," + "x" * 40_000_000 + "\n")
    line = refused(path, "needed more than the 64 MiB memory limit", limits=ReadLimits(memory_mb=64))
    assert "set DATALYST_READ_MEMORY_MB=128 (now 64)" in line


def test_parquet_whose_footer_lies(tmp_path: Path) -> None:
    path = tmp_path / "lies.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    data = bytearray(path.read_bytes())
    data[-8:-4] = (2**31 - 1).to_bytes(4, "little")  # a footer longer than the file
    path.write_bytes(bytes(data))
    refused(path, "Parquet file is corrupt")


def test_parquet_of_a_run_length_encoded_column(tmp_path: Path) -> None:
    path = tmp_path / "zeros.parquet"
    zeros = pa.table({"a": pa.array([0] * 2_000_000, pa.int64())})
    pq.write_table(zeros, path, compression="zstd", row_group_size=100_000)
    assert path.stat().st_size < 100_000
    refused(path, "unpacks to 15.3 MB, past the 4 MiB limit", read=load)
    assert describe(path, limits=TIGHT).tables[0].row_count == 2_000_000  # its first row group alone fits


def test_corrupt_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "broken.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
        con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(5000)])
    con.close()
    data = bytearray(path.read_bytes())
    data[4096 + 100 : 4096 * 3] = os.urandom(4096 * 3 - 4096 - 100)  # the table's pages
    path.write_bytes(bytes(data))
    refused(path, "SQLite", read=load)


def test_sqlite_view_that_never_ends(tmp_path: Path) -> None:
    path = tmp_path / "endless.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
        con.execute("CREATE VIEW v AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
    con.close()
    assert [t.name for t in describe(path, limits=TIGHT).tables] == ["t", "v"]  # bounded: the view's head
    refused(path, "took longer than the 2 s limit", read=load, limits=ReadLimits(wall_s=2))


def test_binary_bytes_named_csv(tmp_path: Path) -> None:
    path = tmp_path / "noise.csv"
    path.write_bytes(os.urandom(50_000))
    refused(path, "")


def test_a_device_named_csv(tmp_path: Path) -> None:
    path = tmp_path / "zero.csv"
    path.symlink_to("/dev/zero")
    refused(path, "the file is empty")


# -- bounded descriptions


def test_workbook_of_a_thousand_sheets(tmp_path: Path) -> None:
    book = openpyxl.Workbook(write_only=True)
    for i in range(1000):
        book.create_sheet(f"s{i}").append(["a"])
    book.save(tmp_path / "sheets.xlsx")
    info = describe(tmp_path / "sheets.xlsx", limits=TIGHT)
    assert len(info.tables) == 500 and info.tables[0].column_names == ["a"] and info.tables[40].columns == []
    assert "Only the first 500 of the 1000 sheets are listed." in info.notes
    assert len(info.render()) <= 6000


def test_database_of_two_thousand_tables(tmp_path: Path) -> None:
    path = tmp_path / "tables.sqlite"
    con = sqlite3.connect(path)
    con.executescript("BEGIN;" + "".join(f"CREATE TABLE t{i} (a INTEGER);" for i in range(2000)) + "COMMIT;")
    con.close()
    info = describe(path, limits=TIGHT)
    assert len(info.tables) == 500
    assert "Only the first 500 of the 2000 tables are listed." in info.notes


def test_csv_of_many_columns(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"c{i}" for i in range(50_000)) + "\n" + ",".join("1" * 50_000) + "\n")
    info = describe(path, limits=TIGHT)
    assert info.tables[0].column_count == 50_000 and len(info.tables[0].columns) == 40


# -- the reader process


def test_an_honest_file_reads_as_in_this_process(tmp_path: Path) -> None:
    path = tmp_path / "sales.csv"
    path.write_text("region,revenue\nWest,10\nEast,7\n")
    assert describe(path) == _reader._call("describe", path, (), {})
    assert load_table(path).equals(_reader._call("load_table", path, (), {}))


def test_cancelling_a_read_stops_its_reader(tmp_path: Path) -> None:
    path = tmp_path / "endless.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE VIEW v AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
    con.close()

    def readers() -> list[str]:
        server = _reader._server[0].pid
        return Path(f"/proc/{server}/task/{server}/children").read_text().split()

    async def cancel_after(seconds: float) -> None:
        read = asyncio.ensure_future(_reader.aread("load", path, limits=ReadLimits(wall_s=60)))
        await asyncio.sleep(seconds)
        assert readers()
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read

    asyncio.run(cancel_after(1.0))
    deadline = time.monotonic() + 5
    while readers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not readers()


def test_adescribe_answers_as_describe(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("a\n1\n")
    assert asyncio.run(adescribe(path)) == describe(path)


def test_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATALYST_READ_WALL_S", "7.5")
    assert ReadLimits.from_env() == ReadLimits(wall_s=7.5)
    monkeypatch.setenv("DATALYST_READ_MEMORY_MB", "lots")
    with pytest.raises(ConfigError, match=r"^DATALYST_READ_MEMORY_MB: Input should be a valid integer"):
        ReadLimits.from_env()


def test_start_reader_starts_one_server_ahead_of_the_first_read(tmp_path: Path) -> None:
    _reader.start_reader()
    process = _reader._server[0]
    _reader.start_reader()
    assert _reader._server[0] is process and process.poll() is None
    path = tmp_path / "a.csv"
    path.write_text("a\n1\n")
    assert describe(path).tables[0].row_count == 1
    assert _reader._server[0] is process
