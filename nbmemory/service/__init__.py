"""One owner process per store, and the client every other process uses to reach it.

``python -m nbmemory.service --store DIR`` runs an owner in the foreground; clients
(``Memory.open(..., mode="service")``) start one on demand. Importing this package is
light: the owner's engine is imported only by :func:`serve`.

- :func:`serve` -- own and serve a store until idle, stopped or signalled.
- :func:`stop` -- ask a store's owner to exit and wait for it.
- :func:`owner_info` -- who owns a store (pid, version, model, uptime, queue), or None.
"""

from __future__ import annotations

__all__ = ["ServiceBackend", "owner_info", "serve", "stop"]


def serve(store, **options) -> None:
    from .owner import serve as run

    run(store, **options)


def __getattr__(name):
    if name == "ServiceBackend":
        from . import client

        return client.ServiceBackend
    if name in ("owner_info", "stop"):
        from . import control

        return getattr(control, name)
    raise AttributeError(f"module 'nbmemory.service' has no attribute {name!r}")
