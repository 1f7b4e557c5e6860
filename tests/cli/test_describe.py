"""``datalyst describe``: meta-information on the terminal, and bad files in one line."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq


def test_describe_prints_tables_and_columns(datalyst, examples_dir):
    done = datalyst("describe", str(examples_dir / "sales.csv"), str(examples_dir / "shop.sqlite"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("File: sales.csv (csv")
    assert "Foreign key: (customer_id) -> customers(customer_id)" in done.stdout


def test_describe_json_is_machine_readable(datalyst, examples_dir):
    done = datalyst("describe", str(examples_dir / "shop.sqlite"), "--json")
    [info] = json.loads(done.stdout)
    assert info["kind"] == "sqlite" and [t["name"] for t in info["tables"]] == ["customers", "orders"]


def test_a_corrupt_file_is_one_clear_line(datalyst, tmp_path):
    junk = tmp_path / "junk.csv"
    junk.write_bytes(bytes(range(256)) * 40)
    done = datalyst("describe", str(junk))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot read '{junk}'")


def test_an_error_line_keeps_its_brackets(datalyst, tmp_path):
    missing = tmp_path / "@name[value] [train].csv"
    done = datalyst("describe", str(missing))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot read '{missing}': file not found")


def test_a_read_past_its_limit_is_one_line_naming_the_variable(datalyst, tmp_path, monkeypatch):
    bomb = tmp_path / "zeros.parquet"
    pq.write_table(pa.table({"a": pa.array([0] * 2_000_000, pa.int64())}), bomb)
    monkeypatch.setenv("DATALYST_READ_DECOMPRESSED_MB", "1")
    done = datalyst("describe", str(bomb))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot read '{bomb}': it unpacks to 8.0 MB, past the 1 MiB limit")
    assert line.endswith("(hint: to allow more, set DATALYST_READ_DECOMPRESSED_MB=2 (now 1))")
