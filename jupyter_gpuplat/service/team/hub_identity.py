"""Who is calling the control plane: the JupyterHub user (and groups) behind the request's Hub token.

Only the `Authorization: token|Bearer <tok>` header counts: no cookie, no URL parameter and no
header naming a user is trusted, so nothing a user runs can change who they are. The token is
resolved with the Hub (`GET {hub_api_url}/user` sent *with that token*, through `HubAuth`, cached
`cache_max_age_seconds`); it must carry the service's access scope, else 403 with the scope to
grant. User tokens become a `HubUser` carrying the Hub groups (`auth.platform_username` turns it
into a `core.identity.Principal`); a service's token becomes `service:<name>` or is refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any

from jupyter_server.auth.identity import IdentityProvider, User
from jupyterhub.services.auth import HubAuth, check_scopes  # type: ignore[import-untyped]
from tornado import web
from traitlets import Bool, Integer, List, Unicode, default

from ...core.errors import Forbidden, Unavailable

AUTH_HEADER = re.compile(r"(?:token|bearer)\s+(\S+)\s*$", re.IGNORECASE)


@dataclass
class HubUser(User):
    """A Hub user as jupyter_server's `User`, with the Hub's groups (never from the request)."""

    groups: frozenset[str] = field(default_factory=frozenset)
    kind: str = "user"
    admin: bool = False


def access_scopes_for(service_name: str) -> list[str]:
    """The scopes that let a token use this service (either is enough)."""
    return [f"access:services!service={service_name}", "access:services"]


class HubIdentityProvider(IdentityProvider):
    """Identity from JupyterHub for `gpuplat server`; never used by embedded mode."""

    hub_api_url = Unicode(config=True, help="JupyterHub API URL (default: $JUPYTERHUB_API_URL).")
    api_token = Unicode(
        config=True, help="This service's own Hub token (default: $JUPYTERHUB_API_TOKEN); only for HubAuth's setup."
    )
    service_name = Unicode("gpuplat", config=True, help="The service's name in JupyterHub.")
    access_scopes = List(
        Unicode(),
        config=True,
        help="Scopes of which a token needs one to use the control plane "
        "(default: access:services!service=<service_name> and access:services).",
    )
    cache_max_age_seconds = Integer(
        60,
        config=True,
        help="Seconds a token's answer from the Hub is reused; a revoked token keeps working at most this long.",
    )
    allow_service_tokens = Bool(
        True,
        config=True,
        help="A Hub service's token (kind=service) acts as platform user 'service:<name>' "
        "(list it in the config's admins to let it administer); False refuses them.",
    )

    @default("access_scopes")
    def _access_scopes_default(self) -> list[str]:
        return access_scopes_for(self.service_name)

    @default("hub_api_url")
    def _hub_api_url_default(self) -> str:
        return os.environ.get("JUPYTERHUB_API_URL", "")

    @default("api_token")
    def _api_token_default(self) -> str:
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")

    _hub_auth: HubAuth | None = None
    _inflight: dict[str, asyncio.Future[dict[str, Any] | None]]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inflight = {}

    @property
    def hub_auth(self) -> HubAuth:
        if self._hub_auth is None:
            if not self.hub_api_url:
                raise Unavailable(
                    "the control plane does not know the JupyterHub API URL",
                    "run it as a Hub service or set --GpuPlatServer.hub_api_url=http://hub:8081/hub/api",
                )
            self._hub_auth = HubAuth(
                api_url=self.hub_api_url,
                api_token=self.api_token,
                cache_max_age=self.cache_max_age_seconds,
                access_scopes=set(self.access_scopes),
            )
        return self._hub_auth

    @property
    def auth_enabled(self) -> bool:
        return True

    @property
    def login_available(self) -> bool:
        return False

    def get_token(self, handler: web.RequestHandler) -> str | None:
        m = AUTH_HEADER.match(handler.request.headers.get("Authorization", ""))
        return m.group(1) if m else None

    async def get_user(self, handler: web.RequestHandler) -> User | None:
        if handler.request.method == "OPTIONS":
            return None  # CORS preflight carries no credentials
        token = self.get_token(handler)
        if not token:
            raise Forbidden(
                "no JupyterHub token: send 'Authorization: token <token>'",
                f"use a Hub token with the scope {self.access_scopes[0]} "
                "(in a user's server: $JUPYTERHUB_API_TOKEN, given that scope by Spawner.server_token_scopes)",
            )
        model = await self._resolve(token)
        if model is None:
            raise Forbidden(
                "JupyterHub does not accept this token (unknown, expired or revoked)",
                "get a new token from the Hub (its token page or POST /hub/api/users/<name>/tokens)",
            )
        if not check_scopes(set(self.access_scopes), set(model.get("scopes") or [])):
            who = model.get("name", "?")
            raise Forbidden(
                f"the token of {model.get('kind', 'user')} {who!r} lacks the scope {self.access_scopes[0]}",
                "a Hub admin grants it (c.JupyterHub.load_roles or extra_user_scopes) and lets servers' tokens "
                "carry it (c.Spawner.server_token_scopes, c.Spawner.oauth_client_allowed_scopes)",
            )
        user = self._user_of(model)
        handler._token_authenticated = True  # type: ignore[attr-defined]  # no cookies: no XSRF or origin check
        return user

    def should_check_origin(self, handler: web.RequestHandler) -> bool:
        return not getattr(handler, "_token_authenticated", False)

    def is_token_authenticated(self, handler: web.RequestHandler) -> bool:
        return bool(getattr(handler, "_token_authenticated", False))

    async def _resolve(self, token: str) -> dict[str, Any] | None:
        # Concurrent first requests with one token ask the Hub once (HubAuth caches only answers).
        key = hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
        pending = self._inflight.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._ask_hub(token))
            self._inflight[key] = pending
            pending.add_done_callback(lambda _: self._inflight.pop(key, None))
        return await asyncio.shield(pending)

    async def _ask_hub(self, token: str) -> dict[str, Any] | None:
        try:
            model = await self.hub_auth.user_for_token(token, sync=False)
        except web.HTTPError as e:  # HubAuth's own failure (the Hub unreachable or erring)
            raise Unavailable(
                f"cannot check the token with JupyterHub at {self.hub_api_url}: {e.log_message or e.status_code}",
                "the Hub API must be reachable from the control plane; retry shortly",
            ) from None
        return model if isinstance(model, dict) else None

    def _user_of(self, model: dict[str, Any]) -> HubUser:
        kind = str(model.get("kind") or "user")
        name = str(model.get("name") or "")
        if kind == "user" and name:
            groups = frozenset(str(g) for g in model.get("groups") or [])
            return HubUser(username=name, groups=groups, kind=kind, admin=bool(model.get("admin")))
        if kind == "service" and name and self.allow_service_tokens:
            return HubUser(username=f"service:{name}", kind=kind)
        raise Forbidden(
            f"a {kind} token cannot use the control plane",
            "use a user's token" + (" or a service's" if self.allow_service_tokens else ""),
        )
