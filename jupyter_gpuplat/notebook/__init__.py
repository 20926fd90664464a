"""The notebook room: what a user meets inside a kernel.

`magics.py` (`%load_ext jupyter_gpuplat`: the %gpu_submit family) and `widgets/` (Launcher,
RunMonitor, Compare, ...; public as `jupyter_gpuplat.widgets`). Both talk to the server through
`client/` only.
"""
