"""The client room: the platform's REST API as Python, and the wording every client shares.

`rest.py` is the client kernels, scripts and the CLI use (`from jupyter_gpuplat.client import
Client`, the public path); `http/` is the one HTTP core under every Python client of the API (one
error family decoded once; a sync face for `Client`, an async one for a remote-mode server's
control-plane calls); `explaining.py`, `runedits.py`, `runnames.py`, `sweeping.py` and
`suggest.py` are the texts and parsing the CLI, the magics and the widgets share. Nothing here
imports the service, the engine, the store or the executors (import-linter checks it).
"""

from .rest import API, FINAL, Client, GpuPlatAPIError, parse_params, session_notebook

__all__ = ["API", "FINAL", "Client", "GpuPlatAPIError", "parse_params", "session_notebook"]
