"""Automatic installation of a missing package: off by default, allowlist only."""

from __future__ import annotations

import zipfile

import pytest

from datalyst.sandbox import AutoInstaller, Limits, Sandbox

CODE = "import dltiny\nprint(dltiny.VALUE)"


@pytest.fixture
def wheel(tmp_path):
    """A tiny pure-Python wheel built by hand, so the test needs no index."""
    path = tmp_path / "dltiny-1.0-py3-none-any.whl"
    files = {
        "dltiny/__init__.py": "VALUE = 42\n",
        "dltiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: dltiny\nVersion: 1.0\n",
        "dltiny-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "dltiny-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in {**files, "dltiny-1.0.dist-info/RECORD": record}.items():
            zf.writestr(name, text)
    return path


def test_missing_modules_are_not_installed_by_default():
    with Sandbox(limits=Limits(wall_s=10)) as sb:
        result = sb.run_python(CODE)
    assert result.error.ename == "ModuleNotFoundError" and result.error.missing_module == "dltiny"


def test_an_allowlisted_module_is_installed_and_the_cell_rerun(tmp_path, wheel):
    installer = AutoInstaller({"dltiny": str(wheel)}, target_dir=tmp_path / "site", pip_args=["--no-index"])
    with Sandbox(limits=Limits(wall_s=10), auto_install=installer) as sb:
        result = sb.run_python(CODE)
    assert result.ok and result.stdout == "42\n"
    assert (tmp_path / "site" / "dltiny" / "__init__.py").exists()


def test_modules_outside_the_allowlist_are_never_installed(tmp_path, wheel):
    installer = AutoInstaller({"other": str(wheel)}, target_dir=tmp_path / "site", pip_args=["--no-index"])
    with Sandbox(limits=Limits(wall_s=10), auto_install=installer) as sb:
        result = sb.run_python(CODE)
    assert result.error.ename == "ModuleNotFoundError"
    assert not (tmp_path / "site" / "dltiny").exists()


@pytest.mark.parametrize("mode", ["replay", "session"])
def test_a_cell_rerun_after_an_install_runs_once_when_replayed(tmp_path, wheel, mode):
    installer = AutoInstaller({"dltiny": str(wheel)}, target_dir=tmp_path / "site", pip_args=["--no-index"])
    with Sandbox(mode=mode, limits=Limits(wall_s=10), auto_install=installer) as sb:
        assert sb.run_python("import dltiny\nopen('log.txt', 'a').write('ran ')").ok
        with sb.fork(how="replay") as fork:
            result = fork.run_python("print(open('log.txt').read())")
    assert result.stdout == "ran \n" and not result.replay_mismatch
