"""``datalyst serve`` as a user runs it: the printed link works, other addresses are warned about, bad folders stop."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx2
import pytest
from web_helpers import SCRIPT, script_spec


def serve(*args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "datalyst", "serve", "--port", "0", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_the_printed_link_opens_the_app(tmp_path, host):
    spec = script_spec(tmp_path / "script.jsonl", SCRIPT)
    with serve("--host", host, "--model", spec, "--runs", str(tmp_path)) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            link = re.search(r"http://\S+/\?token=\S+", first)
            assert link, first
            warning = process.stdout.readline()
            assert ("other machines can reach this server" in warning) == (host != "127.0.0.1")
            address = link.group().replace("0.0.0.0", "127.0.0.1")
            root = address.split("?")[0]
            with httpx2.Client(follow_redirects=True, timeout=30) as client:
                page = client.get(address)
                assert page.status_code == 200 and "<title>datalyst</title>" in page.text
                assert client.get(root + "api/runs").json() == []
            assert httpx2.get(root + "api/info").status_code == 401
        finally:
            process.terminate()


def test_a_missing_folder_stops_in_one_line(tmp_path, datalyst):
    result = datalyst("serve", "--runs", str(tmp_path / "missing"))
    assert result.returncode == 2 and "is not a folder" in result.stderr and "Traceback" not in result.stderr
