"""The Jupyter server extension: nbmemory's REST API under ``/nbmemory/``.

Enabled on install (``etc/jupyter/jupyter_server_config.d/nbmemory.json``). Configure it
with ``--NbMemoryExtension.store=PATH`` or ``c.NbMemoryExtension.store`` in a config file.
Nothing here is imported by ``import nbmemory`` or ``%load_ext nbmemory``.
"""

from __future__ import annotations


def _jupyter_server_extension_points():
    from .app import NbMemoryExtension

    return [{"module": "nbmemory.server", "app": NbMemoryExtension}]
