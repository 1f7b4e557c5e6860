"""What one read of a data file may take: wall time, memory and decompressed size, and the line that says so."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from datalyst.errors import ConfigError, DataFileError

from ._common import file_error, human_size

ENV_PREFIX = "DATALYST_READ_"
"""``DATALYST_READ_WALL_S=120`` and its kin set a limit for every read of this process and its children."""


class ReadLimits(BaseModel):
    """The budget of one read of a data file (describing it, or loading its tables)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(60.0, gt=0)
    """Seconds one read may take before its process is stopped."""
    memory_mb: int = Field(4096, ge=64)
    """Memory the reading process may allocate on top of what its libraries hold, in MiB."""
    decompressed_mb: int = Field(1024, ge=1)
    """What a compressed file may unpack to (an XLSX workbook's parts, a Parquet file's columns), in MiB."""

    @classmethod
    def from_env(cls) -> ReadLimits:
        """The defaults, each overridden by its ``DATALYST_READ_<NAME>`` environment variable when set."""
        values = {name: os.environ[env_name(name)] for name in cls.model_fields if env_name(name) in os.environ}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise ConfigError(f"{env_name(str(error['loc'][0]))}: {error['msg']}") from None


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


_active: ReadLimits | None = None


def active() -> ReadLimits:
    """The limits of the read running in this process (the environment's, outside a reader)."""
    return _active or ReadLimits.from_env()


def set_active(limits: ReadLimits) -> None:
    global _active
    _active = limits


def over_budget(path: str | os.PathLike[str], what: str, field: str, limits: ReadLimits) -> DataFileError:
    """The one line for a read that hit a limit: the file, the limit, and the variable that raises it."""
    value = getattr(limits, field)
    return file_error(path, what, f"to allow more, set {env_name(field)}={value * 2:g} (now {value:g})")


def check_unpacked(path: str | os.PathLike[str], size: int) -> None:
    """Refuse a compressed file that would unpack to more than the active decompressed-size limit."""
    limits = active()
    if size > limits.decompressed_mb * 2**20:
        what = f"it unpacks to {human_size(size)}, past the {limits.decompressed_mb} MiB limit on decompressed data"
        raise over_budget(path, what, "decompressed_mb", limits)
