"""Optional installation of a missing package, limited to an allowlist (off unless a sandbox is given one)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from datalyst.paths import cache_dir

log = logging.getLogger(__name__)

PIP_TIMEOUT_S = 600
PREINSTALLED = ("pandas", "numpy", "matplotlib", "scipy", "sklearn", "statsmodels", "seaborn")
"""Import names of the libraries every sandbox has, installed with datalyst (the jail has no network)."""
DEFAULT_ALLOWLIST = {
    "tabulate": "tabulate",
    "xgboost": "xgboost",
    "lightgbm": "lightgbm",
    "networkx": "networkx",
    "sympy": "sympy",
}
"""Import name -> pip requirement, for libraries beyond ``PREINSTALLED``. Only these are ever installed."""


class AutoInstaller:
    """Installs an allowlisted package, on the host, into a folder the sandbox reads (never runs model code)."""

    def __init__(
        self,
        allowlist: Mapping[str, str] | None = None,
        *,
        target_dir: str | os.PathLike[str] | None = None,
        pip_args: Sequence[str] = (),
    ) -> None:
        self.allowlist = dict(DEFAULT_ALLOWLIST if allowlist is None else allowlist)
        tag = f"py{sys.version_info.major}{sys.version_info.minor}"
        self.target_dir = os.fspath(target_dir or cache_dir() / f"site-packages-{tag}")
        os.makedirs(self.target_dir, exist_ok=True)
        self.pip_args = list(pip_args)
        self._tried: set[str] = set()

    def install(self, module: str) -> bool:
        """Install the package providing ``module`` if it is allowlisted; True when it was installed now."""
        requirement = self.allowlist.get(module)
        if requirement is None or module in self._tried:
            return False
        self._tried.add(module)
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                   "--target", self.target_dir, requirement, *self.pip_args]  # fmt: skip
        log.info("installing %s for the sandbox", requirement)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("installing %s took longer than %d s", requirement, PIP_TIMEOUT_S)
            return False
        if done.returncode != 0:
            log.warning("installing %s failed: %s", requirement, done.stderr.strip()[-500:])
        return done.returncode == 0
