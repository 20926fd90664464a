"""Team mode's control plane: `gpuplat server`.

`server.py` (the same routes in a plain tornado app, no kernels or files), `hub_identity.py`
(JupyterHub tokens -> user and groups, the service scope), `leadership.py` (the leader
campaign: elected -> fence and start, deposed -> exit), `health.py` and `prom.py` (readiness,
liveness, Prometheus metrics).
"""
