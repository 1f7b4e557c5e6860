"""The data-science stack every sandbox has: importable in the jail without network, and already loaded."""

from __future__ import annotations

import ast

import pytest

from datalyst.sandbox import PREINSTALLED, Limits, Sandbox
from datalyst.sandbox._forkserver import PRELOAD

CELLS = [
    (
        "import numpy as np\nfrom scipy import stats\nx = np.random.default_rng(0).normal(size=200)\n"
        "w, p = stats.shapiro(x)\nr, p_r = stats.pearsonr(x, 2 * x + 1)\nt = stats.ttest_ind(x, x + 10)\n"
        "print(0 < w <= 1, 0 < p <= 1, round(r, 6), p_r < 1e-9, t.pvalue < 1e-9)",
        "True True 1.0 True True\n",
    ),
    (
        "import numpy as np\nfrom sklearn.linear_model import LinearRegression\nX = np.arange(20.0).reshape(-1, 1)\n"
        "model = LinearRegression().fit(X, 3 * X[:, 0] - 2)\n"
        "print(round(model.coef_[0], 6), round(model.intercept_, 6))",
        "3.0 -2.0\n",
    ),
    (
        "import numpy as np\nimport statsmodels.api as sm\nx = np.arange(30.0)\n"
        "fit = sm.OLS(0.5 * x + 4, sm.add_constant(x)).fit()\n"
        "print(fit.params.round(6).tolist(), round(fit.rsquared, 6))",
        "[4.0, 0.5] 1.0\n",
    ),
    (
        "import pandas as pd\nimport seaborn as sns\nframe = pd.DataFrame({'g': list('aabb'), 'v': [1, 2, 3, 5]})\n"
        "ax = sns.barplot(data=frame, x='g', y='v')\nprint(ax.get_xlabel(), ax.get_ylabel())",
        "g v\n",
    ),
]


@pytest.fixture(scope="module")
def jailed():
    with Sandbox(limits=Limits(wall_s=60, cpu_s=60), require_isolation=True) as sb:
        yield sb


def test_the_preinstalled_libraries_are_loaded_before_the_first_cell(jailed):
    result = jailed.run_python("import sys\nprint(sorted(set(m.split('.')[0] for m in sys.modules)))")
    loaded = ast.literal_eval(result.stdout)
    assert set(PREINSTALLED) <= set(loaded)
    assert set(PREINSTALLED) <= {name.split(".")[0] for name in PRELOAD}


@pytest.mark.parametrize(("code", "expected"), CELLS, ids=["scipy", "sklearn", "statsmodels", "seaborn"])
def test_statistics_regressions_and_plots_run_in_a_jailed_cell(jailed, code, expected):
    result = jailed.run_python(code)
    assert result.ok, result.render()
    assert result.stdout == expected
    if "seaborn" in code:
        assert any(name.endswith("-figure-1.png") for name in result.files_created)
