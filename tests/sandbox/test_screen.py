"""The static pre-check: refuses clearly unsafe calls with a message, lets ordinary analysis through."""

from __future__ import annotations

import pytest

from datalyst.sandbox import screen

DATA = ["/work/sales.csv", "/work/shop.sqlite"]


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("import subprocess", "import of subprocess: starting processes"),
        ("from subprocess import run", "import of subprocess"),
        ("import multiprocessing.pool", "import of multiprocessing.pool"),
        ("import os\nos.system('ls')", "(line 2): os.system()"),
        ("from os import fork", "os.fork"),
        ("import os\nos.kill(1, 9)", "os.kill()"),
        ("import socket", "there is no network"),
        ("import urllib.request", "there is no network"),
        ("from urllib import request", "there is no network"),
        ("import requests", "there is no network"),
        ("import ctypes", "ctypes can corrupt"),
        ("__import__('ctypes')", "ctypes"),
        ("name = input('value? ')", "input() would wait forever"),
        ("open('sales.csv', 'w').write('')", "writing to a data file"),
        ("open('./sales.csv', mode='a')", "writing to a data file"),
        ("df.to_csv('sales.csv')", "to_csv() on a data file"),
        ("import os\nos.remove('shop.sqlite')", "remove() on a data file"),
        ("from pathlib import Path\nPath('sales.csv').unlink()", "unlink() on a data file"),
        ("import shutil\nshutil.move('sales.csv', 'x.csv')", "move() on a data file"),
    ],
)
def test_unsafe_code_is_refused(code, fragment):
    problem = screen(code, DATA)
    assert problem is not None and problem.startswith("Refused before running")
    assert fragment in problem


@pytest.mark.parametrize(
    "code",
    [
        "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.describe()",
        "open('sales.csv').read()",
        "open('sales.csv', 'r', encoding='utf-8').read()",
        "df.to_csv('summary.csv', index=False)",
        "import os\nprint(os.listdir('.'))\nos.path.exists('sales.csv')",
        "import sqlite3\nsqlite3.connect('shop.sqlite').execute('select 1')",
        "import matplotlib.pyplot as plt\nplt.savefig('chart.png')",
        "name = 'sales.csv'.replace('.csv', '')",
        "def f(:",  # syntax errors are the interpreter's to report
    ],
)
def test_ordinary_analysis_passes(code):
    assert screen(code, DATA) is None
