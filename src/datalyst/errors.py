"""Errors raised by datalyst.

Model mistakes (a failing cell, a bad SQL query) are observations handed back
to the agent, never exceptions. These classes are for failures a *user* or the
host can cause, and each message names the value, the reason and the fix::

    DatalystError
    ├── DataFileError        a data file is missing, empty, corrupt or of an unknown kind
    ├── SandboxError         the sandbox could not be started or used
    │   └── IsolationUnavailable   strict isolation was asked for but a layer is missing
    ├── ModelError           a language model could not be loaded or asked
    │   ├── ModelUnavailable       unreachable server, unknown model name, missing weights
    │   └── ModelResponseError     the backend answered with something unusable
    └── ConfigError          an option or setting has an invalid value
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "ConfigError",
    "DataFileError",
    "DatalystError",
    "IsolationUnavailable",
    "ModelError",
    "ModelResponseError",
    "ModelUnavailable",
    "SandboxError",
    "first_problem",
]


class DatalystError(Exception):
    """Root of every error datalyst raises on purpose."""


class DataFileError(DatalystError):
    """A data file cannot be read."""


class SandboxError(DatalystError):
    """The sandbox itself failed (not the code running in it)."""


class IsolationUnavailable(SandboxError):
    """The kernel does not allow an isolation layer that was required."""


class ModelError(DatalystError):
    """A language model could not be loaded or asked."""


class ModelUnavailable(ModelError):
    """The model cannot be reached or loaded (server down, wrong name, missing weights)."""


class ModelResponseError(ModelError):
    """The backend answered, but not with something usable."""


class ConfigError(DatalystError):
    """An option or setting is invalid."""


def first_problem(exc: ValidationError, *, option: bool = False, located: bool = True) -> str:
    """What a failed validation found wrong first, in one line: ``where: what`` (``--where: what`` for a command's
    option), or only ``what`` where it names no field or ``located`` is False."""
    problem = exc.errors()[0]
    message = str(problem["msg"]).removeprefix("Value error, ")
    parts = [str(part) for part in problem["loc"]]
    if not parts or not located:
        return message
    return f"--{'-'.join(parts).replace('_', '-')}: {message}" if option else f"{'.'.join(parts)}: {message}"
