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
_WRITE_METHODS = {
    "to_csv", "to_excel", "to_parquet", "to_json", "to_feather", "to_pickle", "to_hdf", "to_stata",
    "to_sql", "to_html", "to_xml", "to_orc", "savefig", "write_text", "write_bytes", "unlink",
    "rename", "touch", "chmod", "remove", "rmtree", "move", "truncate",
}  # fmt: skip


def screen(code: str, data_files: Iterable[str] = ()) -> str | None:
    """Return why ``code`` is refused, or None when it may run. Syntax errors are left to the interpreter."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    checker = _Checker({os.path.basename(f) for f in data_files})
    checker.visit(tree)
    return checker.problem


class _Checker(ast.NodeVisitor):
    def __init__(self, data_names: set[str]) -> None:
        self.data_names = data_names
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
            elif func.id == "open" and self._names_data_file(node.args[:1]) and _opens_for_writing(node):
                self._refuse(node, "writing to a data file", _data_file_hint())
        elif isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "os" and func.attr in _OS_PROCESS_CALLS:
                self._refuse(node, f"os.{func.attr}()", _NO_PROCESSES)
            elif func.attr in _WRITE_METHODS and (
                self._names_data_file(node.args) or self._names_data_file([func.value])
            ):
                self._refuse(node, f"{func.attr}() on a data file", _data_file_hint())
        self.generic_visit(node)

    def _names_data_file(self, nodes: Iterable[ast.AST]) -> bool:
        return any(
            isinstance(sub, ast.Constant)
            and isinstance(sub.value, str)
            and os.path.basename(sub.value) in self.data_names
            for node in nodes
            for sub in ast.walk(node)
        )


def _opens_for_writing(node: ast.Call) -> bool:
    mode: ast.AST | None = node.args[1] if len(node.args) > 1 else None
    for keyword in node.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _data_file_hint() -> str:
    return "the input data files are read-only; write results to a new file name instead"
