"""Put a work folder back the way it was, for replay mode (run on the host, with no jailed process alive)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Collection

from datalyst.sandbox._forkserver import remove_tree
from datalyst.sandbox._isolation import jail_identity


def empty_folder(path: str, keep: Collection[str]) -> None:
    """Delete every entry of ``path`` not named in ``keep``, whatever permissions sandboxed code left."""
    os.chmod(path, 0o700)  # the owner (the jail's user, or us) keeps full access; a cell may have taken it away
    for entry in os.scandir(path):
        if entry.name in keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


def copy_folder(source: str, target: str, skip: Collection[str] = ()) -> bool:
    """Copy every entry of ``source`` not named in ``skip`` into the existing folder ``target`` (symlinks as
    links). What cannot be copied (a FIFO, a socket, a file a cell made unreadable) is left out: False says
    something was. Run as root, the copies are given to ``nobody``, the user the jail maps its root to, so
    cells can change them.
    """
    whole = True
    for entry in os.scandir(source):
        if entry.name in skip:
            continue
        copy = os.path.join(target, entry.name)
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.copytree(entry.path, copy, symlinks=True)
            else:
                shutil.copy2(entry.path, copy, follow_symlinks=False)
        except OSError:  # shutil.Error too: the rest of a tree is copied first
            whole = False
        if os.path.lexists(copy):
            _give_to_jail(copy)
    return whole


def _give_to_jail(path: str) -> None:
    """Let the jail own a restored copy when it runs as another user than the host (as nobody, for root)."""
    uid, gid = jail_identity()
    if uid == os.geteuid():
        return
    os.lchown(path, uid, gid)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)
