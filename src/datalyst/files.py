"""Writing a file so that readers, and other writers, only ever see a whole one; a lock for one-time work on files."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once at import: there is no way to read it without setting it


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to a unique temporary file beside ``path``, then rename it into place.

    The rename is atomic on every OS, so a crash never leaves half a file and two processes writing
    the same path at once each leave a whole one (the last rename wins). Parent folders are created, and
    the file gets the permissions ``open()`` would give it (``mkstemp`` makes it private).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o666 & ~_UMASK)
        with os.fdopen(handle, "wb") as file:
            file.write(payload)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def subplots(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """matplotlib's ``pyplot.subplots`` on the Agg backend (files, no display), imported at the first figure: slow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(figure: Any, path: str | Path, *, dpi: int = 100) -> None:
    """Lay out a matplotlib ``figure``, write it to ``path`` as a PNG (atomically) and close it."""
    import matplotlib.pyplot as plt

    png = io.BytesIO()
    figure.tight_layout()
    figure.savefig(png, format="png", dpi=dpi)
    plt.close(figure)
    write_atomic(path, png.getvalue())


@contextlib.contextmanager
def locked(path: Path, *, waiting: str | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``path``, so that two processes never do the same one-time work at once (saying
    ``waiting`` on stderr while another holds it); without a writable folder, go on unlocked."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+b")  # noqa: SIM115 (held for the whole block)
    except OSError:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                print(waiting, file=sys.stderr)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
