"""Tests for detect_kind, load and load_table, and for every kind of bad input."""

from __future__ import annotations

import json
import os
import sqlite3
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datalyst.data import DataFileError, FileKind, describe, detect_kind, load, load_table
from datalyst.errors import DatalystError

# -- helpers -----------------------------------------------------------------------------------------


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def assert_error(path: Path, fragment: str, func=load) -> DataFileError:
    with pytest.raises(DataFileError) as info:
        func(path)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message
    assert str(path) in message
    assert "hint:" in message
    return info.value


PEOPLE_CSV = "name,city,score\nAnn,Paris,1.5\nBen,Rome,2.0\nCat,Oslo,\n"


# -- detect_kind --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("a.csv", FileKind.CSV),
        ("a.TXT", FileKind.CSV),
        ("a.tsv", FileKind.TSV),
        ("a.json", FileKind.JSON),
        ("a.jsonl", FileKind.JSONL),
        ("a.ndjson", FileKind.JSONL),
    ],
)
def test_detect_kind_by_extension(tmp_path: Path, name: str, kind: FileKind) -> None:
    assert detect_kind(write(tmp_path / name, "x\n1\n")) is kind


@pytest.mark.parametrize("name", ["shop.sqlite", "shop.db", "shop.sqlite3", "shop.csv", "shop"])
def test_detect_kind_sniffs_sqlite_header(make_sqlite, name: str) -> None:
    assert detect_kind(make_sqlite(name)) is FileKind.SQLITE


def test_detect_kind_sniffs_zip_and_parquet(tmp_path: Path, make_xlsx) -> None:
    misnamed = make_xlsx("book.csv")
    assert detect_kind(misnamed) is FileKind.XLSX
    assert set(load(misnamed)) == {"people", "pets"}
    pq_path = tmp_path / "frame.dat"
    pd.DataFrame({"a": [1, 2]}).to_parquet(pq_path)
    assert detect_kind(pq_path) is FileKind.PARQUET
    assert load_table(pq_path)["a"].tolist() == [1, 2]


def test_file_kind_values() -> None:
    assert [k.value for k in FileKind] == ["csv", "tsv", "xlsx", "json", "jsonl", "parquet", "sqlite"]
    assert FileKind("csv") == "csv"


# -- delimited text ------------------------------------------------------------------------------------


def test_load_csv(tmp_path: Path) -> None:
    path = write(tmp_path / "people.csv", PEOPLE_CSV)
    tables = load(path)
    assert list(tables) == ["people"]
    df = tables["people"]
    assert df.shape == (3, 3)
    assert df["name"].tolist() == ["Ann", "Ben", "Cat"]
    assert df["score"].iloc[:2].tolist() == [1.5, 2.0]
    assert np.isnan(df["score"].iloc[2])
    pd.testing.assert_frame_equal(load_table(path), df)


def test_load_semicolon_csv_with_decimal_commas(tmp_path: Path) -> None:
    path = write(tmp_path / "prices.csv", 'item;price;note\npen;"1,50";a, b\nink;"2,75";c\n')
    df = load_table(path)
    assert df.columns.tolist() == ["item", "price", "note"]
    assert df["price"].tolist() == ["1,50", "2,75"]
    assert df["note"].tolist() == ["a, b", "c"]


def test_load_tsv_and_pipe(tmp_path: Path) -> None:
    tsv = write(tmp_path / "t.tsv", "a\tb, c\n1\tx, y\n2\tz\n")
    assert load_table(tsv).columns.tolist() == ["a", "b, c"]
    assert load_table(tsv)["a"].tolist() == [1, 2]
    piped = write(tmp_path / "p.csv", "a|b|c\n1|2|3\n4|5|6\n")
    assert load_table(piped).shape == (2, 3)


def test_load_csv_quoted_newlines_and_single_column(tmp_path: Path) -> None:
    quoted = write(tmp_path / "q.csv", 'id,text\n1,"line one\nline two"\n2,"say ""hi"", ok"\n')
    df = load_table(quoted)
    assert df["text"].tolist() == ["line one\nline two", 'say "hi", ok']
    single = write(tmp_path / "s.csv", "value\n1\n2\n3\n")
    assert load_table(single)["value"].tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("latin-1", "name;city\nRené;Zürich\nJosé;Málaga\nFrançois;Besançon\n"),
        ("cp1252", "name,note\nA,“quoted” \u2013 dash €\nB,naïve café\n"),
        ("utf-16", "name,city\nRené,Zürich\nJosé,Málaga\n"),
        ("utf-16-le", "name,city\nRené,Zürich\nJosé,Málaga\n"),
        ("utf-8-sig", "name,city\nRené,Zürich\nJosé,Málaga\n"),
    ],
)
def test_load_csv_encodings(tmp_path: Path, encoding: str, text: str) -> None:
    path = write(tmp_path / "enc.csv", text, encoding)
    df = load_table(path)
    expected = pd.read_csv(pd.io.common.StringIO(text), sep=";" if ";" in text else ",")
    assert df.columns.tolist() == expected.columns.tolist()
    assert df.values.tolist() == expected.values.tolist()


def test_header_only_csv_has_zero_rows(tmp_path: Path) -> None:
    df = load_table(write(tmp_path / "h.csv", "a,b,c\n"))
    assert df.shape == (0, 3)
    assert df.columns.tolist() == ["a", "b", "c"]


def test_load_table_single_table_names(tmp_path: Path) -> None:
    path = write(tmp_path / "people.csv", PEOPLE_CSV)
    assert load_table(path, "people").shape == (3, 3)
    assert load_table(path, "people.csv").shape == (3, 3)
    assert load_table(path, "PEOPLE").shape == (3, 3)
    err = assert_error(path, "no table named 'cars'", func=lambda p: load_table(p, "cars"))
    assert "'people'" in str(err)


# -- XLSX ------------------------------------------------------------------------------------------------


def test_load_xlsx_all_sheets(make_xlsx) -> None:
    path = make_xlsx()
    tables = load(path)
    assert list(tables) == ["people", "pets"]
    assert tables["people"].shape == (3, 2)
    assert tables["people"]["age"].tolist() == [31, 45, 27]
    assert tables["pets"]["pet"].tolist() == ["dog", "cat"]
    assert pd.api.types.is_datetime64_any_dtype(tables["pets"]["born"])


def test_load_table_xlsx(make_xlsx) -> None:
    path = make_xlsx()
    assert load_table(path)["name"].tolist() == ["Ann", "Ben", "Cat"]
    assert load_table(path, "pets").shape == (2, 3)
    err = assert_error(path, "no table named 'cars'", func=lambda p: load_table(p, "cars"))
    assert "'people', 'pets'" in str(err)


# -- JSON -----------------------------------------------------------------------------------------------


def test_load_json_records(tmp_path: Path) -> None:
    path = tmp_path / "rec.json"
    path.write_text(json.dumps([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3}]))
    df = load(path)["rec"]
    assert df.shape == (3, 2)
    assert df["a"].tolist() == [1, 2, 3]
    assert df["b"].isna().tolist() == [False, False, True]


def test_load_json_columns_and_wrapped(tmp_path: Path) -> None:
    cols = tmp_path / "cols.json"
    cols.write_text(json.dumps({"a": [1, 2, 3], "b": ["x", "y", "z"]}))
    assert load_table(cols).to_dict("list") == {"a": [1, 2, 3], "b": ["x", "y", "z"]}
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"meta": {"v": 1}, "data": [{"k": 1}, {"k": 2}]}))
    assert load(wrapped)["wrapped"]["k"].tolist() == [1, 2]


def test_load_json_nested_and_several_lists(tmp_path: Path) -> None:
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps([{"id": 1, "geo": {"lat": 1.5, "lon": 2.5}}]))
    assert load_table(nested).columns.tolist() == ["id", "geo.lat", "geo.lon"]
    several = tmp_path / "several.json"
    several.write_text(json.dumps({"users": [{"id": 1}], "orders": [{"id": 7}, {"id": 8}]}))
    tables = load(several)
    assert list(tables) == ["users", "orders"]
    assert load_table(several, "orders").shape == (2, 1)


def test_load_jsonl(tmp_path: Path) -> None:
    path = write(tmp_path / "events.jsonl", '{"t": 1, "e": "a"}\n\n{"t": 2, "e": "b"}\n{"t": 3}\n')
    df = load(path)["events"]
    assert df.shape == (3, 2)
    assert df["t"].tolist() == [1, 2, 3]
    # JSON lines saved with a .json extension are accepted too
    again = write(tmp_path / "events.json", '{"t": 1}\n{"t": 2}\n')
    assert load_table(again)["t"].tolist() == [1, 2]


# -- Parquet ----------------------------------------------------------------------------------------------


def test_load_parquet(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["a", "b", None],
            "when": pd.to_datetime(["2024-01-01", "2024-01-02", None]),
        }
    )
    path = tmp_path / "frame.parquet"
    frame.to_parquet(path)
    df = load(path)["frame"]
    assert df.shape == (3, 3)
    assert df["id"].tolist() == [1, 2, 3]
    assert df["when"].isna().tolist() == [False, False, True]


# -- SQLite --------------------------------------------------------------------------------------------------


def test_load_sqlite_every_table_and_view(make_sqlite) -> None:
    path = make_sqlite()
    tables = load(path)
    assert list(tables) == ["customers", "orders", "big_orders"]
    assert tables["customers"].shape == (3, 3)
    assert tables["orders"]["customer_id"].tolist() == [1, 1, 2, 3]
    assert tables["big_orders"]["order_id"].tolist() == [11, 12]


def test_load_table_sqlite(make_sqlite) -> None:
    path = make_sqlite("shop.db")
    assert load_table(path)["name"].tolist() == ["Ada", "Bo", "Cy"]
    assert load_table(path, "orders").shape == (4, 4)
    err = assert_error(path, "no table named 'nope'", func=lambda p: load_table(p, "nope"))
    assert "'customers', 'orders', 'big_orders'" in str(err)


def test_sqlite_is_opened_read_only(make_sqlite) -> None:
    path = make_sqlite()
    before = (path.stat().st_mtime_ns, path.read_bytes())
    load(path)
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_sqlite_skips_broken_view(make_sqlite) -> None:
    path = make_sqlite()
    con = sqlite3.connect(path)
    con.execute("CREATE VIEW broken AS SELECT missing_column FROM orders")
    con.commit()
    con.close()
    tables = load(path)
    assert "broken" not in tables
    assert list(tables) == ["customers", "orders", "big_orders"]
    assert_error(path, "no such column", func=lambda p: load_table(p, "broken"))


def test_empty_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 1")  # forces the header to be written
    con.commit()
    con.close()
    assert load(path) == {}
    assert_error(path, "contains no tables", func=load_table)


# -- bad input ----------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    err = assert_error(tmp_path / "nope.csv", "file not found")
    assert isinstance(err, DatalystError)
    assert_error(tmp_path / "nope.csv", "file not found", func=detect_kind)


def test_directory(tmp_path: Path) -> None:
    assert_error(tmp_path, "directory")


def test_zero_byte_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.touch()
    assert_error(path, "empty (0 bytes)")
    assert_error(path, "empty (0 bytes)", func=load_table)


def test_blank_lines_only(tmp_path: Path) -> None:
    assert_error(write(tmp_path / "blank.csv", "\n\n  \n"), "no columns found")


def test_binary_junk_with_csv_extension(tmp_path: Path) -> None:
    path = tmp_path / "junk.csv"
    path.write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    assert_error(path, "binary data")


def test_binary_junk_without_nul_bytes(tmp_path: Path) -> None:
    raw = np.random.default_rng(3).integers(1, 32, 4096, dtype=np.uint8).tobytes()
    assert_error(write(tmp_path / "ctrl.csv", raw.decode("latin-1"), "latin-1"), "binary data")


def test_unknown_extension(tmp_path: Path) -> None:
    err = assert_error(write(tmp_path / "notes.xyz", "a,b\n1,2\n"), "unknown file type (extension '.xyz')")
    assert ".csv" in str(err)
    assert_error(write(tmp_path / "noext", "a,b\n"), "extension none")


def test_truncated_xlsx(tmp_path: Path, make_xlsx) -> None:
    whole = make_xlsx().read_bytes()
    path = tmp_path / "half.xlsx"
    path.write_bytes(whole[: len(whole) // 2])
    assert_error(path, "truncated or corrupt")
    assert_error(path, "truncated or corrupt", func=load_table)


def test_zip_that_is_not_a_workbook(tmp_path: Path) -> None:
    path = tmp_path / "archive.xlsx"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "hello")
    assert_error(path, "not an Excel workbook")


def test_xlsx_extension_on_text(tmp_path: Path) -> None:
    assert_error(write(tmp_path / "fake.xlsx", "a,b\n1,2\n"), "not an XLSX workbook")


def test_legacy_xls(tmp_path: Path) -> None:
    path = tmp_path / "old.xls"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    assert_error(path, "legacy Excel")


def test_sqlite_header_then_garbage(tmp_path: Path) -> None:
    path = tmp_path / "bad.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + np.random.default_rng(1).bytes(8192))
    assert_error(path, "SQLite")
    assert_error(path, "SQLite", func=load_table)


def test_truncated_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, text TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 200) for i in range(2000)])
    con.commit()
    con.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert_error(path, "SQLite")


def test_sqlite_extension_without_header(tmp_path: Path) -> None:
    assert_error(write(tmp_path / "data.db", "just some text\n"), "not a SQLite database")


def test_parquet_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1" + b"\x01" * 100)
    assert_error(path, "Parquet file is corrupt")
    assert_error(write(tmp_path / "text.parquet", "hello"), "not a Parquet file")


def test_undecodable_text(tmp_path: Path) -> None:
    # valid UTF-8 for the first MiB (where the encoding is guessed), then a stray byte
    path = tmp_path / "mixed.csv"
    body = b"a,b\n" + b"1,plain\n" * 140_000 + b"2,caf\xe9\n"
    path.write_bytes(body)
    assert_error(path, "not valid utf-8")


def test_malformed_json(tmp_path: Path) -> None:
    assert_error(write(tmp_path / "bad.json", '[{"a": 1}, {"a": 2'), "malformed JSON")
    assert_error(write(tmp_path / "scalar.json", "42"), "not a table")
    assert_error(write(tmp_path / "ragged.json", '{"a": [1, 2], "b": [1]}'), "do not form a table")


def test_json_nested_too_deep_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    for func in (load, describe):
        assert_error(write(tmp_path / "deep.json", deep), "nests 200000 levels deep", func)
        assert_error(write(tmp_path / "deep.jsonl", '{"a": 1}\n{"b": ' + deep + "}\n"), "on line 2 nests", func)
    brackets = '[{"note": "' + "[" * 500 + '", "x": [[1]]}]'  # brackets inside strings are text, not nesting
    assert load(write(tmp_path / "text.json", brackets))["text"]["x"].tolist() == [[[1]]]


def test_a_column_of_lists_is_described_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path / "lists.json", '[{"a": 1, "b": [1, 2]}, {"a": 2, "b": [3]}]')
    [table] = describe(path).tables
    assert [column.name for column in table.columns] == ["a", "b"] and table.columns[1].kind == "text"


def test_jsonl_strings_may_hold_unicode_line_separators(tmp_path: Path) -> None:
    path = write(tmp_path / "notes.jsonl", '{"note": "one\u2028two"}\n{"note": "three\x85four"}\n')
    assert load(path)["notes"]["note"].tolist() == ["one\u2028two", "three\x85four"]


def test_malformed_jsonl(tmp_path: Path) -> None:
    assert_error(write(tmp_path / "bad.jsonl", '{"a": 1}\n{"a": \n'), "malformed JSON on line 2")
    assert_error(write(tmp_path / "list.jsonl", '{"a": 1}\n[1, 2]\n'), "line 2 holds a list")


def test_ragged_csv(tmp_path: Path) -> None:
    assert_error(write(tmp_path / "ragged.csv", "a,b\n1,2\n3,4,5,6\n"), "malformed delimited text")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_unreadable_file(tmp_path: Path) -> None:
    path = write(tmp_path / "locked.csv", PEOPLE_CSV)
    path.chmod(0)
    assert_error(path, "permission denied")


# -- fuzzing: whatever the bytes, only DataFileError escapes -----------------------------------------------

_PREFIXES = [b"", b"SQLite format 3\x00", b"PK\x03\x04", b"PAR1", b"a,b\n", b'[{"a": 1}', b"\xef\xbb\xbf"]
_SUFFIXES = [".csv", ".tsv", ".json", ".jsonl", ".xlsx", ".parquet", ".sqlite"]


@settings(max_examples=150, deadline=None)
@given(
    prefix=st.sampled_from(_PREFIXES),
    body=st.binary(min_size=0, max_size=600),
    suffix=st.sampled_from(_SUFFIXES),
)
def test_random_bytes_raise_only_data_file_error(tmp_path_factory, prefix, body, suffix) -> None:
    path = tmp_path_factory.mktemp("fuzz") / f"f{suffix}"
    path.write_bytes(prefix + body)
    for func in (load, load_table, describe):
        try:
            result = func(path)
        except DataFileError as exc:
            assert "\n" not in str(exc)
        else:
            assert result is not None
