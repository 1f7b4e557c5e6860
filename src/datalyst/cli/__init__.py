"""The ``datalyst`` command. Thin: parses options, calls the packages, prints results."""

from datalyst.cli._app import app, main

__all__ = ["app", "main"]
