"""``python -m datalyst`` is the ``datalyst`` command."""

from datalyst.cli import main

main()
