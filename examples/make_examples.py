"""Regenerate the example data files: sales.csv and shop.sqlite (seeded, deterministic).

Run from anywhere: ``python examples/make_examples.py``. The data is invented.
"""

from __future__ import annotations

import csv
import datetime as dt
import random
import sqlite3
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20240601

REGIONS = ["North", "South", "East", "West"]
PRODUCTS = {"Widget": 4.50, "Gadget": 12.00, "Gizmo": 7.25, "Doohickey": 19.90}
FIRST = [
    "Ada",
    "Bruno",
    "Chloe",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Luis",
]
LAST = ["Arden", "Brook", "Castell", "Dunmore", "Ellery", "Fenwick", "Garrow", "Holm"]
CITIES = ["Lyon", "Porto", "Gdansk", "Tampere", "Graz", "Ghent"]
STATUSES = ["shipped", "shipped", "shipped", "delivered", "delivered", "cancelled", "pending"]


def make_sales(path: Path, rng: random.Random) -> None:
    """60 daily-ish sales rows; two cells are left empty on purpose."""
    day = dt.date(2024, 1, 2)
    rows = []
    for i in range(60):
        product = rng.choice(list(PRODUCTS))
        units = rng.randint(1, 40)
        price = round(PRODUCTS[product] * rng.uniform(0.9, 1.1), 2)
        region = rng.choice(REGIONS)
        revenue = round(units * price, 2)
        if i == 17:
            region = ""  # a missing region
        if i == 42:
            units, revenue = "", ""  # a missing quantity (so no revenue either)
        rows.append([day.isoformat(), region, product, units, price, revenue])
        day += dt.timedelta(days=rng.choice([1, 2, 3, 4]))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["date", "region", "product", "units", "unit_price", "revenue"])
        writer.writerows(rows)


def make_shop(path: Path, rng: random.Random) -> None:
    """customers (25 rows) and orders (50 rows, foreign key to customers)."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.executescript(
            """
            CREATE TABLE customers (
                customer_id INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                city TEXT,
                signup_date TEXT
            );
            CREATE TABLE orders (
                order_id INTEGER PRIMARY KEY,
                customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
                order_date TEXT NOT NULL,
                status TEXT NOT NULL,
                total REAL
            );
            """
        )
        customers = []
        for cid in range(1, 26):
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            city = None if cid == 9 else rng.choice(CITIES)
            signup = dt.date(2023, 1, 1) + dt.timedelta(days=rng.randint(0, 364))
            customers.append((cid, name, city, signup.isoformat()))
        con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", customers)
        orders = []
        for oid in range(1001, 1051):
            cid = rng.randint(1, 25)
            when = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 180))
            total = round(rng.uniform(5, 250), 2)
            orders.append((oid, cid, when.isoformat(), rng.choice(STATUSES), total))
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", orders)
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()


def main() -> None:
    rng = random.Random(SEED)
    make_sales(HERE / "sales.csv", rng)
    make_shop(HERE / "shop.sqlite", rng)


if __name__ == "__main__":
    main()
