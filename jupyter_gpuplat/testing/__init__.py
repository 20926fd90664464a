"""Test doubles shipped with the package, named as such.

Nothing in the product imports from here: a platform never runs on them by
accident. `k8s_emulator` is a Kubernetes API emulator served over real HTTP.
"""
