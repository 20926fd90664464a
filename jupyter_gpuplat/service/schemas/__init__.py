"""The wire contract: pydantic models of every request and response the service renders.

`models.py` (projects, presets, queues, previews, errors, ...; re-exports the run models),
`runs.py` (runs, sweeps, leases), `base.py` (the shared base model), `insights.py` (GET insights,
POST whatif). `service/openapi.py` builds the OpenAPI document from them, and the sidebar's
types are generated from that document.
"""
