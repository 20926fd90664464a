"""Who is asking: a platform username that may also carry the groups its identity provider vouches for.

`Principal` is a `str` (the username) so every signature that takes `user: str` keeps working and
what is stored (a run's owner) is the plain name. Groups come only from the identity provider
(JupyterHub in team mode), per request; they are never stored, and nothing a user sends can add one.
"""

from __future__ import annotations

from collections.abc import Iterable


class Principal(str):
    groups: frozenset[str]

    def __new__(cls, name: str, groups: Iterable[str] = ()) -> Principal:
        self = super().__new__(cls, name)
        self.groups = frozenset(groups)
        return self


def groups_of(user: str) -> frozenset[str]:
    """The user's groups: none for a plain name (embedded mode, token maps)."""
    return user.groups if isinstance(user, Principal) else frozenset()
