"""``datalyst exec`` as a user runs it: exit codes, output, JSON, one-line errors."""

from __future__ import annotations

import json


def test_exec_prints_the_cell_output(datalyst, examples_dir):
    code = "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.groupby('region')['units'].sum().sort_index()"
    done = datalyst("exec", str(examples_dir / "sales.csv"), "--code", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "region"
    assert {"East", "North", "South", "West"} <= {line.split()[0] for line in done.stdout.splitlines()[1:5]}


def test_exec_reads_code_from_stdin_and_runs_in_replay_mode(datalyst, examples_dir):
    done = datalyst("exec", str(examples_dir / "sales.csv"), "--code", "-", "--mode", "replay", stdin="print(6 * 7)")
    assert done.returncode == 0 and done.stdout == "42\n"


def test_exec_json_and_a_failing_cell_exit_1(datalyst, examples_dir):
    done = datalyst("exec", str(examples_dir / "sales.csv"), "--code", "1/0", "--json")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["error"]["ename"] == "ZeroDivisionError" and result["crashed"] is False


def test_a_missing_file_is_one_clear_line(datalyst, tmp_path):
    done = datalyst("exec", str(tmp_path / "nope.csv"), "--code", "1")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.csv'}: no such file; check the path"]
    assert "Traceback" not in done.stderr
