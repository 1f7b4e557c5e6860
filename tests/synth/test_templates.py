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
from datalyst.tasks import Lineage, extract_answers


def sales(rows: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "product": [f"item {i:02d}" for i in range(rows)],
            "region": rng.choice(["north", "south", "east", "west"], rows),
            "channel": rng.choice(["online", "store"], rows),
            "units": rng.integers(1, 400, rows),
            "price": rng.uniform(2, 90, rows).round(2),
            "rating": rng.normal(3.5, 0.8, rows).round(1),
            "year": rng.integers(2015, 2021, rows),
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


CHARTED = {
    "ranking.top_group_chart": "ranking.top_group",
    "correlation.pearson_chart": "correlation.pearson",
    "distribution.histogram_chart": "descriptive.quartiles",
}
"""Chart requests and the templates whose questions they ask with a chart."""


def expected(name: str, df: pd.DataFrame, p: dict) -> dict[str, object]:
    """The answer of template ``name`` with parameters ``p``, computed here without the solution's code."""
    name = CHARTED.get(name, name)
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
    if name == "descriptive.quartiles":
        q1, q3 = np.percentile(df[p["number"]].dropna(), [25, 75])
        return {"q1": q1, "q3": q3, "iqr": q3 - q1}
    if name == "descriptive.incomplete_rows":
        rows = [row for row in df.itertuples(index=False) if any(pd.isna(value) for value in row)]
        complete = [column for column in df.columns if not any(pd.isna(value) for value in df[column])]
        return {"incomplete_rows": len(rows), "complete_columns": len(complete)}
    if name in ("time.top_year", "time.yearly_growth"):
        totals: dict[int, float] = {}
        for year, value in zip(df[p["date"]], df[p["number"]], strict=True):
            totals[year] = totals.get(year, 0) + (0 if pd.isna(value) else value)
        if name == "time.top_year":
            best = max(totals, key=totals.get)
            return {"year": best, "total": totals[best]}
        first, last = totals[min(totals)], totals[max(totals)]
        return {"percent_change": 100 * (last - first) / first}
    if name == "facts.same_leader":
        leaders = []
        for number in (p["first"], p["second"]):
            means = {value: df[df[p["category"]] == value][number].mean() for value in df[p["category"]].unique()}
            leaders.append(max(means, key=means.get))
        return {"leader_first": leaders[0], "leader_second": leaders[1], "claim": str(leaders[0] == leaders[1]).lower()}
    if name == "causal.adjusted_slope":
        data = df[[p["x"], p["y"], p["z"]]].dropna()
        design = np.column_stack([np.ones(len(data)), data[p["x"]], data[p["z"]]])
        adjusted = np.linalg.solve(design.T @ design, design.T @ data[p["y"]].to_numpy())[1]
        return {"raw_slope": stats.linregress(data[p["x"]], data[p["y"]]).slope, "adjusted_slope": adjusted}
    if name == "preprocessing.clean_then_summarise":
        unique_rows = {tuple("nan" if pd.isna(v) else v for v in row) for row in df.itertuples(index=False)}
        values = df[p["number"]].to_numpy(dtype=float)
        values = np.where(np.isnan(values), np.nanmedian(values), values)
        z = (values - values.mean()) / values.std(ddof=1)
        return {"rows": len(unique_rows), "above_one": int((z > 1).sum())}
    if name == "distribution.normality":
        w, pvalue = stats.shapiro(df[p["number"]].dropna())
        return {"w_statistic": w, "p_value": pvalue, "normal": "yes" if pvalue >= 0.05 else "no"}
    if name == "statistics.chi_square":
        return chi_square(df, p["first"], p["second"])
    if name == "anomaly.iqr":
        values = df[p["number"]].dropna().to_numpy()
        q1, q3 = np.percentile(values, [25, 75])
        low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        return {"lower_fence": low, "upper_fence": high, "outliers": int(((values < low) | (values > high)).sum())}
    if name == "correlation.pearson_test":
        x, y = df[[p["x"], p["y"]]].dropna().to_numpy().T
        r = np.corrcoef(x, y)[0, 1]
        t = r * np.sqrt((len(x) - 2) / (1 - r**2))
        pvalue = 2 * stats.t.sf(abs(t), len(x) - 2)
        return {"correlation": r, "p_value": pvalue, "significant": "yes" if pvalue < 0.05 else "no"}
    if name == "impact.regression":
        return split_regression(df[[p["x"], p["z"], p["y"]]].dropna().to_numpy())
    if name == "multihop.chain":
        return run_chain(df, p["steps"])
    raise AssertionError(f"no independent computation for {name}; add one")


def chi_square(df: pd.DataFrame, first: str, second: str) -> dict[str, object]:
    """Pearson's chi-square test of independence, from the counts of each pair of values."""
    pairs = [(a, b) for a, b in zip(df[first], df[second], strict=True) if not (pd.isna(a) or pd.isna(b))]
    rows, columns = sorted({a for a, _ in pairs}), sorted({b for _, b in pairs})
    observed = np.array([[sum(pair == (a, b) for pair in pairs) for b in columns] for a in rows], dtype=float)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    statistic = ((observed - expected) ** 2 / expected).sum()
    pvalue = stats.chi2.sf(statistic, (len(rows) - 1) * (len(columns) - 1))
    return {"chi_square": statistic, "p_value": pvalue, "independent": "yes" if pvalue >= 0.05 else "no"}


def split_regression(data: np.ndarray) -> dict[str, object]:
    """Least squares of the last column on the others, fitted on 80% of the rows and scored on the rest.

    The rows are split as scikit-learn's ``train_test_split(test_size=0.2, random_state=42)`` splits them:
    a permutation from NumPy's legacy generator, whose first ceil(20%) rows are the test rows.
    """
    order = np.random.RandomState(42).permutation(len(data))
    test_rows = int(np.ceil(0.2 * len(data)))
    test, train = data[order[:test_rows]], data[order[test_rows:]]
    design = np.column_stack([np.ones(len(train)), train[:, :-1]])
    weights = np.linalg.lstsq(design, train[:, -1], rcond=None)[0]
    predicted = np.column_stack([np.ones(len(test)), test[:, :-1]]) @ weights
    residual = ((test[:, -1] - predicted) ** 2).sum()
    total = ((test[:, -1] - test[:, -1].mean()) ** 2).sum()
    return {"coefficient": weights[1], "r_squared": 1 - residual / total, "rmse": np.sqrt(residual / len(test))}


def run_chain(df: pd.DataFrame, steps: list[tuple]) -> dict[str, object]:
    """A composed question's answers, by carrying out its recorded steps one by one."""
    df, found, label, value, grouped = df.copy(), {}, None, None, None
    for index, (op, *args) in enumerate(steps):
        if op == "keep":
            df = df[[str(v) == args[1] for v in df[args[0]]]]
        elif op == "above":
            df = df[df[args[0]] > args[1]]
        elif op == "derive":
            df[args[0]] = [a / b if b else np.nan for a, b in zip(df[args[1]], df[args[2]], strict=True)]
        elif op == "rank":
            grouped = args[0]
            means = {g: np.nanmean(df[df[grouped] == g][args[1]]) for g in df[grouped].unique()}
            means = {g: m for g, m in means.items() if not np.isnan(m)}
            label = (max if args[2] == "highest" else min)(means, key=means.get)
            found[f"{args[2]}_{grouped}"] = label
        elif op == "select":
            df = df[df[grouped] == label]
        elif op == "aggregate":
            value = {"mean": np.nanmean, "median": np.nanmedian, "sum": np.nansum}[args[1]](df[args[0]].to_numpy(float))
            if index == len(steps) - 1:
                found[f"{args[1]}_{args[0]}"] = value
        elif op == "above_result":
            df = df[df[args[0]] > value]
        elif op == "count":
            found["rows"] = len(df)
        elif op == "correlate":
            found["correlation"] = stats.pearsonr(*df[list(args)].dropna().to_numpy().T).statistic
    return found


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
    for draft in [parent for composed in made for parent in composed.parents] + made:
        result = box.run_python(load_code(record) + draft.code)
        assert result.ok, result.render()
        assert draft.figure == (name in CHARTED) == any(file.endswith(".png") for file in result.files_created)
        answer = extract_answers(result.stdout)
        assert all(spec.well_formed(answer[spec.name]) for spec in draft.answers), answer
        truth = expected(name, df, draft.params)
        assert set(answer) == set(truth)
        for key, value in truth.items():
            printed = answer[key]
            if isinstance(value, str):
                assert printed == value
            else:
                decimals = len(printed.partition(".")[2])
                assert float(printed) == pytest.approx(round(float(value), decimals), abs=10**-decimals), key


def test_a_composed_question_extends_the_questions_it_is_built_on(table):
    record, _ = table
    composed = [d for seed in range(30) if (d := TEMPLATES["multihop.chain"][1](roles(record), random.Random(seed)))]
    assert {d.level for d in composed} == {"easy", "medium", "hard"}
    assert any(d.parents for d in composed)
    for draft in composed:
        hops = len(draft.params["steps"])
        assert 2 <= hops <= 5 and draft.level == ("easy" if hops <= 2 else "medium" if hops == 3 else "hard")
        assert 1 <= len(draft.answers) <= 5
        for parent in draft.parents:  # the composed question goes on from where a parent's answer was asked
            steps = parent.params["steps"]
            assert 2 <= len(steps) < hops and draft.params["steps"][: len(steps)] == steps
            assert draft.code.startswith(parent.code) and parent.question.endswith("?")
            assert draft.question.startswith(parent.question.rpartition(". ")[0])


@pytest.mark.parametrize("name", sorted(CHARTED))
def test_a_chart_request_asks_the_same_answers_with_a_chart(table, name):
    record, _ = table
    for seed in range(4):
        chart, plain = (TEMPLATES[n][1](roles(record), random.Random(seed)) for n in (name, CHARTED[name]))
        assert chart.figure and not plain.figure and chart.answers == plain.answers and chart.params == plain.params
        assert chart.code.endswith(plain.code) and chart.question != plain.question
        assert any(word in chart.question for word in ("chart", "plot", "Plot", "histogram"))
        task = chart.task("t", "sales.csv", {}, chart.code, "test", Lineage(generator=name, version=1, seed=0))
        assert task.figure
