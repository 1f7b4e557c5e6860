"""``Sandbox.fork()``: an independent sandbox in the same state, with every isolation layer of its own.

The adversarial part reuses the helpers and fixtures of ``test_adversarial.py`` (same folder): the
attacks run in a fork, with the static screen off, and must be contained there as in any sandbox,
while the source sandbox goes on untouched.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_adversarial import (  # the adversarial suite's helpers and fixtures, reused as they are
    DAEMON,
    LIMITS,
    SWALLOWING_LOOP,
    DataFile,
    assert_contained_and_usable,
    cell,
    close_and_wait,
    descendants,
    home_secret,  # noqa: F401  (a fixture)
    is_os_error,
    jailed_descendants,
    open_sandbox,  # noqa: F401  (a fixture)
    processes_with_arg,
    still_running_after_wait,
    victim_data,  # noqa: F401  (a fixture)
)

from datalyst.errors import SandboxError
from datalyst.sandbox import Limits, Sandbox

BOTH_MODES = pytest.mark.parametrize("mode", ["session", "replay"])
WAY = {"session": "snapshot", "replay": "replay"}
"""How a fork of a sandbox in each mode gets its state (a replay-mode sandbox holds no live state)."""
STATE = [
    "import os\nx = 1\nrows = open('sales.csv').read().count('\\n')",
    "with open('log.txt', 'a') as f:\n    f.write('one\\n')\nos.mkdir('out')",
    "def double(v):\n    return 2 * v\nopen('out/a.txt', 'w').write(str(double(x)))",
]
"""Cells that leave variables, a function, a folder and a file appended to: replaying them against the folder
as it is (not as it was) would append twice and fail on the existing folder."""
SHOW = "print(x, double(x), rows, open('log.txt').read().split(), sorted(os.listdir('out')))"


@pytest.fixture
def sandbox(victim_data: DataFile) -> Iterator[Callable[..., Sandbox]]:  # noqa: F811
    """Factory of sandboxes over ``victim_data``, screen off (closed at teardown; forks go in ``forks``)."""
    opened: list[Sandbox] = []

    def make(mode: str = "session", **limits: float) -> Sandbox:
        sb = Sandbox(
            files=[victim_data.source],
            mode=mode,  # type: ignore[arg-type]
            limits=Limits(**{**LIMITS.model_dump(), **limits}),
            screen_code=False,
        )
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()


def fork_of(sb: Sandbox, registry: list[Sandbox], how: str = "snapshot") -> Sandbox:
    child = sb.fork(how)  # type: ignore[arg-type]
    registry.append(child)
    return child


@pytest.fixture
def forks() -> Iterator[list[Sandbox]]:
    made: list[Sandbox] = []
    yield made
    for sb in made:
        sb.close()


def run_all(sb: Sandbox, cells: list[str]) -> None:
    for code in cells:
        result = sb.run_python(code)
        assert result.ok, result.render()


# ---------------------------------------------------------------- state and independence


@BOTH_MODES
def test_a_fork_has_the_variables_and_files_and_says_how_it_was_made(sandbox, forks, mode):
    source = sandbox(mode)
    run_all(source, STATE)
    child = fork_of(source, forks)
    assert source.forked_by is None and child.forked_by == WAY[mode], child.fork_note
    assert child.mode == mode and child.limits == source.limits
    assert sorted(os.listdir(child.host_workdir)) == ["log.txt", "out", "sales.csv"]  # before any cell runs
    result = child.run_python(SHOW)
    assert result.ok and not result.replay_mismatch and not result.state_lost, result.render()
    assert result.stdout == "1 2 201 ['one'] ['a.txt']\n"
    assert source.run_python(SHOW).stdout == result.stdout
    assert child.isolation.startswith("namespaces:"), child.isolation


@BOTH_MODES
def test_later_cells_and_files_of_one_never_reach_the_other(sandbox, forks, mode):
    source = sandbox(mode)
    run_all(source, STATE)
    child = fork_of(source, forks)
    run_all(source, ["x = 10\nopen('source.txt', 'w').write('s')\nos.remove('out/a.txt')"])
    run_all(child, ["x = 20\nopen('child.txt', 'w').write('c')\nwith open('log.txt', 'a') as f:\n    f.write('c\\n')"])
    show = "print(x, sorted(os.listdir('.')), sorted(os.listdir('out')), open('log.txt').read().split())"
    assert source.run_python(show).stdout == "10 ['log.txt', 'out', 'sales.csv', 'source.txt'] [] ['one']\n"
    assert child.run_python(show).stdout == "20 ['child.txt', 'log.txt', 'out', 'sales.csv'] ['a.txt'] ['one', 'c']\n"
    assert Path(source.workdir) != Path(child.workdir)
    assert not (Path(source.host_workdir) / "child.txt").exists()
    assert not (Path(child.host_workdir) / "source.txt").exists()


@BOTH_MODES
def test_a_fork_of_a_fork_and_sibling_forks_keep_their_own_state(sandbox, forks, mode):
    root = sandbox(mode)
    run_all(root, ["trail = ['root']"])
    siblings = [fork_of(root, forks) for _ in range(3)]
    for n, sibling in enumerate(siblings):
        run_all(sibling, [f"trail.append('child-{n}')"])
    grandchild = fork_of(siblings[1], forks)
    run_all(grandchild, ["trail.append('grandchild')"])
    assert grandchild.forked_by == WAY[mode]
    outputs = [sb.run_python("print(trail)").stdout for sb in (root, *siblings, grandchild)]
    assert outputs == [
        "['root']\n",
        "['root', 'child-0']\n",
        "['root', 'child-1']\n",
        "['root', 'child-2']\n",
        "['root', 'child-1', 'grandchild']\n",
    ]


def test_cell_numbers_figures_and_saved_query_results_carry_over(tmp_path, forks):
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
    conn.close()
    with Sandbox(files=[db], limits=Limits(wall_s=30)) as source:
        assert source.run_sql("SELECT x FROM t", output_path="t.csv").ok
        run_all(
            source,
            ["import matplotlib.pyplot as plt\nplt.plot([1, 2])\nwith open('t.csv', 'a') as f:\n    f.write('4\\n')"],
        )
        child = fork_of(source, forks)
        result = child.run_python("print(open('t.csv').read().split())")
    assert result.stdout == "['x', '1', '2', '3', '4']\n", result.render()
    assert child.run_python("import os\nprint(sorted(os.listdir('.')))").stdout == (
        "['cell-1-figure-1.png', 'shop.db', 't.csv']\n"
    )
    assert child.run_python("plt.plot([3])").files_created == ["cell-4-figure-1.png"]  # numbering goes on


def test_a_fork_whose_replay_differs_says_so(sandbox, forks):
    source = sandbox("session")
    run_all(source, ["import os\nhere = os.getcwd()", "assert os.getcwd() == here\nseen = here"])
    child = fork_of(source, forks)
    assert child.forked_by == "replay" and "a value holds this sandbox's folder" in child.fork_note
    # Each sandbox has its own folder: a cell that compares against the source's path only passes in the source.
    run_all(source, [f"assert seen == {source.workdir!r}"])
    result = child.run_python(f"print(seen == {source.workdir!r})")
    assert result.stdout == "False\n" and not result.replay_mismatch  # replayed faithfully, in its own folder
    diverging = sandbox("session")
    run_all(diverging, [f"import os\nassert os.getcwd() == {diverging.workdir!r}"])
    result = fork_of(diverging, forks, how="replay").run_python("print('next')")
    assert result.stdout == "next\n"
    assert result.replay_mismatch.startswith(
        "Re-running the earlier cells did not reproduce them: <cell-1> raised nothing the first time "
        "and raised AssertionError when re-run"
    )


def test_a_lost_state_carries_over_as_it_is(sandbox, forks):
    source = sandbox("session", wall_s=2)
    run_all(source, ["x = 1\nopen('kept.txt', 'w').write('k')"])
    assert source.run_python("import time\ntime.sleep(60)").timed_out
    child = fork_of(source, forks)
    for sb in (child, source):  # both lost the variables, both kept the file, both say so
        result = sb.run_python("import os\nprint('x' in globals(), sorted(os.listdir('.')))")
        assert result.state_lost and result.stdout == "False ['kept.txt', 'sales.csv']\n", result.render()


def test_forking_a_closed_sandbox_is_an_error(sandbox):
    source = sandbox("session")
    source.close()
    with pytest.raises(SandboxError, match="closed"):
        source.fork()


def test_forking_from_asyncio_code(sandbox, forks):
    source = sandbox("session")

    async def main() -> list[str]:
        await source.arun_python("base = 5")
        children = await asyncio.gather(*(source.afork() for _ in range(2)))
        forks.extend(children)
        results = await asyncio.gather(*(c.arun_python(f"print(base + {n})") for n, c in enumerate(children)))
        for child in children:
            await child.aclose()
        return [r.stdout for r in results]

    assert asyncio.run(main()) == ["5\n", "6\n"]


# ---------------------------------------------------------------- ending and limits of one branch


@BOTH_MODES
def test_closing_or_crashing_one_leaves_the_other_working(sandbox, forks, mode):
    source = sandbox(mode)
    run_all(source, STATE)
    child = fork_of(source, forks)
    assert child.run_python("import os\nos._exit(3)").crashed
    assert source.run_python(SHOW).stdout == "1 2 201 ['one'] ['a.txt']\n"
    grandchild = fork_of(source, forks)
    source.close()
    result = grandchild.run_python(SHOW)
    assert result.stdout == "1 2 201 ['one'] ['a.txt']\n", result.render()


@pytest.mark.parametrize(
    "code, outcome, cpu_s",
    [
        pytest.param("import time\ntime.sleep(60)", "timed_out", 8, id="wall-limit"),
        pytest.param("blob = bytearray(4 * 1024**3)", "memory", 8, id="memory"),
        pytest.param(SWALLOWING_LOOP, "cpu", 1, id="cpu-limit"),
    ],
)
def test_a_limit_blown_in_one_leaves_the_other_working(sandbox, forks, code, outcome, cpu_s):
    source = sandbox("session", wall_s=3, cpu_s=cpu_s)
    run_all(source, STATE)
    child = fork_of(source, forks)
    blown = child.run_python(code)
    if outcome == "memory":
        assert blown.memory_exceeded or blown.crashed, blown.render()
    else:  # on a busy machine the wall clock may run out before the CPU limit
        assert blown.timed_out or (outcome == "cpu" and blown.error.ename == "CpuTimeExceeded"), blown.render()
    result = source.run_python(SHOW)
    assert result.stdout == "1 2 201 ['one'] ['a.txt']\n" and not result.state_lost, result.render()
    sibling = fork_of(source, forks)
    assert sibling.run_python(SHOW).stdout == result.stdout


# ---------------------------------------------------------------- the adversarial suite, in a fork


@pytest.fixture
def forked(open_sandbox, forks) -> Callable[[str], tuple[Sandbox, Sandbox]]:  # noqa: F811
    """A fully isolated sandbox that ran a cell, and its fork: (source, fork)."""

    def make(mode: str) -> tuple[Sandbox, Sandbox]:
        source = open_sandbox(mode)
        run_all(source, ["import os\nbefore = sorted(os.listdir('.'))"])
        child = fork_of(source, forks)
        assert child.isolation.startswith("namespaces:"), child.isolation
        return source, child

    return make


@BOTH_MODES
def test_a_fork_reaches_no_host_network(forked, victim_data, mode):  # noqa: F811
    source, child = forked(mode)
    with socket.create_server(("127.0.0.1", 0)) as server:
        result = child.run_python(
            cell(
                "import socket\nsocket.create_connection(('127.0.0.1', $port), timeout=2)", port=server.getsockname()[1]
            )
        )
        assert is_os_error(result), result.render()
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert_contained_and_usable(child, victim_data)
    assert_contained_and_usable(source, victim_data)


@BOTH_MODES
def test_a_fork_reads_no_host_file_and_writes_nothing_outside_its_folder(forked, victim_data, home_secret, mode):  # noqa: F811
    secret, text = home_secret
    source, child = forked(mode)
    outside = Path(source.workdir).parent / secrets.token_hex(6)
    result = child.run_python(
        cell(
            """
            import os
            attempts = (
                lambda: open($secret).read(),
                lambda: os.listdir($source_folder),
                lambda: open($outside, "w").write("x"),
                lambda: os.symlink($secret, "link") or open("link").read(),
            )
            for attempt in attempts:
                try:
                    print(attempt())
                except OSError as exc:
                    print(type(exc).__name__)
            """,
            secret=str(secret),
            source_folder=source.workdir,
            outside=str(outside),
        )
    )
    assert not result.timed_out and not result.crashed, result.render()
    assert text not in result.render() and not outside.exists()
    assert result.stdout.splitlines()[1] in {"FileNotFoundError", "PermissionError"}  # the source's folder is not there
    assert_contained_and_usable(child, victim_data)
    assert_contained_and_usable(source, victim_data)


def test_a_fork_sees_only_its_own_processes(forked, victim_data):  # noqa: F811
    source, child = forked("session")
    assert source.run_python("import subprocess\nsleeper = subprocess.Popen(['/bin/sleep', '600'])").ok
    result = child.run_python("print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert result.stdout == "[1]\n", result.render()  # not the source's worker, not its sleeper
    result = child.run_python(
        "import signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    print('none')"
    )
    assert result.stdout == "none\n", result.render()  # nothing it may signal: its jail holds only itself
    assert source.run_python("print(sleeper.poll())").stdout == "None\n"  # still running
    assert_contained_and_usable(source, victim_data)


@BOTH_MODES
def test_a_forked_daemon_dies_with_its_branch(open_sandbox, forks, victim_data, mode):  # noqa: F811
    marker = f"1000.{secrets.randbelow(10**12):012d}"
    source = open_sandbox(mode)
    try:
        assert source.run_python(cell(DAEMON, marker=marker)).ok
        before = descendants()
        child = fork_of(source, forks)
        assert child.forked_by == "replay"  # a session's snapshot would lose the daemon, so it replays too
        assert mode == "replay" or "a process a cell started is still running" in child.fork_note
        assert child.run_python("print('replayed')").stdout == "replayed\n"  # its replay started a daemon of its own
        branch = descendants() - before  # the fork's jail (in session mode; replay mode ended it already)
        if mode == "session":
            assert len(processes_with_arg(marker)) == 2  # the source's and the fork's
        else:
            assert still_running_after_wait(processes_with_arg(marker)) == set()
        child.close()
        assert still_running_after_wait(branch) == set()
        assert len(processes_with_arg(marker)) == (1 if mode == "session" else 0)  # the source's lives on with it
        assert_contained_and_usable(source, victim_data)
        close_and_wait(source)
        assert processes_with_arg(marker) == [] and jailed_descendants() == set()
    finally:
        for pid in processes_with_arg(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_session_that_starts_with_a_query_runs_its_next_cell_without_replaying_it(tmp_path):
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
    conn.close()
    with Sandbox(files=[db], limits=Limits(wall_s=30)) as sb:
        assert sb.run_sql("SELECT x FROM t", output_path="t.csv").ok
        Path(sb.host_workdir, "added.txt").write_text("by the host")  # a replay would put the folder back first
        result = sb.run_python("import os\nprint(sorted(os.listdir('.')))")
    assert result.stdout == "['added.txt', 'shop.db', 't.csv']\n", result.render()
