"""Behaviour of one sandbox: notebook-like cells, both modes, outputs, limits, degraded isolation."""

from __future__ import annotations

import asyncio
import os
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from datalyst.errors import ConfigError, DataFileError, IsolationUnavailable
from datalyst.sandbox import Limits, Sandbox
from datalyst.sandbox import _landlock as landlock
from datalyst.sandbox import _sandbox as sandbox_module
from datalyst.sandbox._sandbox import _missing_layer, _refusal

FAST = Limits(wall_s=5, cpu_s=5, memory_mb=1024)
MODES = ["session", "replay"]


@pytest.fixture
def sales(examples_dir):
    return examples_dir / "sales.csv"


@pytest.mark.parametrize("mode", MODES)
def test_state_carries_over_between_cells(sales, mode):
    with Sandbox(files=[sales], mode=mode, limits=FAST) as sb:
        assert sb.run_python("import pandas as pd\ndf = pd.read_csv('sales.csv')").ok
        result = sb.run_python("print(len(df))\ndf.columns.tolist()")
    assert result.stdout.splitlines() == [
        "60",
        "['date', 'region', 'product', 'units', 'unit_price', 'revenue']",
    ]


def test_final_expression_is_shown_like_a_notebook_and_none_is_not(sales):
    with Sandbox(files=[sales], limits=FAST) as sb:
        assert sb.run_python("x = 41\nx + 1").stdout == "42\n"
        assert sb.run_python("print('a')\nNone").stdout == "a\n"
        assert sb.run_python("for i in range(3):\n    print(i)").stdout == "0\n1\n2\n"


def test_errors_carry_a_traceback_that_points_into_the_cell(sales):
    with Sandbox(files=[sales], limits=FAST) as sb:
        result = sb.run_python("a = 1\nb = a / 0")
    assert result.error.ename == "ZeroDivisionError"
    assert 'File "<cell-1>", line 2' in result.error.traceback
    assert "b = a / 0" in result.error.traceback
    assert "_worker.py" not in result.error.traceback
    assert not result.crashed and not result.state_lost


def test_syntax_errors_are_reported_not_raised():
    with Sandbox(limits=FAST) as sb:
        result = sb.run_python("def broken(:\n    pass")
    assert result.error.ename == "SyntaxError"
    assert result.error.traceback.startswith('  File "<cell-1>", line 1\n    def broken(:\n')  # no parser frame


def test_tracebacks_do_not_name_where_python_is_installed(sales):
    with Sandbox(files=[sales], limits=FAST) as sb:
        stdlib = sb.run_python("import json\njson.loads('{')").error.traceback
        library = sb.run_python("import pandas as pd\npd.read_csv('missing.csv')").error.traceback
    assert 'File "<python>/json/decoder.py"' in stdlib and 'File "<site-packages>/pandas/' in library
    for installed in {sys.prefix, sys.base_prefix, *(sysconfig.get_path(key) for key in ("stdlib", "purelib"))}:
        assert installed not in stdlib + library


def test_figures_are_saved_and_written_files_are_listed(sales):
    code = (
        "import pandas as pd, matplotlib.pyplot as plt\n"
        "df = pd.read_csv('sales.csv')\n"
        "df.groupby('region')['revenue'].sum().plot(kind='bar')\n"
        "df.head().to_csv('head.csv', index=False)\n"
    )
    with Sandbox(files=[sales], limits=FAST) as sb:
        result = sb.run_python(code)
        assert result.ok, result.render()
        assert sorted(result.files_created) == ["cell-1-figure-1.png", "head.csv"]
        with open(os.path.join(sb.host_workdir, "cell-1-figure-1.png"), "rb") as png:
            assert png.read(8) == b"\x89PNG\r\n\x1a\n"
        assert sb.run_python("print('no new files')").files_created == []


def test_long_output_keeps_head_and_tail():
    limits = Limits(wall_s=5, max_output_chars=1000)
    with Sandbox(limits=limits) as sb:
        result = sb.run_python("print('HEAD' + 'x' * 100000 + 'TAIL')")
    assert result.truncated
    assert result.stdout.startswith("HEAD") and result.stdout.rstrip().endswith("TAIL")
    assert len(result.stdout) < 1200


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_kills_the_worker_and_the_next_cell_says_state_was_lost(mode):
    with Sandbox(mode=mode, limits=Limits(wall_s=1, cpu_s=30)) as sb:
        sb.run_python("x = 1")
        result = sb.run_python("import time\ntime.sleep(60)")
        assert result.timed_out and result.error.ename == "TimeoutError"
        after = sb.run_python("print('x' in globals())")
    assert after.state_lost and after.stdout == "False\n"


def test_cpu_limit_raises_inside_the_cell_and_keeps_the_session():
    with Sandbox(limits=Limits(wall_s=20, cpu_s=1)) as sb:
        sb.run_python("kept = 'yes'")
        result = sb.run_python("while True:\n    pass")
        assert result.error.ename == "CpuTimeExceeded" and not result.crashed
        assert sb.run_python("print(kept)").stdout == "yes\n"


def test_memory_limit_gives_memory_error():
    with Sandbox(limits=Limits(wall_s=10, memory_mb=512)) as sb:
        result = sb.run_python("block = bytearray(1024 ** 3)")
    assert result.memory_exceeded and result.error.ename == "MemoryError"


def test_crash_is_a_result_and_the_next_cell_gets_a_fresh_worker():
    with Sandbox(limits=FAST, screen_code=False) as sb:
        sb.run_python("x = 1")
        result = sb.run_python("import os\nos._exit(7)")
        assert result.crashed and "exited with code 7" in result.error.evalue
        after = sb.run_python("print(1 + 1)")
    assert after.state_lost and after.stdout == "2\n"


def test_the_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("DATALYST_TEST_SECRET", "hunter2")
    with Sandbox(limits=FAST) as sb:
        result = sb.run_python("import os\nprint(sorted(os.environ), open('/proc/self/environ').read())")
        flags = sb.run_python("import sys\nprint(sys.flags.no_user_site, sys.flags.safe_path)")
    assert "DATALYST_TEST_SECRET" not in result.stdout and "hunter2" not in result.stdout
    assert flags.stdout == "1 True\n"  # no user site-packages, no current folder on sys.path


def test_isolation_is_reported():
    with Sandbox(limits=FAST) as sb:
        assert sb.isolation.startswith("namespaces: user, mount, pid, network")


def test_without_namespaces_the_sandbox_degrades_and_says_so(sales, caplog, monkeypatch):
    monkeypatch.setattr(sandbox_module, "_warned", set())  # other tests may have had the warning already
    limits = Limits(wall_s=1, cpu_s=30)
    with Sandbox(files=[sales], limits=limits, use_namespaces=False, require_isolation=False) as sb:
        assert sb.isolation.startswith("DEGRADED (namespaces disabled by the caller)")
        assert sb.run_python("print(open('sales.csv').readline().strip())").stdout.startswith("date,region")
        assert sb.run_python("import time\ntime.sleep(30)").timed_out
        assert sb.run_python("print('back')").stdout == "back\n"
    with Sandbox(limits=FAST, use_namespaces=False, require_isolation=False) as again:
        assert again.run_python("print(1)").stdout == "1\n"
    warnings = [r.getMessage() for r in caplog.records if "WITHOUT isolation" in r.getMessage()]
    assert len(warnings) == 1  # once per reason and process, naming what is not enforced
    assert "namespaces disabled by the caller" in warnings[0]
    # Landlock, where the kernel has it, keeps the host's files and TCP out of reach (test_landlock.py)
    open_ = "NOT enforced: UDP and Unix sockets" if landlock.abi_version() else "NOT enforced: no network isolation"
    assert open_ in warnings[0]


def test_isolation_is_required_unless_the_caller_opts_out():
    with pytest.raises(ConfigError, match="require_isolation=False"):
        Sandbox(limits=FAST, use_namespaces=False)


def test_a_worker_missing_a_layer_is_refused_by_name():
    """What `Sandbox` refuses (and with require_isolation=False, warns about): a worker without either layer."""
    assert _missing_layer({"namespaces": ["user"], "seccomp": True}, "n/a") == ("", "")
    assert _missing_layer({"namespaces": [], "seccomp": True}, "no user namespaces")[0] == "no user namespaces"
    missing, not_enforced = _missing_layer({"namespaces": ["user"], "seccomp": False, "seccomp_error": "EINVAL"}, "")
    assert missing == "the seccomp filter could not be installed (EINVAL)" and "system-call filter" in not_enforced
    with pytest.raises(IsolationUnavailable, match="--allow-unisolated"):
        raise _refusal(missing)
    no_disk, open_ = _missing_layer({"namespaces": ["user"], "seccomp": True}, "", "fsopen: Function not implemented")
    assert no_disk == "no size-limited work folder (fsopen: Function not implemented)" and "total size" in open_


def test_bad_arguments_are_clear_errors(tmp_path, sales):
    with pytest.raises(DataFileError, match="no such file"):
        Sandbox(files=[tmp_path / "missing.csv"])
    other = tmp_path / "sales.csv"
    other.write_text("a\n1\n")
    with pytest.raises(ConfigError, match=r"two data files are named 'sales\.csv'"):
        Sandbox(files=[sales, other])
    with pytest.raises(ConfigError, match="unknown sandbox mode"):
        Sandbox(mode="fast")  # type: ignore[arg-type]


def test_closing_removes_the_work_folder(sales):
    sb = Sandbox(files=[sales], limits=FAST)
    sb.run_python("open('out.txt', 'w').write('x')")
    workdir = sb.workdir
    sb.close()
    assert not os.path.exists(workdir)


def test_screened_code_is_refused_with_a_readable_message(sales):
    with Sandbox(files=[sales], limits=FAST) as sb:
        result = sb.run_python("import subprocess\nsubprocess.run(['ls'])")
        assert result.error.ename == "SandboxViolation"
        assert "Refused before running (line 1): import of subprocess" in result.render()
        assert sb.run_python("print('fine')").stdout == "fine\n"


@pytest.mark.timeout(60)
def test_a_session_goes_on_with_writers_left_running_by_a_cell():
    spam = (  # threads that write faster than the host reads, and never stop
        "import os, threading\n"
        "print('started')\n"
        "def spam():\n"
        "    while True:\n"
        "        os.write(1, b'x' * 65536)\n"
        "for _ in range(4):\n"
        "    threading.Thread(target=spam, daemon=True).start()\n"
    )
    with Sandbox(limits=Limits(wall_s=5, max_output_chars=1000)) as sb:
        result = sb.run_python(spam)
        assert result.ok and result.stdout.startswith("started")
        assert sb.run_python("print('next')").ok


@pytest.mark.parametrize("mode", ["session", "replay"])
def test_closing_while_a_cell_runs_on_another_thread_interrupts_it_and_leaves_nothing(sales, mode):
    """What cancelling a trajectory does: its cell still runs in a worker thread while the sandbox closes."""
    for _ in range(5):
        sb = Sandbox(files=[sales], mode=mode, limits=FAST)
        sb.run_python("x = 1")
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(sb.run_python, "import time\ntime.sleep(30)")
            time.sleep(0.3)
            sb.close()  # raises nothing, and returns once the jail is gone and the folder deleted
            assert running.result(timeout=10).error is not None
        assert not os.path.exists(sb.workdir)


def test_cancelling_a_caller_never_cuts_a_step_and_aclose_interrupts_one(sales):
    """The async core: a cancelled ``arun_python`` leaves its cell to finish (the next step waits for it and sees
    its variables); ``aclose`` while a cell runs kills the worker, and the cell returns a killed-worker result."""

    async def go() -> None:
        async with Sandbox(files=[sales], limits=FAST) as sb:
            running = asyncio.ensure_future(sb.arun_python("import time\ntime.sleep(1)\nfinished = True"))
            await asyncio.sleep(0.3)
            running.cancel()
            assert (await sb.arun_python("print(finished)")).stdout == "True\n"
            started = time.monotonic()
            stuck = asyncio.ensure_future(sb.arun_python("import time\ntime.sleep(30)"))
            await asyncio.sleep(0.3)
            await sb.aclose()
            assert (await stuck).crashed and time.monotonic() - started < 10
            assert not os.path.exists(sb.workdir)

    asyncio.run(go())


def test_the_sync_methods_work_inside_a_running_event_loop(sales):
    async def go() -> str:
        with Sandbox(files=[sales], limits=FAST) as sb:
            return sb.run_python("print(1 + 1)").stdout

    assert asyncio.run(go()) == "2\n"


def test_a_sync_method_on_the_facades_own_loop_is_refused_not_a_deadlock():
    with Sandbox(limits=FAST) as sb:

        async def inside() -> None:
            sb.run_python("1")

        with pytest.raises(RuntimeError, match="its own event loop"):
            sandbox_module._portal.run(inside())


def test_the_jail_is_first_to_be_killed_on_memory_shortage_and_has_its_own_shared_memory():
    code = (
        "import multiprocessing as mp\n"
        "with mp.get_context('fork').Pool(2) as pool:\n    print(pool.map(abs, [-1, -2]))\n"
        "print(open('/proc/self/oom_score_adj').read().strip())"
    )
    with Sandbox(limits=FAST, screen_code=False) as sb:  # the screen would turn multiprocessing away
        result = sb.run_python(code)
        assert "first killed when memory runs out" in sb.isolation
    assert result.stdout == "[1, 2]\n1000\n", result.render()


def test_a_thread_a_cell_leaves_spinning_uses_no_cpu_between_cells():
    spin = "import threading\nthreading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()"
    with Sandbox(limits=FAST, screen_code=False) as sb:
        assert sb.run_python(spin).ok
        processes = sb._worker.processes
        before = processes.cpu_s()
        time.sleep(1.5)  # the model would be thinking now
        assert processes.cpu_s() - before < 0.1
        assert sb.run_python("print('still here')").stdout == "still here\n"


def test_the_cpu_limit_holds_even_when_a_cell_lifts_its_own():
    lift = (
        "import resource, threading\n"
        "_, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))\n"
        "spin = lambda: [None for _ in iter(int, 1)]\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "spin()"
    )
    with Sandbox(limits=Limits(wall_s=60, cpu_s=1), screen_code=False) as sb:
        result = sb.run_python(lift)
        assert result.error.ename == "CpuTimeExceeded" and "threads and processes" in result.error.evalue
        assert result.duration_s < 30 and not result.timed_out
        after = sb.run_python("print('fresh')")
        assert after.state_lost and after.stdout == "fresh\n"
