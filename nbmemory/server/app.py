"""The extension app: configuration, the one Memory the server uses, and its thread.

Every Memory call runs on one worker thread so that recall (which embeds the query)
never blocks the tornado loop, and so that the store is touched by one thread at a time.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from jupyter_server.extension.application import ExtensionApp
from traitlets import Unicode

from .. import __version__
from ..config import DEFAULT_MODEL, StoreLocation, locate_store
from ..memory import Memory

OWNER_MODE = "in-process"
# How Memory.status() names its mode, as the panel's status line shows it.
OWNER_NAMES = {"local": "in-process", "service": "owner service"}
# web_app.settings key of the MemoryHost (``settings["nbmemory"]`` is the ExtensionApp itself).
HOST_KEY = "nbmemory_host"


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

    def memory(self) -> Memory:
        with self._lock:
            if self._memory is None:
                self._memory = self._opener(self.location, self.model)
            return self._memory

    async def run(self, operation: Callable[[Memory], Any]) -> Any:
        """Run ``operation(memory)`` on the worker thread and return its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: operation(self.memory()))

    def status(self, memory: Memory) -> dict[str, Any]:
        status = memory.status()
        status.setdefault("owner", OWNER_NAMES.get(status.get("mode"), OWNER_MODE))
        status["store_reason"] = self.location.reason
        status["server_version"] = __version__
        return status

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
                    help="Store directory. Empty: NBMEMORY_HOME, the nearest .nbmemory/ above "
                         "the server's root directory, its git root, or the root directory.")
    model = Unicode(DEFAULT_MODEL, config=True,
                    help="sentence-transformers model used to embed notes and queries.")

    def initialize_settings(self) -> None:
        root = Path(self.serverapp.root_dir).expanduser()
        location = locate_store(self.store or None, cwd=root)
        self.host = MemoryHost(location, self.model)
        self.settings[HOST_KEY] = self.host
        self.log.info("nbmemory %s: store %s", __version__, location)

    def initialize_handlers(self) -> None:
        from .handlers import routes

        self.handlers.extend(routes())

    async def stop_extension(self) -> None:
        host = getattr(self, "host", None)
        if host is not None:
            await asyncio.get_running_loop().run_in_executor(None, host.close)
