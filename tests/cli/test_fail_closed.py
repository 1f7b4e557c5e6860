"""Where user namespaces are off (a rootless container, a locked-down host), model code is refused
unless the user opts in, and then runs with a warning that names what is not enforced.

The machine is simulated for real: the commands run as root of a fresh user namespace that has
``user.max_user_namespaces`` set to 0, so the sandbox's own ``unshare`` fails as it would there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

SCRIPT = [
    "<think>Count.</think>\n<code>\n```python\nimport pandas as pd\nprint(len(pd.read_csv('sales.csv')))\n```\n</code>",
    "<think>Done.</think>\n<answer>West</answer>",
]
_WRAP = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'


def _without_user_namespaces(*argv: str) -> subprocess.CompletedProcess[str]:
    command = ["unshare", "--user", "--map-root-user", "sh", "-c", _WRAP, "sh", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def datalyst_without_namespaces():
    """Run ``datalyst`` (or, with ``python=True``, a Python snippet) where user namespaces are off."""
    probe = shutil.which("unshare") and _without_user_namespaces("unshare", "--user", "true")
    if not probe or "No space left on device" not in probe.stderr:
        pytest.skip("cannot make a user namespace with user namespaces switched off here")

    def run(*args: str, python: bool = False) -> subprocess.CompletedProcess[str]:
        return _without_user_namespaces(sys.executable, *(["-c"] if python else ["-m", "datalyst"]), *args)

    return run


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and done.stderr.strip().endswith(errors[0])
    assert errors[0].startswith("error: the sandbox cannot isolate model code here")
    assert "user.max_user_namespaces is 0" in errors[0] and "--allow-unisolated" in errors[0]
    return errors[0]


def test_exec_refuses_to_run_code_it_cannot_isolate(datalyst_without_namespaces, examples_dir):
    done = datalyst_without_namespaces("exec", str(examples_dir / "sales.csv"), "--code", "print('ran')")
    _one_error_line(done)
    assert "ran" not in done.stdout


def test_exec_runs_degraded_only_when_asked_and_says_what_is_not_enforced(datalyst_without_namespaces, examples_dir):
    code = "import pandas as pd\nprint(len(pd.read_csv('sales.csv')))"
    done = datalyst_without_namespaces("exec", str(examples_dir / "sales.csv"), "--code", code, "--allow-unisolated")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().isdigit()
    assert "WITHOUT isolation (user namespaces are switched off" in done.stderr
    assert "NOT enforced: " in done.stderr


def test_ask_refuses_and_then_answers_when_allowed(datalyst_without_namespaces, replay_spec, examples_dir):
    args = ["ask", str(examples_dir / "sales.csv"), "Which region?", "--model", replay_spec(SCRIPT)]
    _one_error_line(datalyst_without_namespaces(*args))
    done = datalyst_without_namespaces(*args, "--allow-unisolated", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "West"


def test_eval_run_stops_at_once_instead_of_failing_every_trajectory(
    datalyst_without_namespaces, replay_spec, tmp_path, examples_dir
):
    tasks = tmp_path / "tasks.jsonl"
    task = {"question": "Which region?", "answer": "West", "files": [str(examples_dir / "sales.csv")]}
    tasks.write_text("".join(json.dumps({"id": f"t{i}", **task}) + "\n" for i in range(3)))
    args = ["eval", "run", "--bench", "tasks", "--bench-path", str(tasks), "--trials", "1", "--concurrency", "2"]
    done = datalyst_without_namespaces(*args, "--model", replay_spec(SCRIPT), "--out", str(tmp_path / "run"))
    _one_error_line(done)


def test_the_python_api_refuses_unless_told_otherwise(datalyst_without_namespaces):
    code = (
        "from datalyst.errors import IsolationUnavailable\n"
        "from datalyst.sandbox import Sandbox\n"
        "try:\n    Sandbox().run_python('1')\nexcept IsolationUnavailable as exc:\n    print('refused:', exc)\n"
        "with Sandbox(require_isolation=False) as sb:\n"
        "    print(sb.run_python('print(6 * 7)').stdout.strip(), sb.isolation)\n"
        f'    print(sb.run_python("open({__file__!r})").error.ename)\n'
    )
    done = datalyst_without_namespaces(code, python=True)
    assert done.returncode == 0, done.stderr
    refused, ran, outside = done.stdout.splitlines()
    assert refused.startswith("refused: the sandbox cannot isolate model code here: user namespaces are switched off")
    assert ran.startswith("42 DEGRADED (user namespaces are switched off")
    assert done.stderr.count("WITHOUT isolation") == 1
    if "Landlock ABI" in ran:  # in place of the mount namespace, in a rootless container too
        assert outside == "PermissionError"
