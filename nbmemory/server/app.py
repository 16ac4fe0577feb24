"""The extension app: configuration, the one Memory the server uses, and its thread.

Every Memory call runs on one worker thread so that recall (which embeds the query)
never blocks the tornado loop, and so that the store is touched by one thread at a time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from jupyter_server.extension.application import ExtensionApp
from traitlets import Unicode

from .. import __version__
from ..config import DEFAULT_MODEL, StoreLocation, configured_model, locate_store
from ..memory import Memory
from .shared import HOST_KEY

OWNER_MODE = "in-process"
# How Memory.status() names its mode, as the panel's status line shows it.
OWNER_NAMES = {"local": "in-process", "service": "owner service"}
# Operations that need the embedding model: the first one after an owner starts waits for it.
EMBEDS = frozenset({"recall", "remember", "supersede", "edit"})


def open_memory(location: StoreLocation, model: str) -> Memory:
    """The one place the server opens the store: through the store's owner process,
    which the kernels, the CLI and MCP share."""
    return Memory.open(location.path, model=model, mode="service")


class MemoryHost:
    """Holds the server's Memory, opened on first use and reopened after a failure.

    Opening lazily keeps the server starting fast and lets it report a clear 503
    (store owned by another process, model missing...) instead of failing to load.
    """

    def __init__(self, location: StoreLocation, model: str,
                 opener: Callable[[StoreLocation, str], Memory] = open_memory):
        self.location = location
        self.model = model
        self._opener = opener
        self._memory: Memory | None = None
        self._lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nbmemory")
        # What the worker is doing, read by the cheap ``owner`` route (never queued behind it).
        self.opening = False
        self.busy: str | None = None
        self.busy_since: float | None = None
        self.owner_pid: int | None = None  # the owner the last status came from
        self.model_loaded_pid: int | None = None  # an owner known to hold the model

    def memory(self) -> Memory:
        with self._lock:
            if self._memory is None:
                self.opening = True
                try:
                    self._memory = self._opener(self.location, self.model)
                finally:
                    self.opening = False
            return self._memory

    async def run(self, operation: Callable[[Memory], Any], name: str = "") -> Any:
        """Run ``operation(memory)`` on the worker thread and return its result.

        ``name`` (an operation such as "recall") is what the ``owner`` route reports while
        it runs, so that the panel can say what a slow request waits for.
        """
        def work():
            self.busy, self.busy_since = name or "work", time.monotonic()
            try:
                result = operation(self.memory())
                if name in EMBEDS and self.owner_pid is not None:
                    self.model_loaded_pid = self.owner_pid
                return result
            finally:
                self.busy, self.busy_since = None, None

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, work)

    def status(self, memory: Memory) -> dict[str, Any]:
        status = memory.status()
        status.setdefault("owner", OWNER_NAMES.get(status.get("mode"), OWNER_MODE))
        status["store_reason"] = self.location.reason
        status["server_version"] = __version__
        status["running"] = True
        pid = status.get("owner_pid") or status.get("pid")
        self.owner_pid = pid
        if status.get("model_loaded"):
            self.model_loaded_pid = pid
        return status

    def owner_state(self) -> dict[str, Any]:
        """Who serves the store and what the worker waits for, without touching the store
        or starting an owner (cheap: a lock probe, a file and one ``/hello``)."""
        from ..service import owner_info

        try:
            info = owner_info(self.location.path)
        except Exception as exc:  # noqa: BLE001 - a probe must never fail the request
            info = {"mode": "unknown", "error": str(exc)}
        busy_s = (round(time.monotonic() - self.busy_since, 1)
                  if self.busy_since is not None else None)
        pid = info.get("pid") if info else None
        if info is None and self._memory is not None:
            try:
                self.executor.submit(self._collect_stopped_owners)
            except RuntimeError:  # shutting down
                pass
        return {
            "running": info is not None,
            "mode": info.get("mode") if info else None,
            "state": info.get("state") if info else None,
            "pid": pid,
            "uptime_s": info.get("uptime_s") if info else None,
            "model": info.get("model") if info else None,
            "model_loaded": (pid is not None and pid == self.model_loaded_pid) or None,
            "opening": self.opening,
            "busy": self.busy,
            "busy_s": busy_s,
        }

    def _collect_stopped_owners(self) -> None:
        """An owner this server started and ``nbmemory stop`` ended stays a zombie child
        (<defunct>) until this process collects it. Runs on the worker, which owns the
        Memory. (A public ``reap()`` on the service backend would be nicer than this.)"""
        reap = getattr(getattr(self._memory, "_backend", None), "_reap", None)
        if reap is not None:
            reap()

    def not_running(self) -> dict[str, Any]:
        """What status says when no owner serves the store (none is started for it)."""
        # A team store is named by its address, as a running owner's status names it (its
        # local directory is only a cache).
        return {"running": False, "store": self.location.address or str(self.location.path),
                "store_reason": self.location.reason, "server_version": __version__,
                "owner": "not running"}

    def close(self) -> None:
        def close_memory():
            with self._lock:
                if self._memory is not None:
                    self._memory.close()
                    self._memory = None

        self.executor.submit(close_memory).result(timeout=60)
        self.executor.shutdown(wait=True)


class NbMemoryExtension(ExtensionApp):
    """nbmemory's REST API for the JupyterLab panel."""

    name = "nbmemory"
    load_other_extensions = True

    store = Unicode("", config=True,
                    help="Store directory, or a team store's postgresql:// address. Empty: "
                         "NBMEMORY_HOME, the nearest .nbmemory/ above the server's root "
                         "directory, its git root, or the root directory.")
    model = Unicode("", config=True,
                    help="sentence-transformers model used to embed notes and queries. "
                         f"Empty: NBMEMORY_MODEL, else {DEFAULT_MODEL} (as the magics, the "
                         "CLI and the MCP server choose).")

    def initialize_settings(self) -> None:
        root = Path(self.serverapp.root_dir).expanduser()
        location = locate_store(self.store or None, cwd=root)
        self.host = MemoryHost(location, configured_model(self.model or None))
        self.settings[HOST_KEY] = self.host
        self.log.info("nbmemory %s: store %s", __version__, location)

    def initialize_handlers(self) -> None:
        from .routes import routes

        self.handlers.extend(routes())

    async def stop_extension(self) -> None:
        host = getattr(self, "host", None)
        if host is not None:
            await asyncio.get_running_loop().run_in_executor(None, host.close)
