"""Session mode and replay mode give the same observations for the same cells (DABench tables)."""

from __future__ import annotations

import sqlite3

import pytest

from datalyst.sandbox import AutoInstaller, ExecResult, Limits, Sandbox

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
# Cells that change the work folder: replayed in the same folder, each would meet its own earlier effects.
FILE_CELLS = [
    "import os, json\nimport pandas as pd\nos.mkdir('out')\nsorted(os.listdir('.'))",
    "with open('log.txt', 'a') as f:\n    f.write('step 2\\n')\nprint(open('log.txt').read(), end='')",
    "with open('log.txt', 'a') as f:\n    f.write('step 3\\n')\nopen('log.txt').read().splitlines()",
    "df = pd.read_csv('abalone.csv')\ndf.head(20).to_csv('out/head.csv', index=False)\n"
    "len(pd.read_csv('out/head.csv'))",
    "open('scratch.txt', 'w').write('temporary')\nos.remove('scratch.txt')\nos.path.exists('scratch.txt')",
    "os.remove('out/head.csv')\nos.listdir('out')",
    "os.mkdir('out')",  # fails in a session too: the folder exists
    "json.dump({'rows': len(df)}, open('state.json', 'w'))\nprint(json.load(open('state.json')))",
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('plotted')",
    "n = len(open('log.txt').readlines())\nprint(n, sorted(os.listdir('.')), sorted(os.listdir('out')))",
    "os.rename('log.txt', 'out/log.txt')\nprint(open('out/log.txt').read().count('step'))",
]


def _observation(result: ExecResult) -> tuple:
    error = result.error.model_dump() if result.error else None
    return (
        result.stdout,
        result.stderr,
        error,
        result.files_created,
        result.state_lost,
        result.truncated,
        result.replay_mismatch,
    )


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


@pytest.mark.slow
def test_cells_that_change_files_observe_the_same_in_both_modes(dabench_tables):
    session = _run(dabench_tables / "abalone.csv", FILE_CELLS, "session")
    replay = _run(dabench_tables / "abalone.csv", FILE_CELLS, "replay")
    for index, (a, b) in enumerate(zip(session, replay, strict=True), start=1):
        assert a == b, f"cell {index} differs"
    errors = [obs[2]["ename"] if obs[2] else None for obs in session]
    assert errors == [None] * 6 + ["FileExistsError"] + [None] * 4
    assert session[9][0].startswith("2 ['abalone.csv', 'cell-9-figure-1.png', 'log.txt', 'out', 'state.json'] []")


@pytest.mark.parametrize(
    ("cells", "errors"),
    [
        (  # files written before a lost worker stay, as in a session; the history starts again from them
            [
                "import os\nos.mkdir('kept')\nopen('kept/a.txt', 'w').write('a')",
                "import time\ntime.sleep(60)",
                "import os\nwith open('kept/a.txt', 'a') as f:\n    f.write('b')\nprint(open('kept/a.txt').read())",
                "os.mkdir('new')\nprint(sorted(os.listdir('.')), open('kept/a.txt').read())",
            ],
            [None, "TimeoutError", None, None],
        ),
        (  # permissions a cell takes away do not stop the folder from being restored
            [
                "import os\nos.mkdir('locked')\nopen('locked/f', 'w').write('x')\nos.chmod('locked', 0)",
                "os.chmod('.', 0o500)\nprint(sorted(os.listdir('.')))",
                "open('new.txt', 'w')",
                "print(sorted(os.listdir('.')))",
            ],
            [None, None, "PermissionError", None],
        ),
    ],
    ids=["lost-worker", "permissions"],
)
def test_files_observe_the_same_in_both_modes_after_a_lost_worker_or_lost_permissions(examples_dir, cells, errors):
    observed = {}
    for mode in ("session", "replay"):
        with Sandbox(files=[examples_dir / "sales.csv"], mode=mode, limits=Limits(wall_s=2)) as sb:
            observed[mode] = [_observation(sb.run_python(code)) for code in cells]
    assert observed["session"] == observed["replay"]
    assert [obs[2]["ename"] if obs[2] else None for obs in observed["session"]] == errors


def test_sql_results_saved_as_files_are_there_for_later_cells_in_both_modes(tmp_path):
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
    conn.close()
    for mode in ("session", "replay"):
        with Sandbox(files=[db], mode=mode, limits=Limits(wall_s=30)) as sb:
            assert sb.run_sql("SELECT x FROM t", output_path="t.csv").ok
            assert sb.run_python("print(open('t.csv').read().split())").stdout == "['x', '1', '2', '3']\n"
            assert sb.run_python("import os\nos.remove('t.csv')\nprint(os.listdir('.'))").stdout == "['shop.db']\n"


def test_a_replay_that_does_not_reproduce_an_earlier_cell_says_so(tmp_path):
    # The installer's folder is the one thing outside the work folder that the host can change
    # between steps and a jailed cell can read: a module there vanishes before the replay.
    site = tmp_path / "site"
    site.mkdir()
    (site / "vanishing.py").write_text("VALUE = 1\n")
    installer = AutoInstaller({}, target_dir=site)
    with Sandbox(mode="replay", limits=Limits(wall_s=30), auto_install=installer) as sb:
        assert sb.run_python("import vanishing").ok
        (site / "vanishing.py").unlink()
        result = sb.run_python("print('next')")
    assert result.stdout == "next\n"
    assert result.replay_mismatch.startswith(
        "Re-running the earlier cells did not reproduce them: <cell-1> raised nothing the first time "
        "and raised ModuleNotFoundError when re-run"
    )
    assert result.render().startswith("[note] Re-running the earlier cells did not reproduce them")
