"""The run room: what executes inside a run, in the run's own interpreter.

`tracking.py` (`from jupyter_gpuplat import tracking`: params, metrics, outputs) and `nbrun.py`
(`python -m jupyter_gpuplat.nbrun NOTEBOOK`: a notebook run headless). A run pays for what it
imports, and may run an older or newer image than the server: this room imports only `core`
(import-linter checks it).
"""
