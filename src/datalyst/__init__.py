"""datalyst: data-analytic LLM agents that answer questions about data files by running code safely."""

from importlib.metadata import PackageNotFoundError, version

from datalyst.errors import DatalystError

try:
    __version__ = version("datalyst")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = ["DatalystError", "__version__"]
