# ruff: noqa: F811  (the fixtures imported from test_fork and test_adversarial are parameters of the tests)
"""``Sandbox.fork()`` by snapshot: the source's worker pickles its state, a fresh jail loads it.

What arrives, what makes a fork replay instead (and say so), and hostile states: code that runs when
the state is pickled (in the source) or loaded (in the fork's jail). Reuses the fixtures of
``test_fork.py`` and ``test_adversarial.py`` (same folder).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_adversarial import (  # the adversarial suite's helpers and fixtures, reused as they are
    assert_contained_and_usable,
    cell,
    home_secret,  # noqa: F401  (a fixture)
    open_sandbox,  # noqa: F401  (a fixture)
    victim_data,  # noqa: F401  (a fixture)
)
from test_fork import fork_of, forks, run_all, sandbox  # noqa: F401  (fixtures among them)

from datalyst.errors import ConfigError
from datalyst.sandbox import Limits, Sandbox
from datalyst.sandbox._sandbox import _copy_memory_file
from datalyst.sandbox._snapshot import _left_in

STATE = [
    "import random\nimport numpy as np\nimport pandas as pd\n"
    "df = pd.DataFrame({'units': [3, 5, 8], 'region': ['n', 's', 'n']})\n"
    "rng = np.random.default_rng(7)\nrng.random()\nnp.random.seed(3)\nrandom.seed(4)",
    "scale = 2\ndef total(frame):\n    return int(frame.units.sum()) * scale\n"
    "class Counter:\n    def __init__(self):\n        self.seen = []\n"
    "    def add(self, v):\n        self.seen.append(v)\n        return len(self.seen)\n"
    "counter = Counter()\ncounter.add('a')\nsquare = lambda v: v * v\nshared = [1]\nalias = shared",
]
"""A DataFrame, a function, a class and its instance, a lambda, two names for one list, and random states."""
SHOW = (
    "print(total(df), counter.add('b'), square(scale), alias is shared, type(counter).__name__, "
    "round(rng.random(), 6), round(float(np.random.rand()), 6), round(random.random(), 6))"
)


def snapshot_fork(sb: Sandbox, forks: list[Sandbox]) -> Sandbox:
    child = fork_of(sb, forks)
    assert child.forked_by == "snapshot", child.fork_note
    assert child.fork_note == ""
    return child


def replaying_fork(sb: Sandbox, forks: list[Sandbox], why: str) -> Sandbox:
    child = fork_of(sb, forks)
    assert child.forked_by == "replay" and why in child.fork_note, child.fork_note
    return child


# ---------------------------------------------------------------- what arrives


def test_python_under_tmp_still_forks_by_snapshot():
    """A checkout or virtual environment under /tmp (a first try, many CI runners) is bound into the jail's
    private /tmp: those folders are not files a cell left there, and the fork carries the state."""
    venv = tempfile.mkdtemp(prefix="datalyst-venv-", dir="/tmp")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        (site,) = Path(venv).glob("lib/python*/site-packages")
        (site / "this_installation.pth").write_text("".join(f"{p}\n" for p in sys.path if os.path.isdir(p)))
        script = (
            "import sys\n"
            "from datalyst.sandbox import Sandbox\n"
            "with Sandbox(mode='session') as sb:\n"
            "    sb.run_python(f'import os\\nx = 42 if os.path.isdir({sys.prefix!r}) else 0')\n"
            "    child = sb.fork()\n"
            "    print(child.forked_by, child.run_python('print(x)').stdout.strip(), repr(child.fork_note))\n"
            "    child.close()\n"
        )
        command = [str(Path(venv, "bin", "python")), "-c", script]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["snapshot", "42", "''"], done.stdout
    finally:
        shutil.rmtree(venv)


def test_what_a_cell_leaves_in_tmp_is_told_from_the_folders_bound_there(tmp_path):
    kept = (str(tmp_path / "a" / "work"), str(tmp_path / "b" / "venv"), str(tmp_path / "b" / "src"))
    for place in kept:
        Path(place).mkdir(parents=True)
        Path(place, "inside.txt").write_text("bound, not left")
    assert _left_in(str(tmp_path), kept) is None
    (tmp_path / "b" / "notes.txt").write_text("left by a cell")
    assert _left_in(str(tmp_path), kept) == str(tmp_path / "b" / "notes.txt")
    (tmp_path / "b" / "notes.txt").unlink()
    (tmp_path / "b" / "cache").mkdir()
    assert _left_in(str(tmp_path), kept) == str(tmp_path / "b" / "cache")


def test_variables_functions_classes_and_random_streams_arrive(sandbox, forks):
    source = sandbox("session")
    run_all(source, STATE)
    child = snapshot_fork(source, forks)
    result = child.run_python(SHOW)
    assert result.ok and not result.state_lost and not result.replay_mismatch, result.render()
    assert result.stdout.startswith("32 2 4 True Counter ")
    assert source.run_python(SHOW).stdout == result.stdout  # the same numbers: each stream goes on from where it was


def test_functions_defined_in_cells_see_the_forks_own_later_variables(sandbox, forks):
    source = sandbox("session")
    run_all(source, STATE)
    child = snapshot_fork(source, forks)
    run_all(child, ["scale = 10"])
    assert child.run_python("print(total(df), isinstance(counter, Counter))").stdout == "160 True\n"
    assert source.run_python("print(total(df))").stdout == "32\n"


def test_later_changes_of_one_never_reach_the_other(sandbox, forks):
    source = sandbox("session")
    run_all(source, STATE)
    child = snapshot_fork(source, forks)
    run_all(source, ["shared.append('source')\ndf.loc[0, 'units'] = 100\nopen('source.txt', 'w').write('s')"])
    run_all(child, ["shared.append('fork')\ndel df\nclass Counter:\n    pass"])
    show = "import os\nprint(alias, 'df' in globals(), sorted(os.listdir('.')))"
    assert source.run_python(show).stdout == "[1, 'source'] True ['sales.csv', 'source.txt']\n"
    assert child.run_python(show).stdout == "[1, 'fork'] False ['sales.csv']\n"
    assert source.run_python("print(total(df), counter.add('c'))").stdout == "226 2\n"


def test_a_fork_of_a_snapshot_fork_and_its_replay_carry_the_whole_history(sandbox, forks):
    source = sandbox("session")
    run_all(source, STATE)
    child = snapshot_fork(source, forks)
    run_all(child, ["shared.append('child')"])
    grandchild = snapshot_fork(child, forks)
    run_all(child, ["numbers = (n for n in range(3))"])  # a generator cannot be pickled
    replayed = replaying_fork(child, forks, "the variable 'numbers' cannot be pickled")
    show = "print(shared, total(df), next(numbers, 'none') if 'numbers' in globals() else '-')"
    assert grandchild.run_python(show).stdout == "[1, 'child'] 32 -\n"
    result = replayed.run_python(show)  # the source's cells, then the child's, replayed in a fresh jail
    assert result.stdout == "[1, 'child'] 32 0\n" and not result.replay_mismatch, result.render()


def test_a_closed_file_arrives_closed_and_an_open_one_makes_the_fork_replay(sandbox, forks):
    source = sandbox("session")
    run_all(source, ["with open('log.txt', 'w', encoding='latin-1') as log:\n    log.write('x')"])
    child = snapshot_fork(source, forks)
    show = "print(log.name, log.mode, log.encoding, log.closed)"
    assert child.run_python(show).stdout == source.run_python(show).stdout == "log.txt w latin-1 True\n"
    run_all(source, ["handle = open('log.txt')"])
    child = replaying_fork(source, forks, "the variable 'handle' cannot be pickled (PicklingError: an open file")
    assert child.run_python("print(handle.read())").stdout == "x\n"


def test_modules_and_the_sql_helpers_go_by_reference(tmp_path, forks):
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2);")
    conn.close()
    with Sandbox(files=[db], limits=Limits(wall_s=30)) as source:
        run_all(
            source, ["import scipy.stats as st\nquery = execute_sql\ndef count():\n    execute_sql('SELECT x FROM t')"]
        )
        child = snapshot_fork(source, forks)
        show = "count()\nprint(st.__name__, query is execute_sql)"
        result = child.run_python(show)  # the fork's own helpers, which query its own copy of the database
        assert result.stdout == source.run_python(show).stdout, result.render()
    assert result.stdout.endswith("x\n1\n2\nscipy.stats True\n"), result.render()


def test_tracebacks_in_the_fork_show_the_lines_of_earlier_cells(sandbox, forks):
    source = sandbox("session")
    run_all(source, ["def fail():\n    raise ValueError('from an earlier cell')"])
    child = snapshot_fork(source, forks)
    traceback = child.run_python("fail()").error.traceback
    assert 'File "<cell-1>", line 2, in fail' in traceback and "raise ValueError('from an earlier cell')" in traceback


def test_settings_cells_change_arrive(sandbox, forks):
    """pandas options, matplotlib's rcParams, numpy's print and error settings, warning filters, the
    environment (set and removed variables), the current folder and sys.path: what a replay would redo."""
    source = sandbox("session")
    run_all(
        source,
        [
            "import os, sys, warnings\nimport numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n"
            "pd.set_option('display.max_columns', 2)\nplt.rcParams['lines.linewidth'] = 7\n"
            "np.set_printoptions(precision=2)\nnp.seterr(divide='raise')\n"
            "warnings.filterwarnings('ignore', message='quiet')\nos.environ['REGION'] = 'north'\n"
            "del os.environ['LANG']\nos.makedirs('out/deeper')\nos.chdir('out')\nsys.path.append('lib')",
        ],
    )
    child = snapshot_fork(source, forks)
    show = (
        "import warnings\nwarnings.warn('quiet please')\n"
        "print(pd.get_option('display.max_columns'), plt.rcParams['lines.linewidth'], np.array([1 / 3]), "
        "np.geterr()['divide'], os.environ.get('REGION'), 'LANG' in os.environ, os.path.basename(os.getcwd()), "
        "sys.path[-1], os.listdir('.'))"
    )
    expected = "2 7.0 [0.33] raise north False out lib ['deeper']\n"
    for sb in (child, source):
        result = sb.run_python(show)
        assert result.stdout == expected and result.stderr == "", result.render()


def test_a_figure_kept_in_a_variable_arrives_closed_as_in_its_source(sandbox, forks):
    source = sandbox("session")
    run_all(source, ["import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 3])"])
    child = snapshot_fork(source, forks)
    again = "ax.set_title('again')\nfig.savefig('again.png')\nprint(plt.get_fignums(), ax.get_title())"
    for sb in (child, source):  # no figure is open between cells, so the next cell saves only what it asks for
        result = sb.run_python(again)
        assert result.stdout == "[] again\n" and result.files_created == ["again.png"], result.render()


def test_fork_can_be_asked_to_replay(sandbox, forks):
    source = sandbox("session")
    run_all(source, ["x = 3"])
    child = fork_of(source, forks, how="replay")
    assert child.forked_by == "replay" and child.fork_note == "a replay was asked for"
    assert child.run_python("print(x)").stdout == "3\n"
    with pytest.raises(ConfigError, match="unknown way to fork 'live'"):
        source.fork("live")  # type: ignore[arg-type]


def test_a_replay_mode_sandbox_forks_by_replay(sandbox, forks):
    source = sandbox("replay")
    run_all(source, ["x = 3"])
    child = replaying_fork(source, forks, "no worker holds the state")
    assert child.run_python("print(x)").stdout == "3\n"


# ---------------------------------------------------------------- what makes a fork replay


@pytest.mark.parametrize(
    "code, why",
    [
        pytest.param(
            "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()",
            "a thread a cell started is still running",
            id="thread",
        ),
        pytest.param(
            "import subprocess\nsubprocess.Popen(['/bin/sleep', '60'])",
            "a process a cell started is still running",
            id="process",
        ),
        pytest.param("open('/tmp/notes.txt', 'w').write('n')", "/tmp/notes.txt is in the private /tmp", id="tmp"),
        pytest.param("import os\nos.mkdir('/dev/shm/d')", "/dev/shm/d is in the private /dev/shm", id="shm"),
        pytest.param("import os\nos.mkfifo('pipe')", "the work folder holds what cannot be copied", id="fifo"),
        pytest.param("import pathlib\nwhere = pathlib.Path.cwd()", "a value holds this sandbox's folder", id="path"),
        pytest.param("import numpy as np, os\nwhere = np.array([os.getcwd()])", "this sandbox's folder", id="array"),
    ],
)
def test_what_a_snapshot_would_lose_makes_the_fork_replay(sandbox, forks, code, why):
    source = sandbox("session")
    run_all(source, ["x = 1", code])
    child = replaying_fork(source, forks, why)
    result = child.run_python("print(x)")
    assert result.stdout == "1\n" and not result.replay_mismatch, result.render()


def test_a_state_over_the_size_limit_makes_the_fork_replay(sandbox, forks):
    source = sandbox("session", file_size_mb=1)  # a state is a file in the jail: no larger than its files may be
    run_all(source, ["blob = bytes(2 << 20)"])
    child = replaying_fork(source, forks, "the state is larger than the limit of 1.0 MiB")
    assert child.run_python("print(len(blob))").stdout == f"{2 << 20}\n"
    run_all(source, ["blob = bytes(1 << 19)"])
    snapshot_fork(source, forks)


def test_the_limit_is_a_quarter_of_the_memory_limit_where_that_is_less(sandbox, forks):
    source = sandbox("session", memory_mb=64, file_size_mb=64)
    run_all(source, ["blob = bytes(17 << 20)"])
    replaying_fork(source, forks, "the state is larger than the limit of 16.0 MiB")


# ---------------------------------------------------------------- hostile states

PAYLOAD = """
class Payload:
    '''Runs its code in whatever process loads it.'''
    def __init__(self, code):
        self.code = code
    def __reduce__(self):
        return (exec, (self.code, {}))
bomb = Payload($code)
"""


def hostile_fork(source: Sandbox, forks: list[Sandbox], code: str) -> Sandbox:
    run_all(source, ["import os\nbefore = sorted(os.listdir('.'))", cell(PAYLOAD, code=code)])
    return fork_of(source, forks)


def test_code_in_a_snapshot_runs_only_in_the_forks_jail(open_sandbox, forks, victim_data, home_secret):
    secret, text = home_secret
    source = open_sandbox("session")
    outside = Path(source.workdir).parent.parent / secrets.token_hex(6)  # beside the sandboxes' own folders
    with socket.create_server(("127.0.0.1", 0)) as server:
        code = cell(
            """
            import os, socket
            def attempt(action):
                try:
                    return repr(action())
                except OSError as exc:
                    return type(exc).__name__
            report = [
                attempt(lambda: socket.create_connection(("127.0.0.1", $port), timeout=2)),
                attempt(lambda: open($secret).read()),
                attempt(lambda: open($outside, "w").write("x")),
                attempt(lambda: os.listdir($source_folder[::-1])),
            ]
            open("planted.txt", "w").write("\\n".join(report))
            """,
            port=server.getsockname()[1],
            secret=str(secret),
            outside=str(outside),
            source_folder=source.workdir[::-1],  # the state may not hold it as it is: the fork would replay
        )
        child = hostile_fork(source, forks, code)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert child.forked_by == "snapshot", child.fork_note  # the code ran while loading, and loading went on
    report = Path(child.host_workdir, "planted.txt").read_text().splitlines()
    network, secret_read, _, source_listed = report  # the write lands in the jail's own /tmp, if anywhere
    assert network.endswith("Error") and secret_read.endswith("Error") and source_listed.endswith("Error"), report
    assert text not in "".join(report) and not outside.exists()
    assert not Path(source.host_workdir, "planted.txt").exists()
    assert child.run_python("print(bomb)").stdout == "None\n"  # what exec returned: the fork's own business
    assert source.run_python("print(type(bomb).__name__)").stdout == "Payload\n"
    assert_contained_and_usable(child, victim_data)
    assert_contained_and_usable(source, victim_data)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import os, signal\nos.kill(1, signal.SIGKILL)\nos._exit(3)", id="kill-pid-1-then-exit"),
        pytest.param("raise SystemExit(4)", id="raise"),
        pytest.param("while True:\n    pass", id="endless"),
    ],
)
def test_a_snapshot_that_fails_to_load_leaves_a_replaying_fork(open_sandbox, forks, victim_data, code):
    source = open_sandbox("session", wall_s=3, cpu_s=2)
    child = hostile_fork(source, forks, code)
    assert child.forked_by == "replay" and child.fork_note.startswith("loading the snapshot failed"), child.fork_note
    result = child.run_python("print(type(bomb).__name__, before)")  # the replay makes the payload, never loads it
    assert result.stdout == "Payload ['sales.csv']\n" and not result.replay_mismatch, result.render()
    assert source.run_python("print(type(bomb).__name__)").stdout == "Payload\n"
    assert_contained_and_usable(child, victim_data)
    assert_contained_and_usable(source, victim_data)


def test_code_that_runs_while_pickling_stays_in_the_source(open_sandbox, forks, victim_data):
    source = open_sandbox("session")
    run_all(
        source,
        [
            "x = 1\nopen('kept.txt', 'w').write('k')",
            "import os\nclass Exit:\n    def __reduce__(self):\n        os._exit(5)\nbomb = Exit()",
        ],
    )
    child = replaying_fork(source, forks, "taking the snapshot ended the worker (the worker exited with code 5)")
    for sb in (child, source):  # both lost the variables, as after a crash, and both kept the file
        result = sb.run_python("import os\nprint('x' in globals(), sorted(os.listdir('.')))")
        assert result.state_lost and result.stdout == "False ['kept.txt', 'sales.csv']\n", result.render()
    assert_contained_and_usable(source, victim_data)


@pytest.mark.parametrize(
    "forged, why",
    [
        pytest.param("os.write(fd, b'not a pickle')", "loading the snapshot failed (UnpicklingError: ", id="garbage"),
        pytest.param("os.ftruncate(fd, 17 << 20)", "wrote a snapshot of 17825792 bytes, over the limit", id="large"),
    ],
)
def test_a_forged_snapshot_is_only_copied(open_sandbox, forks, victim_data, forged, why):
    """A cell can replace the worker's snapshot code: the host still never loads what it writes, nor copies
    more than the limit (a quarter of memory_mb: 16 MiB here, where files may have 64)."""
    source = open_sandbox("session", memory_mb=64, file_size_mb=64)
    forge = f"import os\nimport datalyst.sandbox._snapshot as s\ns.take = lambda namespace, start, fd, limit: {forged}"
    run_all(source, [forge])
    child = fork_of(source, forks)
    assert child.forked_by == "replay" and why in child.fork_note, child.fork_note
    assert_contained_and_usable(child, victim_data)
    assert_contained_and_usable(source, victim_data)


def test_the_fork_gets_a_copy_of_the_file_its_source_wrote():
    """Code in the source's jail may keep the memory file it wrote and change it later: the fork reads a copy."""
    written = os.memfd_create("test")
    os.write(written, b"state and more")
    copy = _copy_memory_file(written, len(b"state"))
    try:
        assert os.fstat(copy).st_ino != os.fstat(written).st_ino
        os.pwrite(written, b"STATE", 0)
        assert os.pread(copy, 100, 0) == b"state"
    finally:
        os.close(copy)
        os.close(written)
