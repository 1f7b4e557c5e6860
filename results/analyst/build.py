"""Build the analyst set: plain questions about real public data files that are not DABench's, held out.

The files come from two PyPI packages (``pip install vega_datasets==0.9.0 palmerpenguins==0.1.6``): Palmer
penguins and Vega's sample datasets (car models, Seattle's weather, stock prices, Iowa's electricity, airports,
barley trials, wheat prices, Los Angeles's 1992 unrest). Each is written in the kind of file an analyst might be
handed (a JSON list of records, JSON with the records under a key, TSV, a workbook of several sheets, SQLite,
Parquet, CSV), and every gold answer is worked out here with pandas from the same table. Questions say what
form the answer takes (a name, a number) and nothing else: no column names, no method, no rounding rules.

    python results/analyst/build.py --out runs/tasks/analyst      # writes tasks.jsonl and files/
    datalyst eval run --bench tasks --bench-path runs/tasks/analyst/tasks.jsonl --model embedded:small-sft ...

The set is held out like DABench's test split: runs on it are read for their figures only.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import palmerpenguins
import pandas as pd
import vega_datasets

from datalyst.data import FileKind, write_table
from datalyst.tasks import Task, write_tasks

VEGA = Path(vega_datasets.__file__).parent / "_data"
PENGUINS = Path(palmerpenguins.__file__).parent / "data" / "penguins.csv"


def tables() -> dict[str, pd.DataFrame]:
    return {
        "penguins": pd.read_csv(PENGUINS),
        "cars": pd.read_json(VEGA / "cars.json"),
        "weather": pd.read_csv(VEGA / "seattle-weather.csv"),
        "stocks": pd.read_csv(VEGA / "stocks.csv"),
        "electricity": pd.read_csv(VEGA / "iowa-electricity.csv"),
        "airports": pd.read_csv(VEGA / "airports.csv", keep_default_na=False, na_values=[""]),
        "barley": pd.read_json(VEGA / "barley.json"),
        "wheat": pd.read_json(VEGA / "wheat.json", dtype={"year": int}),
        "riots": pd.read_csv(VEGA / "la-riots.csv"),
    }


def write_files(t: dict[str, pd.DataFrame], folder: Path) -> dict[str, Path]:
    """Each table as the file an analyst might get; returns the file of each table."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "penguins": write_table(t["penguins"], folder / "penguins.json", FileKind.JSON),
        "weather": write_table(t["weather"], folder / "seattle_weather.tsv", FileKind.TSV),
        "electricity": write_table(t["electricity"], folder / "iowa_power.sqlite", FileKind.SQLITE, table="generation"),
        "airports": write_table(t["airports"], folder / "airports.parquet", FileKind.PARQUET),
        "barley": write_table(t["barley"], folder / "barley.json", FileKind.JSON),
        "riots": write_table(t["riots"], folder / "la_riots_deaths.csv", FileKind.CSV),
        "wheat": write_table(t["wheat"], folder / "wheat_prices.xlsx", FileKind.XLSX, table="prices"),
    }
    cars = json.loads(t["cars"].to_json(orient="records", date_format="iso"))
    files["cars"] = folder / "cars.json"
    files["cars"].write_text(json.dumps({"source": "Vega sample data", "count": len(cars), "cars": cars}, indent=1))
    files["stocks"] = folder / "stock_prices.xlsx"
    with pd.ExcelWriter(files["stocks"], engine="openpyxl") as workbook:  # one sheet per company
        for symbol, rows in t["stocks"].groupby("symbol", sort=False):
            rows.drop(columns="symbol").to_excel(workbook, sheet_name=str(symbol), index=False)
    return files


Question = tuple[str, str, Callable[[dict[str, pd.DataFrame]], object]]
"""(table, question, gold answer from the tables)."""

# fmt: off
QUESTIONS: list[Question] = [
    ("penguins", "How many penguins were recorded on Biscoe island?",
     lambda t: int((t["penguins"].island == "Biscoe").sum())),
    ("penguins", "Which penguin species is the heaviest on average? Answer with the species name only.",
     lambda t: t["penguins"].groupby("species").body_mass_g.mean().idxmax()),
    ("penguins", "What is the average flipper length of Adelie penguins, in millimetres?",
     lambda t: round(t["penguins"].query("species == 'Adelie'").flipper_length_mm.mean(), 2)),
    ("penguins", "How many penguins have no recorded sex?",
     lambda t: int(t["penguins"].sex.isna().sum())),
    ("cars", "What is the average horsepower of the cars made in Japan?",
     lambda t: round(t["cars"].query("Origin == 'Japan'").Horsepower.mean(), 2)),
    ("cars", "How many of the cars have 8 cylinders?",
     lambda t: int((t["cars"].Cylinders == 8).sum())),
    ("cars", "Which region of origin has the highest median fuel economy? Answer with the region only.",
     lambda t: t["cars"].groupby("Origin").Miles_per_Gallon.median().idxmax()),
    ("weather", "What kind of weather was most common in Seattle? Answer with the weather type only.",
     lambda t: t["weather"].weather.value_counts().idxmax()),
    ("weather", "In which year did Seattle get the most precipitation in total?",
     lambda t: int(t["weather"].assign(y=t["weather"].date.str[:4]).groupby("y").precipitation.sum().idxmax())),
    ("weather", "What was the highest daily maximum temperature recorded, in degrees Celsius?",
     lambda t: float(t["weather"].temp_max.max())),
    ("stocks", "Which company's stock had the highest average price? Answer with its ticker symbol only.",
     lambda t: t["stocks"].groupby("symbol").price.mean().idxmax()),
    ("stocks", "What was the highest price Apple's stock (AAPL) reached?",
     lambda t: float(t["stocks"].query("symbol == 'AAPL'").price.max())),
    ("electricity", "In which year did renewable sources generate the most electricity in Iowa?",
     lambda t: int(t["electricity"].query("source == 'Renewables'").set_index("year").net_generation.idxmax()[:4])),
    ("electricity", "What percentage of all the electricity generated over these years came from fossil fuels?",
     lambda t: round(100 * t["electricity"].query("source == 'Fossil Fuels'").net_generation.sum()
                     / t["electricity"].net_generation.sum(), 2)),
    ("airports", "Which state has the most airports? Answer with the state's two-letter code only.",
     lambda t: t["airports"].state.value_counts().idxmax()),
    ("airports", "How many airports are there in California?",
     lambda t: int((t["airports"].state == "CA").sum())),
    ("barley", "Which site had the highest total barley yield in 1932? Answer with the site name only.",
     lambda t: t["barley"].query("year == 1932").groupby("site")["yield"].sum().idxmax()),
    ("barley", "What was the average yield of the Manchuria variety over both years?",
     lambda t: round(t["barley"].query("variety == 'Manchuria'")["yield"].mean(), 2)),
    ("wheat", "In which year was the price of wheat the highest?",
     lambda t: int(t["wheat"].set_index("year").wheat.idxmax())),
    ("riots", "How many of the people who died were women?",
     lambda t: int((t["riots"].gender == "Female").sum())),
    ("riots", "What was the median age of those who died?",
     lambda t: float(t["riots"].age.median())),
    ("riots", "How many of the deaths were officer-involved shootings?",
     lambda t: int((t["riots"].type == "Officer-involved shooting").sum())),
]
# fmt: on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/tasks/analyst"))
    args = parser.parse_args()
    t = tables()
    files = write_files(t, args.out / "files")
    tasks = []
    for number, (table, question, gold) in enumerate(QUESTIONS):
        answer = gold(t)
        answer = answer.item() if hasattr(answer, "item") else answer
        tasks.append(Task(id=f"analyst-{number:02d}", question=question, files=[str(files[table].resolve())],
                          answer=answer, category=table, source="analyst"))  # fmt: skip
    write_tasks(tasks, args.out / "tasks.jsonl")
    for task in tasks:
        print(f"{task.id}  {Path(task.files[0]).name:22} {task.answer!r:24} {task.question}")


if __name__ == "__main__":
    main()
