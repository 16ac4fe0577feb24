"""A Jupyter identity provider for the browser tests: every authenticated request is Ana,
as on JupyterHub (the test server runs with ``--ServerApp.identity_provider_class``)."""

from __future__ import annotations

import inspect

from jupyter_server.auth.identity import IdentityProvider, User

NAME = "ana"


class NamedUser(IdentityProvider):
    async def get_user(self, handler):
        user = super().get_user(handler)
        if inspect.isawaitable(user):
            user = await user
        return None if user is None else User(NAME, name="Ana Analyst", display_name="Ana")
