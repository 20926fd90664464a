"""GPU sessions: a notebook's kernel run inside a lease.

`provisioner.py` (the kernel provisioner, entry point `gpuplat-session`), `kernelspecs.py` (the
session kernelspecs, in a directory private to the server), `client.py` (`SessionClient`: what
the provisioner asks of the platform, and its in-process form), `kernel_activity.py` (the
kernel's busy/idle as the provisioner reports it); in remote mode `http_client.py` (the same
protocol over REST) and `remote_kernels.py` (kernelspecs from the control plane's projects and
presets).
"""
