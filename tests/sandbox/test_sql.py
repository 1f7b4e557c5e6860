"""SQL through the sandbox: read-only databases, CSV results inside the work folder, timeouts."""

from __future__ import annotations

import csv
import os
import sqlite3

import pytest

from datalyst.sandbox import Limits, Sandbox


@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), total REAL);"
        )
        conn.executemany("INSERT INTO customers VALUES (?, ?)", [(1, "Ada"), (2, "Bo"), (3, "Cy")])
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(i, 1 + i % 3, 10.0 * i) for i in range(1, 31)])
    conn.close()
    return path


def test_query_results_are_previewed_and_saved_as_csv(shop):
    sql = "SELECT c.name, SUM(o.total) AS spent FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.name"
    with Sandbox(files=[shop]) as sb:
        result = sb.run_sql(sql + " ORDER BY spent DESC", output_path="spent.csv")
        assert result.ok and result.columns == ["name", "spent"] and result.n_rows == 3
        assert result.preview.splitlines()[0] == "name | spent"
        with open(os.path.join(sb.host_workdir, "spent.csv"), newline="") as f:
            rows = list(csv.reader(f))
        # the saved file is readable from Python cells too
        assert sb.run_python("import pandas as pd\npd.read_csv('spent.csv').shape").stdout == "(3, 2)\n"
    assert rows == [["name", "spent"], ["Ada", "1650.0"], ["Cy", "1550.0"], ["Bo", "1450.0"]]


def test_many_rows_are_all_saved_but_previewed_briefly(shop):
    with Sandbox(files=[shop]) as sb:
        result = sb.run_sql("SELECT * FROM orders", output_path="all.csv")
        with open(os.path.join(sb.host_workdir, "all.csv")) as f:
            assert len(f.readlines()) == 31
    assert result.n_rows == 30 and "(20 more rows)" in result.preview


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM orders",
        "CREATE TABLE t (x)",
        "INSERT INTO customers VALUES (9, 'Eve')",
        "DROP TABLE orders",
    ],
)
def test_databases_are_read_only(shop, sql):
    before = shop.read_bytes()
    with Sandbox(files=[shop]) as sb:
        result = sb.run_sql(sql)
        assert not result.ok and "readonly" in result.error.evalue.replace("-", "")
        assert sb.run_sql("SELECT COUNT(*) AS n FROM orders").preview.splitlines()[1] == "30"
    assert shop.read_bytes() == before


@pytest.mark.parametrize("path", ["../escape.csv", "/tmp/escape.csv", "sub/../../escape.csv", "shop.db"])
def test_output_paths_outside_the_work_folder_are_refused(shop, path):
    with Sandbox(files=[shop]) as sb:
        result = sb.run_sql("SELECT 1", output_path=path)
        assert result.error.ename == "OutputPathRefused"
        assert not os.path.exists(os.path.join(os.path.dirname(sb.workdir), "escape.csv"))


def test_a_symlink_cannot_redirect_the_output(shop, tmp_path):
    target = tmp_path / "host-file.csv"
    with Sandbox(files=[shop]) as sb:
        assert sb.run_python(f"import os\nos.symlink({str(target)!r}, 'out.csv')").ok
        result = sb.run_sql("SELECT 1 AS one", output_path="out.csv")
    assert result.error.ename == "OutputPathRefused"
    assert not target.exists()


def test_long_queries_are_stopped(shop):
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n"
    with Sandbox(files=[shop], limits=Limits(sql_timeout_s=1)) as sb:
        result = sb.run_sql(endless)
        assert result.timed_out and "longer than 1" in result.error.evalue
        assert sb.run_sql("SELECT 2 AS two").ok


def test_sql_errors_are_observations(shop):
    with Sandbox(files=[shop]) as sb:
        result = sb.run_sql("SELEC nonsense")
    assert result.error.ename == "OperationalError" and "syntax error" in result.error.evalue


def test_the_database_must_exist(shop, examples_dir):
    with Sandbox(files=[examples_dir / "sales.csv"]) as sb:
        assert sb.run_sql("SELECT 1").error.ename == "DatabaseNotFound"
        assert sb.db_info() == "No SQLite database was provided."
    with Sandbox(files=[shop, examples_dir / "shop.sqlite"]) as sb:
        assert "several databases" in sb.run_sql("SELECT 1").error.evalue
        assert sb.run_sql("SELECT COUNT(*) FROM customers", db="shop.db").ok


def test_db_info_describes_tables_and_keys(shop):
    with Sandbox(files=[shop]) as sb:
        info = sb.db_info()
    assert "customers" in info and "orders" in info and "customer_id" in info


def test_parallel_sandboxes_do_not_share_results(shop):
    with Sandbox(files=[shop]) as a, Sandbox(files=[shop]) as b:
        a.run_sql("SELECT 'a' AS who", output_path="result.csv")
        b.run_sql("SELECT 'b' AS who", output_path="result.csv")
        with (
            open(os.path.join(a.host_workdir, "result.csv")) as fa,
            open(os.path.join(b.host_workdir, "result.csv")) as fb,
        ):
            assert (fa.read(), fb.read()) == ("who\na\n", "who\nb\n")


def test_sql_works_in_replay_mode(shop):
    with Sandbox(files=[shop], mode="replay") as sb:
        assert sb.run_sql("SELECT COUNT(*) AS n FROM customers").n_rows == 1
        assert sb.run_python("x = 5").ok
        assert sb.run_sql("SELECT 1 AS one").ok
        assert sb.run_python("print(x)").stdout == "5\n"


@pytest.mark.parametrize("mode", ["session", "replay"])
def test_cells_can_use_the_sql_helpers(shop, mode):
    with Sandbox(files=[shop], mode=mode) as sb:
        info = sb.run_python("get_db_info()")
        assert "customers" in info.stdout and "orders" in info.stdout
        saved = sb.run_python("execute_sql('SELECT name FROM customers ORDER BY id', output_path='names.csv')")
        assert saved.ok and saved.stdout.startswith("3 rows, saved to names.csv")
        assert "names.csv" in saved.files_created
        assert sb.run_python("import pandas as pd\npd.read_csv('names.csv')['name'].tolist()").stdout == (
            "['Ada', 'Bo', 'Cy']\n"
        )
        refused = sb.run_python("execute_sql('SELECT 1', output_path='../x.csv')")
        assert refused.error.ename == "ValueError" and "inside the work folder" in refused.error.evalue
        failed = sb.run_python("execute_sql('DELETE FROM orders')")
        assert failed.error.ename == "RuntimeError" and "readonly" in failed.error.evalue.replace("-", "")


def test_sql_helpers_exist_only_with_a_database(examples_dir):
    with Sandbox(files=[examples_dir / "sales.csv"]) as sb:
        assert sb.run_python("execute_sql('SELECT 1')").error.ename == "NameError"
