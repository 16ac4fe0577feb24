"""nbmemory: keep what you learn in notebooks, find it again, know when it went stale.

Importing this package is cheap: the engine, DuckDB and the embedding model load on
first use, never at ``import nbmemory`` or ``%load_ext nbmemory``.
"""

from ._version import __version__

__all__ = ["Memory", "__version__", "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name):
    if name == "Memory":
        from .memory import Memory

        return Memory
    raise AttributeError(f"module 'nbmemory' has no attribute {name!r}")


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt panel (``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "nbmemory"}]


def load_ipython_extension(ipython):
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from .magics import unload_ipython_extension as unload

    unload(ipython)
