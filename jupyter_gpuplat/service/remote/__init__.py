"""Remote mode in each user's Jupyter server: no platform here, the control plane's over HTTP.

`forward.py` (forwards `/gpuplat/api/*` with the visitor's token, streams included; sends
scripts as content; httpx, as a proxy), `control_plane.py` (the control plane's REST calls and
one shared events feed, through the client room's async face, `client/http/aio.py`).
"""
