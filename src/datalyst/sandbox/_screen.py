"""A static check of model-written code before it runs: clear messages for clearly unsafe calls.

This is a courtesy to the agent (it learns at once why a call is refused), not the security
boundary: the jail is. Anything this misses (``getattr`` tricks, ``exec`` of built strings)
still runs without network, host files or host processes.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable

_NO_PROCESSES = "starting processes is not allowed here; do the work in Python in this cell"
_NO_NETWORK = "there is no network in this sandbox; use the local data files"
_BLOCKED_MODULES = {
    "subprocess": _NO_PROCESSES,
    "multiprocessing": _NO_PROCESSES,
    "pty": _NO_PROCESSES,
    "pexpect": _NO_PROCESSES,
    "socket": _NO_NETWORK,
    "socketserver": _NO_NETWORK,
    "ssl": _NO_NETWORK,
    "http": _NO_NETWORK,
    "urllib.request": _NO_NETWORK,
    "requests": _NO_NETWORK,
    "httpx": _NO_NETWORK,
    "aiohttp": _NO_NETWORK,
    "ftplib": _NO_NETWORK,
    "smtplib": _NO_NETWORK,
    "ctypes": "ctypes can corrupt the interpreter and is not allowed",
    "_ctypes": "ctypes can corrupt the interpreter and is not allowed",
    "cffi": "foreign-function interfaces are not allowed",
}
_OS_PROCESS_CALLS = {
    "system", "popen", "fork", "forkpty", "kill", "killpg", "_exit", "abort",
    "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
    "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
    "posix_spawn", "posix_spawnp",
}  # fmt: skip
_BLOCKED_BUILTINS = {
    "input": "input() would wait forever: there is no user at the keyboard; hard-code the value instead",
    "breakpoint": "the debugger cannot be used here",
}
# Which argument of a call is the path it writes, moves or deletes: (position, keyword) slots.
_Slots = tuple[tuple[int, str], ...]
_FUNCTIONS: dict[str, _Slots] = {  # module functions, by qualified name
    "os.remove": ((0, "path"),),
    "os.unlink": ((0, "path"),),
    "os.truncate": ((0, "path"),),
    "os.chmod": ((0, "path"),),
    "os.rename": ((0, "src"), (1, "dst")),
    "os.renames": ((0, "old"), (1, "new")),
    "os.replace": ((0, "src"), (1, "dst")),
    "shutil.move": ((0, "src"), (1, "dst")),
    "shutil.copy": ((1, "dst"),),
    "shutil.copy2": ((1, "dst"),),
    "shutil.copyfile": ((1, "dst"),),
    "shutil.rmtree": ((0, "path"),),
    "numpy.save": ((0, "file"),),
    "numpy.savez": ((0, "file"),),
    "numpy.savez_compressed": ((0, "file"),),
    "numpy.savetxt": ((0, "fname"),),
}
_WRITERS: dict[str, _Slots] = {  # methods (and pd.ExcelWriter) whose argument is the file they write, any receiver
    "to_csv": ((0, "path_or_buf"),),
    "to_json": ((0, "path_or_buf"),),
    "to_hdf": ((0, "path_or_buf"),),
    "to_excel": ((0, "excel_writer"),),
    "to_parquet": ((0, "path"),),
    "to_feather": ((0, "path"),),
    "to_orc": ((0, "path"),),
    "to_pickle": ((0, "path"),),
    "to_stata": ((0, "path"),),
    "to_xml": ((0, "path_or_buffer"),),
    "to_html": ((0, "buf"),),
    "to_latex": ((0, "buf"),),
    "to_markdown": ((0, "buf"),),
    "to_string": ((0, "buf"),),
    "savefig": ((0, "fname"),),
    "tofile": ((0, "fid"),),
    "ExcelWriter": ((0, "path"),),
}
_PATH_METHODS = {"unlink", "write_text", "write_bytes", "touch", "chmod", "rename", "replace", "rmdir"}
"""Methods of a ``Path`` that change the file it names; ``rename`` and ``replace`` also change their argument."""
_PATH_TYPES = {"Path", "PurePath", "PosixPath"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_APPEND", "O_TRUNC", "O_CREAT"}
_DEFAULT_ALIASES = {"np": "numpy"}
"""Names a cell may use without importing them in the same cell (a session keeps earlier imports)."""


def screen(code: str, data_files: Iterable[str] = ()) -> str | None:
    """Return why ``code`` is refused, or None when it may run. Syntax errors are left to the interpreter."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    checker = _Checker({os.path.basename(f) for f in data_files}, _aliases(tree))
    checker.visit(tree)
    return checker.problem


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> qualified name, from the cell's imports (``np`` -> ``numpy``, ``rm`` -> ``os.remove``)."""
    aliases = dict(_DEFAULT_ALIASES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update((a.asname, a.name) for a in node.names if a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            aliases.update((a.asname or a.name, f"{node.module}.{a.name}") for a in node.names)
    return aliases


class _Checker(ast.NodeVisitor):
    def __init__(self, data_names: set[str], aliases: dict[str, str]) -> None:
        self.data_names = data_names
        self.aliases = aliases
        self.problem: str | None = None

    def _refuse(self, node: ast.AST, what: str, why: str) -> None:
        if self.problem is None:
            line = getattr(node, "lineno", "?")
            self.problem = f"Refused before running (line {line}): {what}: {why}."

    def _check_module(self, node: ast.AST, name: str) -> None:
        for blocked, why in _BLOCKED_MODULES.items():
            if name == blocked or name.startswith(blocked + "."):
                self._refuse(node, f"import of {name}", why)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._check_module(node, module)
        if module == "os":
            for alias in node.names:
                if alias.name in _OS_PROCESS_CALLS:
                    self._refuse(node, f"os.{alias.name}", _NO_PROCESSES)
        for alias in node.names:
            self._check_module(node, f"{module}.{alias.name}")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in _BLOCKED_BUILTINS:
                self._refuse(node, f"{func.id}()", _BLOCKED_BUILTINS[func.id])
            elif func.id == "__import__" and node.args and isinstance(node.args[0], ast.Constant):
                self._check_module(node, str(node.args[0].value))
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "os"
            and func.attr in _OS_PROCESS_CALLS
        ):
            self._refuse(node, f"os.{func.attr}()", _NO_PROCESSES)
        if (target := self._data_file_written(node)) is not None:
            self._refuse(node, f"{_called_name(func) or 'a call'}() on the data file {target}", _data_file_hint())
        self.generic_visit(node)

    def _data_file_written(self, node: ast.Call) -> str | None:
        """The data file this call writes, moves or deletes, when a literal path names one."""
        func = node.func
        qualified = self._qualified(func) or ""
        name = _called_name(func)
        path_object = _path_object(func.value) if isinstance(func, ast.Attribute) else None
        if qualified in ("open", "io.open"):
            paths = [_argument(node, 0, "file")] if _mode_writes(_argument(node, 1, "mode")) else []
        elif qualified == "os.open":
            paths = [_argument(node, 0, "path")] if _flags_write(_argument(node, 1, "flags")) else []
        elif path_object is not None and name == "open":
            paths = [path_object] if _mode_writes(_argument(node, 0, "mode")) else []
        else:
            slots = _FUNCTIONS.get(qualified) or _WRITERS.get(name, ())
            paths = [_argument(node, position, keyword) for position, keyword in slots]
            if path_object is not None and name in _PATH_METHODS:
                paths.append(path_object)
                if name in ("rename", "replace"):
                    paths.append(_argument(node, 0, "target"))
        return next((found for path in paths if (found := self._data_name(path))), None)

    def _data_name(self, node: ast.AST | None) -> str | None:
        name = os.path.basename(_literal_tail(node) or "")
        return name if name in self.data_names else None

    def _qualified(self, func: ast.AST) -> str | None:
        """``os.remove`` for ``os.remove``, ``from os import remove`` then ``remove``, or ``np.save``."""
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        parts.append(self.aliases.get(func.id, func.id))
        return ".".join(reversed(parts))


def _called_name(func: ast.AST) -> str:
    """``to_csv`` for ``df.to_csv``, ``open`` for ``open``."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _argument(node: ast.Call, position: int, keyword: str) -> ast.AST | None:
    for item in node.keywords:
        if item.arg == keyword:
            return item.value
    if position < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args[: position + 1]):
        return node.args[position]
    return None


def _path_object(node: ast.AST | None) -> ast.AST | None:
    """``node`` when it builds a path object (``Path(...)``, ``Path(...) / "x"``), else None.

    A bare string is not a path object: ``"sales.csv".replace(...)`` is string work.
    """
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return node if _literal_tail(node.right) is not None else None  # only paths are divided by strings
    return node if isinstance(node, ast.Call) and _called_name(node.func) in _PATH_TYPES else None


def _literal_tail(node: ast.AST | None) -> str | None:
    """The last component of a path written literally: ``"a/b.csv"``, ``Path(d, "b.csv")``, ``d / "b.csv"``,
    ``os.path.join(d, "b.csv")`` or ``f"{d}/b.csv"``; None when it is computed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _literal_tail(node.right)
    if isinstance(node, ast.JoinedStr) and node.values:
        return _literal_tail(node.values[-1])
    if isinstance(node, ast.Call) and node.args and (_path_object(node) or _is_path_join(node.func)):
        return _literal_tail(node.args[-1])
    return None


def _is_path_join(func: ast.AST) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "join" and ast.unparse(func.value) == "os.path"


def _mode_writes(mode: ast.AST | None) -> bool:
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _flags_write(flags: ast.AST | None) -> bool:
    return flags is not None and any(
        (isinstance(sub, ast.Attribute) and sub.attr in _WRITE_FLAGS)
        or (isinstance(sub, ast.Name) and sub.id in _WRITE_FLAGS)
        for sub in ast.walk(flags)
    )


def _data_file_hint() -> str:
    return "the input data files are read-only; write results to a new file name instead"
