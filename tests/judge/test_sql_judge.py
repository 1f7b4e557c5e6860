"""SQL judging: BIRD execution accuracy under the read-only rules, SQL extraction and result-table matching.

(Named ``test_sql_judge`` because ``tests/sandbox/test_sql.py`` already owns the ``test_sql`` module name.)
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from datalyst.errors import DataFileError
from datalyst.judge import SqlVerdict, csv_match, execution_match, extract_sql


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """customer(id, name, city) and purchase(id, customer_id, amount, note), with repeats and NULLs."""
    path = tmp_path_factory.mktemp("sql") / "shop.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
        CREATE TABLE purchase (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL, note TEXT);
        INSERT INTO customer VALUES (1, 'Ada', 'Paris'), (2, 'Bo', 'Oslo'), (3, 'Cy', NULL), (4, 'Di', 'Paris');
        INSERT INTO purchase VALUES
            (1, 1, 10.5, 'gift'), (2, 1, 20.0, NULL), (3, 2, 7.25, ''), (4, 4, 10.5, 'gift'), (5, 4, NULL, NULL);
        CREATE VIEW big_purchase AS SELECT * FROM purchase WHERE amount > 10;
        """
    )
    connection.commit()
    connection.close()
    return path


@pytest.fixture(scope="module")
def shop_digest(shop: Path) -> str:
    return hashlib.sha256(shop.read_bytes()).hexdigest()


def judge(database: Path, predicted: str, gold: str, **options) -> SqlVerdict:
    return execution_match(database, predicted, gold, **options)


# ---------------------------------------------------------------- set semantics


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("SELECT name FROM customer ORDER BY id DESC", "SELECT name FROM customer ORDER BY id"),
        ("SELECT city FROM customer", "SELECT DISTINCT city FROM customer"),  # repeats ignored
        ("SELECT DISTINCT amount FROM purchase", "SELECT amount FROM purchase"),
        ("SELECT name AS who FROM customer", "SELECT name FROM customer"),  # names ignored
        ("SELECT 1", "SELECT 1.0"),  # SQLite integer and real that compare equal
        ("SELECT NULL", "SELECT NULL"),
        ("SELECT note FROM purchase WHERE id = 5", "SELECT city FROM customer WHERE id = 3"),  # NULL == NULL
        ("SELECT name FROM customer WHERE id > 10", "SELECT id FROM purchase WHERE id < 0"),  # both empty
        (
            "SELECT c.name, SUM(p.amount) FROM customer c JOIN purchase p ON p.customer_id = c.id GROUP BY c.id",
            "WITH t AS (SELECT customer_id, SUM(amount) AS s FROM purchase GROUP BY customer_id) "
            "SELECT name, s FROM customer JOIN t ON t.customer_id = customer.id",
        ),
        ("SELECT amount FROM big_purchase", "SELECT amount FROM purchase WHERE amount > 10"),  # views read
        (
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 4) SELECT x FROM n",
            "SELECT id FROM customer",
        ),
        ("  SELECT id FROM customer;  -- done\n", "SELECT id FROM customer"),
    ],
)
def test_equal_row_sets_are_correct(shop, predicted, gold):
    verdict = judge(shop, predicted, gold)
    assert verdict.correct and verdict.error is None


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("SELECT id, name FROM customer", "SELECT id FROM customer"),  # an extra column
        ("SELECT name, id FROM customer", "SELECT id, name FROM customer"),  # column order counts
        ("SELECT name FROM customer WHERE id < 3", "SELECT name FROM customer"),  # a subset
        ("SELECT 0", "SELECT NULL"),
        ("SELECT ''", "SELECT NULL"),
        ("SELECT '1'", "SELECT 1"),  # text is not a number
        ("SELECT 0.1 + 0.2", "SELECT 0.3"),  # floats as SQLite returns them, no tolerance
        ("SELECT ROUND(AVG(amount), 2) FROM purchase", "SELECT AVG(amount) FROM purchase"),
        ("SELECT name FROM customer WHERE id > 10", "SELECT name FROM customer WHERE id = 1"),
    ],
)
def test_different_row_sets_are_wrong(shop, predicted, gold):
    verdict = judge(shop, predicted, gold)
    assert not verdict.correct and verdict.error is None


def test_row_counts_include_repeats(shop):
    verdict = judge(shop, "SELECT city FROM customer", "SELECT DISTINCT city FROM customer")
    assert (verdict.n_predicted_rows, verdict.n_gold_rows) == (4, 3)


# ---------------------------------------------------------------- hostile predicted queries


def test_runaway_query_times_out(shop):
    verdict = judge(  # an endless query: only the timeout ends it (the test's own time limit guards a hang)
        shop,
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT MAX(x) FROM n",
        "SELECT 1",
        timeout_s=0.2,
    )
    assert not verdict.correct
    assert verdict.error == "timeout: the query ran longer than 0.2 s"
    assert verdict.n_predicted_rows is None and verdict.n_gold_rows == 1


@pytest.mark.parametrize(
    ("predicted", "reason"),
    [
        ("ATTACH DATABASE ':memory:' AS other", "ATTACH"),
        ("DETACH DATABASE main", "DETACH"),
        ("PRAGMA table_info(customer)", "PRAGMA"),
        ("PRAGMA journal_mode = WAL", "PRAGMA"),
        ("INSERT INTO customer VALUES (9, 'Eve', 'Rome')", "writing"),
        ("UPDATE customer SET name = 'x'", "writing"),
        ("DELETE FROM purchase", "writing"),
        ("DROP TABLE purchase", "writing"),
        ("CREATE TABLE t (a)", "writing"),
        ("CREATE TEMP TABLE t AS SELECT * FROM customer", "writing"),
        ("WITH x AS (SELECT 1) INSERT INTO customer (id) SELECT * FROM x", "writing"),
        ("VACUUM INTO 'copy.sqlite'", "ATTACH"),  # VACUUM works through an internal ATTACH
        ("BEGIN", "a transaction"),
        ("SAVEPOINT s", "a savepoint"),
        ("SELECT load_extension('evil')", "the function load_extension()"),
        ("SELECT 1; DROP TABLE customer", None),
        ("SELECT 1; SELECT 2", None),
    ],
)
def test_anything_but_reading_is_refused(shop, shop_digest, predicted, reason):
    verdict = judge(shop, predicted, "SELECT 1")
    assert not verdict.correct
    assert verdict.error.startswith("refused: ")
    if reason is None:
        assert verdict.error == "refused: only one SQL statement is accepted"
    else:
        assert verdict.error.startswith(f"refused: {reason}")
    assert "\n" not in verdict.error
    assert hashlib.sha256(shop.read_bytes()).hexdigest() == shop_digest


def test_database_file_is_never_touched(shop, shop_digest):
    before = sorted(p.name for p in shop.parent.iterdir())
    judge(shop, "SELECT * FROM customer, purchase", "SELECT * FROM purchase, customer")
    assert hashlib.sha256(shop.read_bytes()).hexdigest() == shop_digest
    assert sorted(p.name for p in shop.parent.iterdir()) == before  # no journal, WAL or copy left behind


@pytest.mark.parametrize(
    ("predicted", "start"),
    [
        ("SELEC name FROM customer", 'invalid: near "SELEC": syntax error'),
        ("SELECT nope FROM customer", "invalid: no such column: nope"),
        ("SELECT * FROM nowhere", "invalid: no such table: nowhere"),
        ("", "invalid: the query is empty"),
        ("-- just a comment", "invalid: the text holds no query"),
        ("SELECT randomblob(100000000)", "invalid: string or blob too big"),
    ],
)
def test_broken_predicted_query_is_wrong_with_a_reason(shop, predicted, start):
    verdict = judge(shop, predicted, "SELECT 1")
    assert not verdict.correct and verdict.error == start


def test_too_many_rows_are_cut_off(shop, monkeypatch):
    monkeypatch.setattr("datalyst.judge._sql.MAX_ROWS", 5)
    verdict = judge(shop, "SELECT * FROM customer, purchase", "SELECT 1")
    assert verdict.error == "too large: the query returned more than 5 rows"
    assert judge(shop, "SELECT * FROM purchase", "SELECT * FROM purchase").correct  # 5 rows is fine


HUGE_STRINGS = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20) SELECT {value} FROM n"


@pytest.mark.parametrize(
    "value",
    [
        "printf('%.*c', 6000000, 'x')",  # 20 rows of 6 MB strings: 120 MB
        "zeroblob(6000000)",
        "x, printf('%.*c', 3000000, 'x'), zeroblob(3000000)",
    ],
)
def test_result_larger_than_the_byte_cap_is_cut_off(shop, value):
    verdict = judge(shop, HUGE_STRINGS.format(value=value), "SELECT 1")
    assert not verdict.correct
    assert verdict.error == "too large: the query's values came to more than 100,000,000 bytes"
    assert verdict.n_predicted_rows is None


def test_byte_cap_counts_every_value_of_a_row(shop, monkeypatch):
    monkeypatch.setattr("datalyst.judge._sql.MAX_RESULT_BYTES", 1000)
    verdict = judge(shop, "SELECT printf('%.*c', 600, 'x'), printf('%.*c', 600, 'y')", "SELECT 1")
    assert verdict.error == "too large: the query's values came to more than 1,000 bytes"
    assert judge(shop, "SELECT printf('%.*c', 400, 'x'), zeroblob(400), 1, NULL", "SELECT 1").error is None


def test_endless_query_that_returns_rows_times_out_or_is_cut_off(shop):
    verdict = judge(
        shop,
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT printf('%.*c', 1000, 'x') FROM n",
        "SELECT 1",
        timeout_s=0.5,
    )
    assert not verdict.correct
    assert verdict.error.startswith(("timeout: ", "too large: ")), verdict.error


# ---------------------------------------------------------------- our own faults


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        ("SELECT nope FROM customer", "no such column"),
        ("DROP TABLE customer", "refused"),
        ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT MAX(x) FROM n", "timeout"),
    ],
)
def test_gold_query_errors_raise(shop, gold, message):
    with pytest.raises(DataFileError, match=message) as info:
        judge(shop, "SELECT 1", gold, timeout_s=0.2)
    assert "gold query" in str(info.value) and "\n" not in str(info.value)


def test_missing_database_raises(tmp_path):
    with pytest.raises(DataFileError, match="missing"):
        judge(tmp_path / "absent.sqlite", "SELECT 1", "SELECT 1")
    assert not (tmp_path / "absent.sqlite").exists()


# ---------------------------------------------------------------- extracting the query


@pytest.mark.parametrize(
    ("answer", "sql"),
    [
        ("SELECT 1", "SELECT 1"),
        ("  SELECT name\nFROM customer;\n", "SELECT name\nFROM customer"),
        ("Here it is:\n```sql\nSELECT 1;\n```\nDone.", "SELECT 1"),
        ("```SQL\nSELECT 2\n```", "SELECT 2"),
        ("```sqlite\nSELECT 3\n```", "SELECT 3"),
        ("First try:\n```sql\nSELECT 1\n```\nBetter:\n```sql\nSELECT 2\n```", "SELECT 2"),  # the last block
        ("```sql\nSELECT 1\n```\n```python\nprint(1)\n```", "SELECT 1"),  # sql blocks come first
        ("```\nSELECT 4\n```", "SELECT 4"),  # an untagged block
        ("", ""),
    ],
)
def test_extract_sql(answer, sql):
    assert extract_sql(answer) == sql


def test_extracted_query_runs(shop):
    answer = "The query:\n```sql\nSELECT name FROM customer WHERE city = 'Paris';\n```"
    assert judge(shop, extract_sql(answer), "SELECT name FROM customer WHERE id IN (1, 4)").correct


# ---------------------------------------------------------------- result tables

GOLD = pd.DataFrame({"region": ["north", "south", "east"], "total": [10.0, 2.5, 7.125]})


@pytest.mark.parametrize(
    "predicted",
    [
        GOLD,
        GOLD.rename(columns={"region": "r", "total": "SUM(amount)"}),  # names ignored
        GOLD[["total", "region"]],  # column order ignored
        GOLD.iloc[::-1].reset_index(drop=True),  # row order ignored
        GOLD.assign(extra=[1, 2, 3], rank=[3, 2, 1]),  # extra predicted columns ignored
        GOLD.assign(total=[10.009, 2.491, 7.125]),  # within 1e-2
        GOLD.assign(region=[" north", "south ", "east"]),  # spaces stripped
        pd.DataFrame({"region": ["east", "north", "south"], "total": [2.5, 7.125, 10.0]}),  # columns sorted apart
    ],
)
def test_csv_match_accepts(predicted):
    assert csv_match(predicted, GOLD)


@pytest.mark.parametrize(
    "predicted",
    [
        GOLD.assign(total=[10.011, 2.5, 7.125]),  # beyond 1e-2
        GOLD.iloc[:2],  # fewer rows
        pd.concat([GOLD, GOLD.iloc[:1]]),  # more rows
        GOLD[["region"]],  # a gold column is missing
        GOLD.assign(region=["North", "south", "east"]),  # text is exact
        GOLD.assign(total=["10.0", "2.5", "x"]),  # text where numbers are expected
    ],
)
def test_csv_match_rejects(predicted):
    assert not csv_match(predicted, GOLD)


def test_csv_match_tolerance_is_a_keyword():
    assert csv_match(GOLD.assign(total=[10.4, 2.5, 7.125]), GOLD, tolerance=0.5)
    assert not csv_match(GOLD.assign(total=[10.0001, 2.5, 7.125]), GOLD, tolerance=0.0)


def test_csv_match_missing_cells():
    gold = pd.DataFrame({"a": [1.0, None], "b": ["x", None]})
    assert csv_match(pd.DataFrame({"a": [None, 1.0], "b": [None, "x"]}), gold)
    assert not csv_match(pd.DataFrame({"a": [0.0, 1.0], "b": ["x", None]}), gold)


def test_csv_match_reads_files(tmp_path):
    gold = tmp_path / "gold.csv"
    GOLD.to_csv(gold, index=False)
    predicted = tmp_path / "result.csv"
    predicted.write_text("total,region,n\n7.13,east,1\n10,north,2\n2.5,south,3\n")
    assert csv_match(predicted, gold)
    assert csv_match(str(predicted), str(gold))
    assert not csv_match(tmp_path / "absent.csv", gold)  # the model wrote no file: wrong, not an error
    (tmp_path / "empty.csv").write_text("")
    assert not csv_match(tmp_path / "empty.csv", gold)


def test_csv_match_unreadable_gold_raises(tmp_path):
    with pytest.raises(DataFileError, match="gold result table"):
        csv_match(GOLD, tmp_path / "absent.csv")


def test_column_comparison_ignores_names_order_and_small_differences(shop):
    gold = "SELECT name, amount FROM customer JOIN purchase ON customer.id = customer_id WHERE amount > 10"
    reordered = "SELECT amount + 0.004 AS a, upper(name) AS b, name FROM customer JOIN purchase ON customer.id = customer_id WHERE amount > 10 ORDER BY a DESC"  # noqa: E501
    assert execution_match(shop, reordered, gold, compare="columns").correct
    assert not execution_match(shop, reordered, gold).correct  # as rows the two results differ
    assert not execution_match(
        shop, "SELECT name, amount FROM customer JOIN purchase ON customer.id = customer_id", gold, compare="columns"
    ).correct
