"""Warm launchers: pre-started processes that fork each run's launcher (on by default).

`launcher.py` (stdlib only, run by path: keeps spare forks of `../launcher.py` ready),
`notebooks.py` (its twin with nbclient and ipykernel imported once, `python -m` this path),
`client.py` (the executor's end of their socket) and `slots.py` (the executor's two of them).
"""
