"""Notebook reading for mining: loading calls from the syntax tree, the address map, every coarse filter, caps."""

from __future__ import annotations

from pathlib import Path

import pytest
from nbformat.v4 import new_output
from notebook_helpers import FILLER, ROWS, write_notebook

from datalyst.errors import ConfigError
from datalyst.paths import notebooks_dir
from datalyst.synth._notebooks import (
    AddressMap,
    Cell,
    NotebookFilters,
    cap_per_repository,
    data_loads,
    find_data_file,
    read_notebook,
    screen_notebook,
)


def _cells(*sources: str) -> list[Cell]:
    return [Cell(source, "", n) for n, source in enumerate(sources, start=1)]


def test_loading_calls_are_read_from_the_syntax_tree():
    cells = _cells(
        "%matplotlib inline\nimport pandas as pd\nbase = 'https://example.org/data/'",
        "url = base + 'sales.csv'\nsales = pd.read_csv(url, sep=';')",
        "prices = pd.read_excel(io='prices.xlsx')\nname = 'x'\nweather = pd.read_csv(f'{base}weather.tsv')",
        "import numpy as np\narray = np.loadtxt('numbers.txt')\nother = pd.read_csv(make_path())",
        "this is not python",
        "import sqlite3\nwith sqlite3.connect('shop.sqlite') as connection:\n    pass\nsignal.connect(handler)",
    )
    assert data_loads(cells) == ["https://example.org/data/sales.csv", "prices.xlsx",
                                 "https://example.org/data/weather.tsv", "numbers.txt", None,
                                 "shop.sqlite"]  # fmt: skip


def test_the_address_map_finds_local_copies(tmp_path):
    mapping = AddressMap.parse(
        [f"guipsamora/pandas_exercises={tmp_path}", f"https://example.org/a.csv={tmp_path}/a.csv"]
    )
    raw = "https://raw.githubusercontent.com/guipsamora/pandas_exercises/master/02_Filtering_%26_Sorting/x.csv"
    assert mapping.local(raw) == tmp_path / "02_Filtering_&_Sorting" / "x.csv"  # the branch is dropped
    blob = "https://github.com/guipsamora/pandas_exercises/blob/main/data/y.csv"
    assert mapping.local(blob) == tmp_path / "data" / "y.csv"
    assert mapping.local("https://example.org/a.csv") == tmp_path / "a.csv"
    assert mapping.local("https://raw.githubusercontent.com/someone/else/master/z.csv") is None
    for bad in ("no-equals-sign", "a/b/c=folder", "=folder"):
        with pytest.raises(ConfigError):
            AddressMap.parse([bad])


def test_a_path_from_the_authors_machine_is_looked_for_next_to_the_notebook(tmp_path):
    notebook = tmp_path / "work" / "analysis.ipynb"
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "data.csv").write_text(ROWS)
    assert find_data_file("~/Desktop/data.csv", notebook, AddressMap()) == tmp_path / "work" / "data.csv"
    assert find_data_file("data.csv", notebook, AddressMap()) == tmp_path / "work" / "data.csv"
    assert find_data_file("missing.csv", notebook, AddressMap()) is None
    assert find_data_file("https://example.org/data.csv", notebook, AddressMap()) is None


def _screen(tmp_path: Path, sources: list[str], name: str = "repo/analysis.ipynb", data: str = ROWS, **kwargs):
    path = write_notebook(tmp_path / name, sources, **{k: v for k, v in kwargs.items() if k in ("counts", "outputs")})
    (path.parent / "data.csv").write_text(data)
    options = NotebookFilters(**{k: v for k, v in kwargs.items() if k not in ("counts", "outputs")})
    return screen_notebook(read_notebook(path, tmp_path), AddressMap(), options)


GOOD = ["import pandas as pd\ndf = pd.read_csv('data.csv')", FILLER, "print(df['y'].mean())"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"counts": [1, None, 3]}, "unexecuted_cells"),
        ({"counts": [1, 3, 2]}, "not_in_order"),
        ({"outputs": [[], [new_output("error", ename="KeyError", evalue="'z'", traceback=[])], []]}, "error_output"),
        ({"sources": [GOOD[0], "print(1)", GOOD[2]]}, "short_code"),
        ({"sources": [GOOD[0] + "\ntitanic = df", FILLER, GOOD[2]]}, "teaching_dataset"),
        ({"sources": ["import torch\n" + GOOD[0], FILLER, GOOD[2]]}, "neural_network"),
        ({"sources": ["import pandas as pd\ndf = pd.DataFrame({'y': [1, 2]})", FILLER, GOOD[2]]}, "no_data_files"),
        ({"sources": ["import pandas as pd\ndf = pd.read_csv('other.csv')", FILLER, GOOD[2]]}, "missing_data"),
        ({"data": "x,y\n1,2\n"}, "small_data"),
    ],
)
def test_every_coarse_filter_has_its_reason(tmp_path, change, reason):
    sources = change.pop("sources", GOOD)
    assert _screen(tmp_path, sources, **change) == reason


def test_a_good_notebook_passes_with_its_data_file_and_its_text(tmp_path):
    screened = _screen(tmp_path, GOOD)
    assert screened.loads == ("data.csv",) and screened.files == (tmp_path / "repo" / "data.csv",)
    assert screened.complete and screened.notebook.repository == "repo" and screened.notebook.code_lines == 43
    assert (
        "```python\nimport pandas as pd" in screened.notebook.text and "Output:\n```\nok\n```" in screened.notebook.text
    )
    # the filters' thresholds are options: a shorter notebook passes a lower bar, a missing file with keep_incomplete
    assert _screen(tmp_path, [GOOD[0], GOOD[2]], min_code_lines=2) != "short_code"
    incomplete = _screen(tmp_path, ["import pandas as pd\ndf = pd.read_csv('other.csv')", FILLER], keep_incomplete=True)
    assert incomplete.files == (None,) and not incomplete.complete


def test_caps_per_repository_and_per_data(tmp_path):
    def screened(repo: str, name: str, data: str = ROWS):
        return _screen(tmp_path, GOOD, name=f"{repo}/{name}/nb.ipynb", data=data)

    same = [screened("a", f"n{i}") for i in range(3)]  # one repository, the same data three times
    kept, capped = cap_per_repository(same)
    assert kept == same[:2] and capped == 1
    other = screened("b", "n0", data=ROWS + "99,1\n")
    copied = screened("c", "n0")  # c holds a's data too: that group spans repositories and is dropped
    kept, capped = cap_per_repository([*same, other, copied], complete=5)
    assert kept == [other] and capped == 4


def test_the_shared_corpus_maps_its_addresses():
    root = notebooks_dir() / "pandas_exercises"
    if not root.is_dir():
        pytest.skip("the shared notebooks are not here")
    notebook = read_notebook(root / "02_Filtering_&_Sorting" / "Euro12" / "Exercises_with_Solutions.ipynb", root)
    [address] = data_loads(notebook.cells)
    local = find_data_file(address, notebook.path, AddressMap.parse([f"guipsamora/pandas_exercises={root}"]))
    assert local == root / "02_Filtering_&_Sorting" / "Euro12" / "Euro_2012_stats_TEAM.csv"
    assert notebook.repository == "02_Filtering_&_Sorting"
