"""Every template's canonical solution, run in the sandbox, gives what an independent pandas computation gives."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from datalyst.sandbox import Sandbox
from datalyst.synth import FileOptions, collect_files, read_source_files
from datalyst.synth._roles import load_code, roles
from datalyst.synth._templates import TEMPLATES, Draft
from datalyst.synth._verify import verify


def sales(rows: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "product": [f"item {i:02d}" for i in range(rows)],
            "region": rng.choice(["north", "south", "east", "west"], rows),
            "units": rng.integers(1, 400, rows),
            "price": rng.uniform(2, 90, rows).round(2),
            "rating": rng.normal(3.5, 0.8, rows).round(1),
        }
    )
    frame.loc[[3, 17, 40], "rating"] = np.nan
    return frame


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    sales().to_csv(folder / "sales.csv", index=False)
    out = folder / "files.jsonl"
    collect_files([folder / "sales.csv"], out, options=FileOptions(convert_share=0), progress=False)
    [record] = read_source_files(out)
    with Sandbox(files=[record.path]) as box:
        yield record, box


def by_group(df: pd.DataFrame, p: dict) -> pd.Series:
    return df[df[p["category"]].astype(str) == p["value"]][p["number"]]


def mean_of(df: pd.DataFrame, p: dict, value: str) -> float:
    return df[df[p["category"]] == value][p["number"]].mean()


def expected(name: str, df: pd.DataFrame, p: dict) -> dict[str, object]:
    """The answer of template ``name`` with parameters ``p``, computed here without the solution's code."""
    if name == "aggregation.group_statistic":
        return {f"{p['stat']}_{p['number']}": getattr(by_group(df, p), p["stat"])()}
    if name == "ranking.top_group":
        means = {value: mean_of(df, p, value) for value in df[p["category"]].unique()}
        pick = max if p["highest"] else min
        return {f"{'highest' if p['highest'] else 'lowest'}_{p['category']}": pick(means, key=means.get)}
    if name == "ranking.nth_label":
        ordered = sorted(zip(df[p["number"]], range(len(df)), df[p["label"]], strict=True), key=lambda t: (-t[0], t[1]))
        return {f"rank_{p['place']}_{p['label']}": ordered[p["place"] - 1][2]}
    if name == "counting.above_threshold":
        return {
            f"count_above_{str(p['threshold']).replace('.', '_')}": sum(v > p["threshold"] for v in df[p["number"]])
        }
    if name == "comparison.group_gap":
        return {"difference": mean_of(df, p, p["first"]) - mean_of(df, p, p["second"])}
    if name == "statistics.welch_t_test":
        a = df[df[p["category"]] == p["first"]][p["number"]].dropna()
        b = df[df[p["category"]] == p["second"]][p["number"]].dropna()
        t, pvalue = stats.ttest_ind(a, b, equal_var=False)
        return {"t_statistic": t, "p_value": pvalue, "significant": "yes" if pvalue < 0.05 else "no"}
    if name == "correlation.pearson":
        r = stats.pearsonr(*df[[p["x"], p["y"]]].dropna().to_numpy().T).statistic
        return {"correlation": r, "strength": "strong" if abs(r) >= 0.7 else "moderate" if abs(r) >= 0.3 else "weak"}
    if name == "arithmetic.group_share":
        return {"percentage": 100 * by_group(df, p).sum() / df[p["number"]].sum()}
    if name == "anomaly.z_score":
        values = df[p["number"]].dropna()
        return {"outliers": int((abs(stats.zscore(values, ddof=1)) > p["limit"]).sum())}
    if name == "distribution.shape":
        values = df[p["number"]].dropna()
        return {"skewness": stats.skew(values, bias=False), "kurtosis": stats.kurtosis(values, bias=False)}
    if name == "features.ratio_column":
        ratios = [a / b for a, b in zip(df[p["top"]], df[p["bottom"]], strict=True) if b and not np.isnan(a / b)]
        return {"median_ratio": float(np.median(ratios))}
    if name == "impact.slope":
        pair = df[[p["x"], p["y"]]].dropna()
        return {"slope": stats.linregress(pair[p["x"]], pair[p["y"]]).slope}
    raise AssertionError(f"no independent computation for {name}; add one")


def drafts(record, name: str) -> list[Draft]:
    make = TEMPLATES[name][1]
    found = [make(roles(record), random.Random(seed)) for seed in range(4)]
    return [draft for draft in found if draft is not None]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_solution_prints_what_pandas_computes(table, name):
    record, box = table
    made = drafts(record, name)
    assert made, f"{name} made no draft for a table with numbers, categories and labels"
    df = sales()
    for draft in made:
        verdict = verify(draft, load_code(record) + draft.code, box, prompt="")
        assert verdict.answer is not None, verdict
        truth = expected(name, df, draft.params)
        assert set(verdict.answer) == set(truth)
        for key, value in truth.items():
            printed = verdict.answer[key]
            if isinstance(value, str):
                assert printed == value
            else:
                decimals = len(printed.partition(".")[2])
                assert float(printed) == pytest.approx(round(float(value), decimals), abs=10**-decimals), key
