"""Identity for small shared servers and tests: several users, one token each.

    c.ServerApp.identity_provider_class = "jupyter_gpuplat.auth.TokenMapIdentityProvider"
    c.TokenMapIdentityProvider.tokens = {"s3cret-a": "alice", "s3cret-b": "bob"}

A request carrying a mapped token (``Authorization: token …`` or ``?token=``)
is that user. In a Jupyter server a browser then gets a login cookie; `gpuplat server`
turns cookies off (``login_cookies``): it reads the token only, and checks no XSRF.
The server's own token still works and means the server's owner (``GpuPlat.default_user``).
For real multi-user deployments use JupyterHub.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.identity import IdentityProvider, PasswordIdentityProvider, User
from tornado import web
from traitlets import Bool, Dict

from ..core.identity import Principal


class TokenMapIdentityProvider(IdentityProvider):
    tokens = Dict(
        key_trait=None,
        value_trait=None,
        config=True,
        help="Map of API token -> username. Each token authenticates as that user.",
    )
    login_cookies = Bool(
        True,
        config=True,
        help="Whether a token-authenticated request gets a login cookie, and a cookie identifies its sender. "
        "gpuplat server sets False: it has no cookie secret and checks no XSRF, so a token alone must count.",
    )

    def get_user_cookie(self, handler: web.RequestHandler) -> Any:
        return super().get_user_cookie(handler) if self.login_cookies else None

    def set_login_cookie(self, handler: web.RequestHandler, user: User) -> None:
        if self.login_cookies:
            super().set_login_cookie(handler, user)

    def clear_login_cookie(self, handler: web.RequestHandler) -> None:
        if self.login_cookies:
            super().clear_login_cookie(handler)

    async def get_user_token(self, handler: web.RequestHandler) -> User | None:
        # Hooking here (not get_user) keeps jupyter_server's cookie and XSRF handling:
        # a mapped token counts as token-authenticated exactly like the server's own.
        token = self.get_token(handler)
        if token and token in self.tokens:
            name = str(self.tokens[token])
            return User(username=name, name=name, display_name=name)
        return await super().get_user_token(handler)

    def mapped_users(self) -> set[str]:
        return {str(v) for v in self.tokens.values()}


def platform_username(identity_provider: IdentityProvider, user: User, default_user: str) -> str:
    """The platform user behind a Jupyter user.

    The stock single-user providers authenticate "whoever holds the server token";
    that person is the server's owner. Other providers (JupyterHub) name real users.
    """
    if isinstance(identity_provider, TokenMapIdentityProvider) and user.username in identity_provider.mapped_users():
        return user.username
    if type(identity_provider) in (IdentityProvider, PasswordIdentityProvider, TokenMapIdentityProvider):
        return default_user
    groups = getattr(user, "groups", None)  # the control plane's Hub identity vouches for groups
    return Principal(user.username, groups) if groups is not None else user.username
