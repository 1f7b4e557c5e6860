"""Without namespaces (opted into), Landlock keeps a worker to its work folder and away from TCP and the host.

Each attack runs in a real worker started with ``use_namespaces=False``; the screen is off, so only
the kernel stands in the way.
"""

from __future__ import annotations

import os
import socket

import pytest

from datalyst.sandbox import Limits, Sandbox
from datalyst.sandbox import _landlock as landlock

pytestmark = pytest.mark.skipif(landlock.abi_version() == 0, reason="this kernel has no Landlock")
LIMITS = Limits(wall_s=20, cpu_s=15)


@pytest.fixture(scope="module")
def sb(tmp_path_factory):
    data = tmp_path_factory.mktemp("data") / "sales.csv"
    data.write_text("region,revenue\nWest,10\nEast,7\n")
    with Sandbox(files=[data], limits=LIMITS, screen_code=False, use_namespaces=False, require_isolation=False) as box:
        yield box


def _ename(sb: Sandbox, code: str) -> str | None:
    result = sb.run_python(code)
    return result.error.ename if result.error else None


def test_the_isolation_report_names_landlock(sb):
    assert sb.isolation.startswith("DEGRADED (namespaces disabled by the caller)")
    assert f"Landlock ABI {landlock.abi_version()}: files" in sb.isolation
    assert "NOT enforced: UDP and Unix sockets with a path" in sb.isolation


def test_an_analysis_still_works(sb):
    code = (
        "import pandas as pd, matplotlib.pyplot as plt, sqlite3, scipy.stats, tempfile\n"
        "df = pd.read_csv('sales.csv')\n"
        "df.to_csv('copy.csv', index=False)\n"
        "df.plot.bar(x='region', y='revenue'); plt.savefig('bar.png')\n"
        "con = sqlite3.connect('db.sqlite'); df.to_sql('t', con); con.close()\n"
        "with tempfile.NamedTemporaryFile() as f: pass\n"
        "print(pd.read_csv('copy.csv').revenue.sum(), round(scipy.stats.sem(df.revenue), 3))"
    )
    result = sb.run_python(code)
    assert result.error is None and result.stdout == "17 1.5\n", result.render()


def test_host_files_outside_the_work_folder_are_out_of_reach(sb, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    assert _ename(sb, f"print(open({str(secret)!r}).read())") == "PermissionError"
    assert _ename(sb, f"open({str(tmp_path / 'planted.txt')!r}, 'w')") == "PermissionError"
    assert _ename(sb, "import os; os.listdir('/home')") == "PermissionError"
    assert not (tmp_path / "planted.txt").exists()


def test_tcp_connections_are_refused(sb):
    if landlock.abi_version() < 4:
        pytest.skip("Landlock ABI 4 (TCP) is needed")
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.5)
        port = server.getsockname()[1]
        code = f"import socket\ns = socket.socket()\ns.connect(('127.0.0.1', {port}))"
        assert _ename(sb, code) == "PermissionError"
        with pytest.raises(TimeoutError):
            server.accept()  # nothing came through


def test_host_processes_cannot_be_read_or_signalled(sb):
    host = os.getpid()
    assert _ename(sb, f"open('/proc/{host}/environ').read()") == "PermissionError"
    if landlock.abi_version() >= 6:
        assert _ename(sb, f"import os, signal\nos.kill({host}, signal.SIGTERM)") == "PermissionError"
    assert sb.run_python("print('still here')").stdout == "still here\n"
