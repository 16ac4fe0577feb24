"""Where a :class:`~nbmemory.memory.Memory` sends its calls: the store's owner (the
service client, :mod:`.service.client`), or an engine this process owns (:class:`LocalBackend`)."""

from __future__ import annotations

from typing import Any, Protocol

from .errors import NbMemoryError, StoreUnavailable
from .files import disk_full
from .operations import disk_full_error


class Backend(Protocol):
    def call(self, operation: str, **arguments: Any) -> Any: ...

    def close(self) -> None: ...


class LocalBackend:
    """Runs operations on an :class:`~nbmemory.engine.Engine` owned by this process."""

    def __init__(self, engine):
        self.engine, self.closed = engine, False

    def call(self, operation: str, **arguments: Any) -> Any:
        if self.closed:  # (recall would answer from the indexes still in memory)
            raise StoreUnavailable("This Memory is closed; open the store again.")
        try:
            return getattr(self.engine, operation)(**arguments)
        except NbMemoryError:
            raise
        except Exception as exc:  # as the owner says it (service/handler.py)
            if full := disk_full(exc):
                raise disk_full_error(operation, self.engine.directory, full) from exc
            raise

    def close(self) -> None:
        self.closed = True
        self.engine.close()
