"""The wire contract: pydantic models of every request and response the service renders.

`models.py` (queues, presets, projects, identity, capacity, admin writes; the lists of response
and stream models and `render`; re-exports every model below, so `models.X` names them all),
`runs.py` (runs, sweeps, leases), `errors.py` (the error body), `explain.py` (explain, the
session kernel's reports), `results.py` (preview, outputs, metrics, compare, status events),
`base.py` (the shared base model), `insights.py` (GET insights, POST whatif).
`service/openapi.py` builds the OpenAPI document from them, and the sidebar's types are
generated from that document.
"""
