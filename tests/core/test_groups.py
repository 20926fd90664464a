"""Team mode's groups: project roles and platform admins granted to identity-provider groups.

A user entry in `members` wins over any group; groups come only from the identity provider
(a `Principal`), so a plain name (embedded mode) has none.
"""

from __future__ import annotations

import pytest
from jupyter_server.auth.identity import IdentityProvider, User

from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.errors import ConfigErrors, Forbidden, NotFound
from jupyter_gpuplat.core.identity import Principal, groups_of
from jupyter_gpuplat.core.policy import (
    admins_of,
    can_see,
    is_platform_admin,
    require_platform_admin,
    require_project,
    role_in,
    visible_projects,
)
from jupyter_gpuplat.service.auth import platform_username

CFG = parse_config(
    {
        "admins": ["root"],
        "admin_groups": ["platform-team"],
        "queues": [{"name": "q", "quota": {"gpu": 4}}],
        "projects": [
            {"name": "vision", "members": {"carol": "viewer"}, "groups": {"team-a": "member", "leads": "admin"}},
            {"name": "nlp", "groups": {"team-b": "member"}},
        ],
    }
)


def test_a_group_grants_its_role_and_the_highest_group_wins() -> None:
    alice = Principal("alice", ["team-a"])
    assert role_in(CFG, alice, "vision") == "member"
    assert role_in(CFG, Principal("dana", ["team-a", "leads"]), "vision") == "admin"
    assert visible_projects(CFG, alice) == ["vision"]
    assert not can_see(CFG, alice, "nlp")
    assert role_in(CFG, Principal("bob", ["team-b"]), "nlp") == "member"


def test_a_member_entry_wins_over_the_users_groups() -> None:
    # carol is a viewer by name: being in leads does not make her an admin of vision.
    assert role_in(CFG, Principal("carol", ["leads"]), "vision") == "viewer"


def test_a_plain_name_has_no_groups_so_embedded_mode_is_unchanged() -> None:
    assert groups_of("alice") == frozenset()
    assert role_in(CFG, "alice", "vision") is None
    with pytest.raises(NotFound) as e:
        require_project(CFG, "alice", "vision", "viewer")
    assert e.value.hint == "your projects: none"


def test_platform_admins_from_a_group_and_named_in_refusals() -> None:
    assert is_platform_admin(CFG, Principal("erin", ["platform-team"]))
    assert role_in(CFG, Principal("erin", ["platform-team"]), "nlp") == "admin"
    assert not is_platform_admin(CFG, Principal("alice", ["team-a"]))
    with pytest.raises(Forbidden) as e:
        require_platform_admin(CFG, Principal("alice", ["team-a"]))
    assert e.value.hint == "platform admins: root, group platform-team"
    assert admins_of(CFG.project("vision")) == ["group leads"]  # type: ignore[arg-type]


def test_a_principal_is_its_name_wherever_a_name_is_used() -> None:
    alice = Principal("alice", ["team-a"])
    assert alice == "alice" and {alice: 1}["alice"] == 1 and str(alice) == "alice"
    assert alice.groups == frozenset({"team-a"})


class _GroupUser(User):
    groups: frozenset[str] = frozenset()


class _VouchingProvider(IdentityProvider):
    """Stands in for the control plane's Hub identity (a real Hub is in tests/service/test_control_plane.py)."""


def test_platform_username_keeps_the_groups_an_identity_provider_vouches_for() -> None:
    user = _GroupUser(username="alice", name="alice", display_name="alice")
    user.groups = frozenset({"team-a"})
    name = platform_username(_VouchingProvider(), user, "owner")
    assert name == "alice" and groups_of(name) == frozenset({"team-a"})
    plain = platform_username(_VouchingProvider(), User(username="bob"), "owner")
    assert plain == "bob" and groups_of(plain) == frozenset()


def test_groups_are_validated_like_members() -> None:
    with pytest.raises(ConfigErrors, match="groups"):
        parse_config({"projects": [{"name": "p", "groups": {"team-a": "owner"}}]})
