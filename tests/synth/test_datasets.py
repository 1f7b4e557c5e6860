"""Datasets with a hidden trap: the detector tells them from clean data, the verified answer is what pandas
gives when the trap is handled and differs from what ignoring it gives, and a model can write them."""

from __future__ import annotations

import asyncio
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from datalyst.llm import ReplayModel
from datalyst.synth import DOMAINS, FAMILIES, DatasetOptions, make_dataset_tasks
from datalyst.synth._challenges import _base
from datalyst.synth._datasets import DatasetUnit, _unit_tasks
from datalyst.tasks import read_tasks

FAMILY = {family.name: family for family in FAMILIES}


def clean(name: str, rng: np.random.Generator, domain, rows: int) -> pd.DataFrame:
    """Data of the family's shape without its trap."""
    frame = _base(rng, domain, rows)
    if name == "mixed_units":
        frame["unit"] = domain.unit
    if name == "confounded_correlation":
        frame["incidents"] = rng.poisson(10, rows)
    if name == "simpsons_paradox":
        frame = FAMILY[name].generate(rng, domain, rows)
        frame["option"] = rng.choice(["A", "B"], rows)  # no longer tied to severity
    return frame


def handled_and_naive(name: str, df: pd.DataFrame, domain) -> tuple[dict, dict]:
    """The answer with the trap handled, computed here, and the answer a careless analysis gives."""
    m, g = domain.measure, domain.group
    if name == "sentinel":
        real = df[m][df[m] != -999]
        return {"mean": real.mean(), "missing": (df[m] == -999).sum()}, {"mean": df[m].mean()}
    if name == "outliers":
        q1, q3 = np.percentile(df[m], [25, 75])
        inside = df[m][(df[m] >= q1 - 1.5 * (q3 - q1)) & (df[m] <= q3 + 1.5 * (q3 - q1))]
        return {"outliers": len(df) - len(inside), "robust_mean": inside.mean()}, {"robust_mean": df[m].mean()}
    if name == "duplicates":
        rows = {tuple(row) for row in df.itertuples(index=False)}
        return {"records": len(rows), "total": sum(row[df.columns.get_loc(m)] for row in rows)}, {"records": len(df)}
    if name == "mixed_units":
        values = [v if unit == domain.unit else v / 1000 for v, unit in zip(df[m], df["unit"], strict=True)]
        return {"mean": np.mean(values)}, {"mean": df[m].mean()}
    if name == "weekly_pattern":
        means = df.groupby(pd.to_datetime(df["date"]).dt.day_name())[m].mean()
        return {"busiest_day": means.idxmax(), "ratio": means.max() / means.min()}, {"ratio": 1.0}
    if name == "structural_break":
        monthly = [df[pd.to_datetime(df["date"]).dt.month == month][m].mean() for month in range(1, 13)]
        jumps = np.diff(monthly)
        return {"break_month": int(np.argmax(jumps)) + 2, "jump": jumps.max()}, {"break_month": 1}
    if name == "simpsons_paradox":
        overall = df.groupby("option")["success"].mean().idxmax()
        within = {df[df.severity == s].groupby("option")["success"].mean().idxmax() for s in ("mild", "severe")}
        return {"better_overall": overall, "better_within": within.pop()}, {"better_within": overall}
    if name == "heavy_tails":
        values = np.sort(df[m].to_numpy())[::-1]
        top = values[: int(len(values) * 0.1)].sum() / values.sum()
        return {"median": np.median(values), "top_share": 100 * top}, {"median": values.mean()}
    if name == "mislabelled_category":
        names = [str(v).strip().title() for v in df[g]]
        totals = df[m].groupby(names).sum()
        return {"groups": len(set(names)), "top_group": totals.idxmax()}, {"groups": df[g].nunique()}
    if name == "confounded_correlation":
        x, y, z = df[m], df["incidents"], df[domain.driver]
        rx = x - np.polyval(np.polyfit(z, x, 1), z)
        ry = y - np.polyval(np.polyfit(z, y, 1), z)
        return {"correlation": x.corr(y), "partial_correlation": np.corrcoef(rx, ry)[0, 1]}, {
            "partial_correlation": x.corr(y)
        }
    raise AssertionError(f"no check for the family {name}; add one")


def same(printed: str, value: object) -> bool:
    if isinstance(value, str):
        return printed == value
    decimals = len(printed.partition(".")[2])
    return abs(float(printed) - round(float(value), decimals)) <= 10**-decimals


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_the_detector_tells_the_trap_from_clean_data(name):
    family = FAMILY[name]
    for seed, domain in enumerate(DOMAINS):
        rng = np.random.default_rng(seed)
        assert family.detect(family.generate(rng, domain, 400), domain), (name, domain.name)
        assert not family.detect(clean(name, np.random.default_rng(seed), domain, 400), domain), (name, domain.name)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("datasets") / "tasks.jsonl"
    summary = make_dataset_tasks(out, options=DatasetOptions(per_family=2, seed=4), progress=False)
    return summary, read_tasks(out)


def test_every_family_gives_tasks_whose_answer_needs_the_trap_handled(made):
    summary, tasks = made
    assert summary.units == 2 * len(FAMILIES) and {t.lineage.generator for t in tasks} == {
        f"dataset.{name}" for name in FAMILY
    }
    domains = {domain.name: domain for domain in DOMAINS}
    for task in tasks:
        name = task.lineage.generator.removeprefix("dataset.")
        domain = domains[task.files[0].rsplit("-", 1)[1].removesuffix(".csv")]
        handled, naive = handled_and_naive(name, pd.read_csv(task.files[0]), domain)
        for key, value in handled.items():
            assert same(task.answer[key], value), (task.id, key, task.answer[key], value)
        assert any(not same(task.answer[key], value) for key, value in naive.items()), (task.id, naive)


def test_a_rerun_changes_nothing(made, tmp_path):
    out = tmp_path / "again.jsonl"
    make_dataset_tasks(out, options=DatasetOptions(per_family=2, seed=4), progress=False)
    assert [t.answer for t in read_tasks(out)] == [t.answer for t in made[1]]


GOOD = """```python
import numpy as np, pandas as pd
rng = np.random.default_rng(1)
n = {rows}
day = pd.Timestamp('2023-01-01') + pd.to_timedelta(rng.integers(0, 365, n), unit='D')
driver = rng.uniform(0.5, 1.5, n)
df = pd.DataFrame({{'id': np.arange(1, n + 1), 'date': day, '{group}': rng.choice({groups}, n),
                   '{driver}': (driver * 100).round(1), '{measure}': (100 * driver).round(2)}})
df.loc[rng.random(n) < 0.1, '{measure}'] = -999
df.to_csv('data.csv', index=False)
```"""


def test_a_model_writes_the_generator_and_gets_reasons_back(tmp_path):
    family = FAMILY["sentinel"]
    rng = np.random.default_rng([0, FAMILIES.index(family), 0])  # as the stage draws the unit's domain and size
    domain = DOMAINS[int(rng.integers(len(DOMAINS)))]
    rows = int(rng.integers(200, 601))
    script = GOOD.format(rows=rows, group=domain.group, groups=list(domain.groups), driver=domain.driver,
                         measure=domain.measure)  # fmt: skip
    without_trap = "\n".join(line for line in script.splitlines() if "-999" not in line)
    writer = ReplayModel(["```python\nthis is not python\n```", without_trap, script])
    unit = DatasetUnit(family, 0)
    tasks, rejected = asyncio.run(_unit_tasks(unit, DatasetOptions(), tmp_path, writer, True))
    assert rejected == Counter({"script_failed": 1, "challenge_absent": 1})
    assert len(tasks) == 1 and int(tasks[0].answer["missing"]) > 0
    feedback = [messages[-1].content for messages, _ in writer.calls[1:]]
    assert "The script failed" in feedback[0] and "not detectable" in feedback[1]
    assert domain.measure in writer.calls[0][0][-1].content and "-999" in writer.calls[0][0][-1].content
