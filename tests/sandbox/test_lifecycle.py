"""Nothing outlives its owner: closing a sandbox or killing the host process leaves no process or folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

HOST_SCRIPT = """
import json, sys
from datalyst.sandbox import Sandbox
sb = Sandbox(screen_code=False)
result = sb.run_python(
    "import os, time\\n"
    "if os.fork() == 0:\\n"
    "    os.setsid()\\n"
    "    if os.fork() == 0:\\n"
    "        os.execv('/bin/sleep', ['sleep', '987.654'])\\n"
    "    os._exit(0)\\n"
    "print('daemon started')"
)
print(json.dumps({"workdir": sb.workdir, "stdout": result.stdout}), flush=True)
sys.stdin.read()  # wait to be killed
"""


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _wait_until(condition, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_killing_the_host_process_cleans_up_everything(how):
    with subprocess.Popen(
        [sys.executable, "-c", HOST_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as host:
        report = json.loads(host.stdout.readline())
        assert report["stdout"] == "daemon started\n"
        run_root = os.path.dirname(os.path.dirname(report["workdir"]))
        assert os.path.isdir(run_root) and _processes_with("987.654")
        host.send_signal(getattr(signal, how))
        host.wait(timeout=30)
        assert _wait_until(lambda: not _processes_with("987.654")), "the daemon outlived the host"
        assert _wait_until(lambda: not os.path.exists(run_root)), "the sandbox folder was left behind"
        assert _wait_until(lambda: not _processes_with(run_root)), "a fork server or worker outlived the host"
