"""``datalyst describe``: meta-information on the terminal, and bad files in one line."""

from __future__ import annotations

import json


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
