"""The local web app (``datalyst serve``): ask about files with every step streamed, browse runs and data.

Model code runs only in the sandbox, never in the server; every request needs the server's token.
"""

from datalyst.web._app import ServeConfig, create_app, listen
from datalyst.web._security import is_loopback

__all__ = ["ServeConfig", "create_app", "is_loopback", "listen"]
