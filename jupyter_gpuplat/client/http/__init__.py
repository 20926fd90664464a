"""The one HTTP core of the Python clients of the REST API.

- `errors.py`: the one error family (`GpuPlatAPIError`, each answer also the core error of its
  status) and the one decoder of an error answer, `decode_error`; `unreachable` for no answer.
- `sync.py`: the sync face (requests), what `Client` uses: kernels, scripts, the CLI, the magics
  and the widgets (`CuttableHTTP`: streams another thread can end at once).
- `aio.py`: the async face (httpx), what a remote-mode server's `ControlPlaneAPI` and its events
  feed use (`service/remote/control_plane.py`).

Both feed their streams to the one SSE parser, `core/sse.py`. Nothing else in the package
imports an HTTP client library to talk to the API (import-linter checks it); the remote-mode
forwarder (`service/remote/forward.py`) proxies with httpx and is the one exception.
"""

from .errors import CLIENT, GpuPlatAPIError, Unreachable, Wording, decode_error, unreachable

__all__ = ["CLIENT", "GpuPlatAPIError", "Unreachable", "Wording", "decode_error", "unreachable"]
