"""Session mode and replay mode give the same observations for the same cells (DABench tables)."""

from __future__ import annotations

import pytest

from datalyst.sandbox import ExecResult, Limits, Sandbox

TRAJECTORIES = {
    "titanic.csv": [
        "import pandas as pd\ndf = pd.read_csv('titanic.csv')\ndf.shape",
        "survival = df.groupby('Pclass')['Survived'].mean()\nsurvival.round(3)",
        # a multi-line call and a print inside a loop: line-based rewriting would break both
        "for cls, rate in survival.items():\n    print(\n        f'class {cls}: {rate:.1%}',\n    )",
        "def fare_band(fare):\n    if fare < 10:\n        return 'low'\n    return 'high'\n",
        "df['band'] = df['Fare'].apply(fare_band)\ndf['band'].value_counts()",
        "df['NoSuchColumn'].mean()",  # fails: not part of the state
        "class Summary:\n    def __init__(self, frame):\n        self.n = len(frame)\n\nSummary(df).n",
        "import matplotlib.pyplot as plt\ndf['Age'].plot(kind='hist')\nprint(df['Age'].isna().sum())",
    ],
    "abalone.csv": [
        "import pandas as pd\nab = pd.read_csv('abalone.csv')\nab.columns.tolist()",
        "ab = ab.rename(columns=str.strip)\nnum = ab.select_dtypes('number')\nprint(num.shape)",
        "corr = num.corr().round(2)\ncorr.iloc[:3, :3]",
        "partial = 1\npartial = partial + 1\nraise ValueError(f'partial={partial}')",  # partial effects are kept
        "print(partial)\nab.describe().loc[['mean', 'std']].round(3)",
        "top = ab.sort_values(ab.columns[-1], ascending=False).head(3)\ntop.to_csv('top.csv', index=False)",
        "import os\nprint(sorted(f for f in os.listdir('.') if f.endswith('.csv')))",
    ],
    "insurance.csv": [
        "import pandas as pd\nins = pd.read_csv('insurance.csv')\nins.dtypes",
        "pivot = ins.pivot_table(index='region', columns='smoker', values='charges', aggfunc='mean')\npivot.round(1)",
        "ratio = (pivot['yes'] / pivot['no']).sort_values()\nprint(ratio.round(2).to_string())",
        "ins['bmi_class'] = pd.cut(ins['bmi'], [0, 18.5, 25, 30, 100])\nins['bmi_class'].value_counts().sort_index()",
        "mystery_variable",
        "ins.groupby('bmi_class', observed=True)['charges'].median().round(0)",
    ],
}


def _observation(result: ExecResult) -> tuple:
    error = result.error.model_dump() if result.error else None
    return (result.stdout, result.stderr, error, result.files_created, result.state_lost, result.truncated)


def _run(table, cells: list[str], mode: str) -> list[tuple]:
    with Sandbox(files=[table], mode=mode, limits=Limits(wall_s=60, cpu_s=60)) as sb:
        return [_observation(sb.run_python(code)) for code in cells]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRAJECTORIES))
def test_session_and_replay_observe_the_same(dabench_tables, name):
    cells = TRAJECTORIES[name]
    session = _run(dabench_tables / name, cells, "session")
    replay = _run(dabench_tables / name, cells, "replay")
    for index, (a, b) in enumerate(zip(session, replay, strict=True), start=1):
        assert a == b, f"cell {index} differs"
    failing = [i for i, obs in enumerate(session, start=1) if obs[2] is not None]
    assert failing, "each trajectory includes a failing cell"
    assert all(obs[2] is None for i, obs in enumerate(session, start=1) if i not in failing)
